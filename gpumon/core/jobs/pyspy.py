"""``py-spy dump`` of a workload, with every failure turned into one readable sentence (call off the UI thread)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 15.0
PERMISSION_HINT = (
    "permission denied: py-spy must be allowed to read another process's memory. "
    "Run gpumon as root, allow ptrace (sudo sysctl kernel.yama.ptrace_scope=0), "
    "or in a container add --cap-add SYS_PTRACE."
)


@dataclass(frozen=True)
class StackDump:
    """The Python stacks of one process now, or why they could not be read."""

    slot: str
    pid: int
    ok: bool
    text: str


def find_py_spy() -> str | None:
    """py-spy next to this Python (a venv without PATH), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def explain(status: int, output: str, pid: int) -> str:
    """One sentence for a failed py-spy run."""
    lowered = output.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return PERMISSION_HINT
    if (
        "no such file" in lowered
        or "no such process" in lowered
        or "check that the process is running" in lowered
    ):
        return f"process {pid} is gone."
    if "failed to find python" in lowered or "python version" in lowered:
        return f"process {pid} does not look like a Python process."
    first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    return f"py-spy failed (status {status}): {first}"


def dump_stack(
    slot: str, pid: int, timeout: float = TIMEOUT_S, executable: str | None = None
) -> StackDump:
    """Run ``py-spy dump --pid PID``; blocks up to ``timeout`` seconds."""
    exe = executable or find_py_spy()
    if exe is None:
        return StackDump(slot, pid, False, "py-spy is not installed (pip install py-spy).")
    try:
        done = subprocess.run(
            [exe, "dump", "--pid", str(pid)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "RUST_BACKTRACE": "0"},
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return StackDump(slot, pid, False, f"py-spy not found at {exe}.")
    except subprocess.TimeoutExpired:
        return StackDump(slot, pid, False, f"py-spy did not answer within {timeout:.0f} s.")
    except OSError as exc:
        return StackDump(slot, pid, False, f"cannot run py-spy: {exc.strerror or exc}")
    if done.returncode != 0:
        return StackDump(slot, pid, False, explain(done.returncode, done.stderr + done.stdout, pid))
    return StackDump(slot, pid, True, done.stdout.rstrip())
