"""What a failed write means to the user, in a few words (gpumon.core.store.recorder.describe_write_error), and the
labels a run directory may carry. Written for the mutation run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import errno
from pathlib import Path

from gpumon.core.store.recorder import describe_write_error, safe_label

RUN = Path("/runs/20261126-050000-x")


def test_each_errno_in_words() -> None:
    assert describe_write_error(OSError(errno.ENOSPC, "No space left on device"), RUN) == f"no space left on {RUN}"
    assert describe_write_error(OSError(errno.EDQUOT, "Disk quota exceeded"), RUN) == f"disk quota exceeded on {RUN}"
    assert describe_write_error(OSError(errno.EROFS, "Read-only"), RUN) == f"{RUN} is on a read-only file system"
    assert describe_write_error(OSError(errno.ENOENT, "No such file"), RUN) == f"run directory {RUN} was removed"
    for code in (errno.EACCES, errno.EPERM):
        assert describe_write_error(OSError(code, "Permission denied"), RUN) == f"permission denied writing {RUN}"
        named = OSError(code, "Permission denied", "/runs/x/steps.csv")
        assert describe_write_error(named, RUN) == "permission denied writing /runs/x/steps.csv"


def test_any_other_error_by_its_own_words() -> None:
    assert describe_write_error(OSError(errno.EIO, "Input/output error"), RUN) == f"Input/output error ({RUN})"
    assert describe_write_error(OSError(errno.EIO, "Input/output error", "/runs/x/device.csv"), RUN) == (
        "Input/output error (/runs/x/device.csv)")
    assert describe_write_error(OSError("the disk is not keeping up"), RUN) == f"the disk is not keeping up ({RUN})"


def test_a_label_usable_in_a_directory_name() -> None:
    assert safe_label("fcn+gemm r1") == "fcn+gemm-r1"
    assert safe_label("../../etc/passwd") == "etc-passwd"
    assert safe_label("...") == "run" and safe_label("") == "run"
    assert safe_label("x" * 100) == "x" * 80
