"""A run named on the command line of ``attach`` or ``stop``: found, checked to be yours and written on this host."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpumon.errors import UsageError

if TYPE_CHECKING:
    from gpumon.core.store.runner import RunnerInfo
    from gpumon.core.store.trace import Run

RUN_HELP = "a run directory, a run name in the runs directory, or 'last'"


@dataclass(frozen=True)
class Target:
    """A run named on the command line, its status now, and its runner (None for runs recorded before runners)."""

    path: Path
    status: str
    runner: "RunnerInfo | None"


def owner(run: "Run") -> int:
    """The user ID of whoever writes (wrote) ``run``: its runner's, else the directory's owner."""
    runner = run.meta.runner
    return runner.uid if runner is not None else run.path.stat().st_uid


def find(text: str | None, runs_dir: Path, verb: str) -> Target:
    """The run ``text`` names (None: this user's newest running run), refused in one line when it is another user's
    or is written on another host (which ``verb``, attach or stop, must be run on)."""
    from gpumon.core.store.runner import RECORDING, RUNNING, user_name
    from gpumon.core.store.runstore import resolve_run
    from gpumon.core.store.trace import list_runs, load_live

    if text is None:
        mine = [r for r in list_runs(runs_dir) if r.meta.live_status() == RUNNING and owner(r) == os.getuid()]
        if not mine:
            raise UsageError(f"no running run in {runs_dir} (gpumon runs lists them; gpumon run … --detach starts one)")
        run, status = load_live(mine[-1].path)
    else:
        run, status = load_live(resolve_run(text, runs_dir))
    uid = owner(run)
    if uid != os.getuid():
        raise UsageError(f"{run.path.name} belongs to user {user_name(uid)}: you can attach to and stop your own runs only")
    runner = run.meta.runner
    if status == RECORDING and runner is not None:
        raise UsageError(f"{run.path.name} is written on host {runner.host}: {verb} it there")
    return Target(run.path, status, runner)
