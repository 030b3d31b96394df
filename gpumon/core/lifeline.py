"""Tie a child process's life to its parent's (Linux PR_SET_PDEATHSIG), even across ``kill -9``."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

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
