"""``gpumon stop`` and the viewer's ``x``: SIGTERM to a run's proven runner, and only to one of the caller's own.

Which process is a run's runner is the store's to say (``core/store/runner.py``: the process that holds its
``runner.lock``); sending it a signal is process control, and lives here with the jobs.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

from gpumon.core.store.runner import RunnerInfo, runner_process, user_name
from gpumon.errors import UsageError


def stop_runner(run_dir: Path, info: RunnerInfo | None, any_user: bool = False) -> bool:
    """Ask the proven runner of ``run_dir`` to stop as ``q`` would (SIGTERM: it stops its jobs and finalises the run);
    False if none runs. Another user's runner is refused (UsageError) unless ``any_user``."""
    try:
        process = runner_process(run_dir, info)
    except PermissionError:
        raise UsageError(
            f"{Path(run_dir).name}: its runner is another user's process; you can stop your own runs only"
        ) from None
    if process is None:
        return False
    try:
        uid = process.uids().real
        if uid != os.getuid() and not any_user:
            raise UsageError(
                f"{Path(run_dir).name} belongs to user {user_name(uid)}: you can stop your own runs only "
                "(--any-user: also another user's)"
            )
        process.send_signal(
            signal.SIGTERM
        )  # psutil checks first that it is still that same process
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        raise UsageError(
            f"{Path(run_dir).name}: not permitted to signal its runner (pid {process.pid})"
        ) from None
    return True
