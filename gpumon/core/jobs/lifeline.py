"""A process's end: a child's tied to its parent's (Linux PR_SET_PDEATHSIG), even across ``kill -9``; a child
given its time to exit, then killed; and an exit that skips the interpreter's teardown once the work is out."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Callable

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL) -> None:
    """Run in the child before exec: get ``signum`` when the parent dies; exit now if it already has.

    Linux sends the signal when the *thread* that forked the child exits, so fork
    from a thread that lives as long as the parent (the main thread).
    """
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def wait_or_kill(child: subprocess.Popen, timeout: float, kill: Callable[[], None]) -> None:
    """Wait ``timeout`` seconds for ``child`` (already told to stop) to exit; else ``kill()`` it (SIGKILL to its
    group) and reap it."""
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired:
        kill()
        child.wait()


def exit_now(status: int) -> None:
    """Flush stdout and stderr, then end the process without the interpreter's teardown (no atexit, no
    finalisers): for a process whose answer is out and whose only work left is freeing memory (~0.2 s with
    pandas or scipy loaded). A reader that went away loses what was not flushed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)
