"""py-spy failures become one readable sentence."""

from __future__ import annotations

import os

from gpumon.core.jobs.pyspy import PERMISSION_HINT, dump_stack, explain


def test_failures_are_explained():
    assert (
        explain(
            1,
            "Error: Failed to get process executable name.\n0: Permission denied (os error 13)",
            1,
        )
        == PERMISSION_HINT
    )
    assert (
        explain(1, "Error: ... Check that the process is running.\n No such file or directory", 42)
        == "process 42 is gone."
    )
    assert explain(1, "Error: Failed to find python version from target process", 42).endswith(
        "not look like a Python process."
    )
    assert explain(2, "\n  something odd\n", 42) == "py-spy failed (status 2): something odd"


def test_missing_py_spy_and_a_gone_process(tmp_path):
    missing = dump_stack("A", os.getpid(), executable=str(tmp_path / "py-spy"))
    assert not missing.ok and "not found" in missing.text
    gone = dump_stack("A", 2**22 + 12345)
    assert not gone.ok and ("gone" in gone.text or "not installed" in gone.text)
