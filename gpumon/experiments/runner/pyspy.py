"""``--profile``: py-spy recordings of the training processes (speedscope JSON), after a permission check.

Finding py-spy and explaining its failures is shared with the live monitor's stack dialog
(``gpumon.core.jobs.pyspy``, which imports no Textual).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpumon.core.jobs.pyspy import dump_stack, find_py_spy

PREFLIGHT_TIMEOUT_S = 20.0
RATE_HZ = 100


@dataclass(frozen=True)
class PySpy:
    """A usable py-spy, or why there is none."""

    path: str | None
    problem: str | None

    @property
    def usable(self) -> bool:
        return self.path is not None and self.problem is None


def check_pyspy() -> PySpy:
    """Find py-spy and try it on a short-lived child: a missing ptrace permission becomes a clear reason."""
    path = find_py_spy()
    if path is None:
        return PySpy(None, "py-spy is not installed (pip install py-spy)")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dump = dump_stack("check", sleeper.pid, PREFLIGHT_TIMEOUT_S, path)
    finally:
        sleeper.kill()
        sleeper.wait()
    return PySpy(path, None if dump.ok else dump.text.rstrip("."))


def record_argv(pyspy: str, pid: int, out: Path) -> list[str]:
    """Record ``pid`` until it exits, without pausing it (``--nonblocking``), as speedscope JSON."""
    return [
        pyspy,
        "record",
        "--pid",
        str(pid),
        "--format",
        "speedscope",
        "--output",
        str(out),
        "--rate",
        str(RATE_HZ),
        "--nonblocking",
    ]
