"""stop and attach print a run directory's name, which is anyone's text: control characters come out escaped."""

from __future__ import annotations

import subprocess
import sys

from tests.tracegen import exclusive


def test_stop_of_a_run_named_with_escapes_prints_them_escaped(tmp_path):
    run = exclusive(tmp_path / "20261122-110000-\x1b[2J\x07bell")
    done = subprocess.run(
        [sys.executable, "-m", "gpumon", "stop", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr, done.stderr
    assert "is not running" in done.stderr and "bell" in done.stderr


def test_attach_without_a_terminal_names_the_run_escaped(tmp_path):
    run = exclusive(tmp_path / "20261122-110000-\x1b]0;title\x07")
    done = subprocess.run(
        [sys.executable, "-m", "gpumon", "attach", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "\x1b" not in done.stderr and "\x07" not in done.stderr
