"""A run named on the command line of ``attach`` or ``stop``: found, checked to be yours and written on this host."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpumon.commands.base import RUN_HELP
from gpumon.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from gpumon.core.store.runner import RunnerInfo

ANY_USER_HELP = (
    "also another user's run (without it such a run is refused; signalling another user's runner takes "
    "root). Whose a run is comes from its proven runner's process, else the run directory's owner, never "
    "from run.json"
)


def add_target(parser: "argparse.ArgumentParser") -> None:
    """The run ``find`` looks up: ``RUN`` (default: this user's newest running run), ``--runs-dir`` and
    ``--any-user``, the one way to act on another user's run."""
    parser.add_argument(
        "run", nargs="?", metavar="RUN", help=f"{RUN_HELP} (default: your newest running run)"
    )
    parser.add_argument("--runs-dir", type=Path, default=None, help="where to look up RUN by name")
    parser.add_argument("--any-user", action="store_true", help=ANY_USER_HELP)


@dataclass(frozen=True)
class Target:
    """A run named on the command line, its status now, and what its run.json says of its runner (None for runs
    recorded before runners); only ``runner_process`` proves that process is its runner."""

    path: Path
    status: str
    runner: "RunnerInfo | None"


def find(text: str | None, runs_dir: Path, verb: str, any_user: bool = False) -> Target:
    """The run ``text`` names (None: this user's newest running run), refused in one line when it is another user's
    (unless ``any_user``), written on another host (which ``verb``, attach or stop, must be run on), or one whose
    runner this user may not inspect."""
    # deferred: +0.04 s CPU (psutil) on gpumon --help
    from gpumon.core.store.runner import RECORDING, RUNNING, run_owner, run_status, user_name
    from gpumon.core.store.runstore import resolve_run
    from gpumon.core.store.trace import list_runs, load_live

    if text is None:
        mine = [
            r
            for r in list_runs(runs_dir)
            if run_status(r.meta.status, r.meta.runner, r.path) == RUNNING
            and run_owner(r.path, r.meta.runner) == os.getuid()
        ]
        if not mine:
            raise UsageError(
                f"no running run in {runs_dir} (gpumon runs lists them; gpumon run … --detach starts one)"
            )
        run, status = load_live(mine[-1].path)
    else:
        run, status = load_live(resolve_run(text, runs_dir))
    runner = run.meta.runner
    uid = run_owner(run.path, runner)
    if uid != os.getuid() and not any_user:
        raise UsageError(
            f"{run.path.name} belongs to user {user_name(uid)}: you can attach to and stop your own runs "
            "only (--any-user: also another user's)"
        )
    if status == RECORDING and runner is not None:
        if not runner.here:
            raise UsageError(f"{run.path.name} is written on host {runner.host}: {verb} it there")
        raise UsageError(
            f"{run.path.name}: cannot tell whether it still runs (its runner is another user's process)"
        )
    return Target(run.path, status, runner)
