"""``gpumon attach`` and ``gpumon stop``: watch or stop a run that another gpumon (its runner) is writing."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpumon.errors import UsageError
from gpumon.console.terminal import output_not_terminal

if TYPE_CHECKING:
    from gpumon.core.store.runner import RunnerInfo
    from gpumon.core.store.trace import Run

STOP_TIMEOUT_S = 60.0  # the runner stops its jobs (SIGTERM, 5 s, SIGKILL) and finalises run.json
RUN_HELP = "a run directory, a run name in the runs directory, or 'last'"


@dataclass(frozen=True)
class Target:
    """A run named on the command line, its status now, and its runner (None for runs recorded before runners)."""

    path: Path
    status: str
    runner: "RunnerInfo | None"


def owner(run: "Run") -> int:
    """The user ID of whoever writes (wrote) ``run``: its runner's, else the directory's owner."""
    from gpumon.core.store.runner import RunnerInfo

    runner = RunnerInfo.from_meta(run.meta)
    return runner.uid if runner is not None else run.path.stat().st_uid


def find(text: str | None, runs_dir: Path, verb: str) -> Target:
    """The run ``text`` names (None: this user's newest running run), refused in one line when it is another user's
    or is written on another host (which ``verb``, attach or stop, must be run on)."""
    from gpumon.core.store.runner import RECORDING, RUNNING, RunnerInfo, run_status, user_name
    from gpumon.core.store.runstore import resolve_run
    from gpumon.core.store.trace import list_runs, load_live

    if text is None:
        mine = [r for r in list_runs(runs_dir) if run_status(r.meta) == RUNNING and owner(r) == os.getuid()]
        if not mine:
            raise UsageError(f"no running run in {runs_dir} (gpumon runs lists them; gpumon run … --detach starts one)")
        run, status = load_live(mine[-1].path)
    else:
        run, status = load_live(resolve_run(text, runs_dir))
    uid = owner(run)
    if uid != os.getuid():
        raise UsageError(f"{run.path.name} belongs to user {user_name(uid)}: you can attach to and stop your own runs only")
    runner = RunnerInfo.from_meta(run.meta)
    if status == RECORDING and runner is not None:
        raise UsageError(f"{run.path.name} is written on host {runner.host}: {verb} it there")
    return Target(run.path, status, runner)


def cmd_stop(args: argparse.Namespace) -> int:
    from gpumon.core.store.runner import RUNNING
    from gpumon.core.store.runstore import runs_dir_or_default
    from gpumon.core.store.trace import load_live

    target = find(args.run, runs_dir_or_default(args.runs_dir), "stop")
    name = target.path.name
    if target.status != RUNNING or target.runner is None:
        print(f"gpumon: {name} is not running ({target.status}): nothing to stop", file=sys.stderr)
        return 0
    if not target.runner.stop():
        print(f"gpumon: {name} is not running (its runner just ended)", file=sys.stderr)
        return 0
    print(f"gpumon: stopping {name} (runner pid {target.runner.pid}): its jobs stop and the capture is finalised…",
          file=sys.stderr, flush=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        status = load_live(target.path)[1]
        if status != RUNNING:
            break
        time.sleep(0.1)
    else:
        print(f"gpumon: {name} still running after {args.timeout:g} s (runner pid {target.runner.pid})", file=sys.stderr)
        return 1
    print(f"gpumon: run saved to {target.path} ({status})", file=sys.stderr)
    return 0


def cmd_attach(args: argparse.Namespace) -> int:
    from gpumon.core.store.runner import RUNNING
    from gpumon.core.store.runstore import parse_baselines, runs_dir_or_default
    from gpumon.frontends.detach import RUNNER_LOG

    runs_dir = runs_dir_or_default(args.runs_dir)
    target = find(args.run, runs_dir, "attach")
    baselines = parse_baselines(args.baseline, runs_dir)
    not_terminal = output_not_terminal()
    if not_terminal:
        raise UsageError(f"gpumon attach needs a terminal ({not_terminal} is not one); its log: "
                         f"{target.path / RUNNER_LOG}")
    if target.status != RUNNING:
        from gpumon.tui.app import replay_app
        from gpumon.tui.screens.replay import ReplayScreen, open_replay

        print(f"gpumon: {target.path.name} is not running ({target.status}): opening it as a replay", file=sys.stderr)
        if baselines:
            exclusive = " ".join(f"--exclusive {path}" for _, path in baselines)
            print(f"gpumon: a replay shows no --baseline; compare it: gpumon compare {exclusive} --shared {target.path}",
                  file=sys.stderr)
        source, feed = open_replay(target.path)
        return replay_app(ReplayScreen(source, feed)).run() or 0
    from gpumon.tui.app import run_viewer

    return run_viewer(target.path, baselines)


def register(sub: argparse._SubParsersAction) -> None:
    attach = sub.add_parser(
        "attach",
        help="the live monitor on a run another gpumon is writing (gpumon run … --detach)",
        description="Open the live monitor on a run that its runner is writing: the same panels, graphs, live "
        "slowdown, STP and verdict (with the run's --baseline, or this viewer's) as a run started in this "
        "terminal, following the run directory about a second behind the runner. Quitting (q), closing the terminal or killing "
        "the viewer never stops the run; x stops it (after a confirmation). Several viewers may watch one run. "
        "A run that has ended opens as a replay.",
    )
    attach.add_argument("run", nargs="?", metavar="RUN", help=f"{RUN_HELP} (default: your newest running run)")
    attach.add_argument("--runs-dir", type=Path, default=None, help="where to look up RUN by name")
    attach.add_argument("--baseline", action="append", default=[], metavar="SLOT=RUN",
                        help="an exclusive run of job A or B (a run directory, a run name, or 'last') to compare the "
                        "run with: live slowdown, STP and verdict in this viewer, also when the run was started "
                        "without one (it replaces the run's own --baseline of that slot here; the run is not changed)")
    attach.set_defaults(handler=cmd_attach)
    stop = sub.add_parser(
        "stop",
        help="stop a detached run cleanly: its jobs stopped, the capture finalised",
        description="Stop a run that its runner is writing (gpumon run … --detach), as q stops a run started in "
        "the terminal: the runner stops the jobs (SIGTERM, then SIGKILL after 5 s), finalises run.json and exits. "
        "Returns once run.json is final.",
    )
    stop.add_argument("run", nargs="?", metavar="RUN", help=f"{RUN_HELP} (default: your newest running run)")
    stop.add_argument("--runs-dir", type=Path, default=None, help="where to look up RUN by name")
    stop.add_argument("--timeout", type=float, default=STOP_TIMEOUT_S, metavar="S",
                      help=f"give up waiting after S seconds (default {STOP_TIMEOUT_S:g}; the run is then still running)")
    stop.set_defaults(handler=cmd_stop)
