"""``gpumon attach``: the live monitor on a run that another gpumon (its runner) is writing."""

from __future__ import annotations

import argparse
import sys

from gpumon.core.records.printable import printable
from gpumon.commands.base import RUN_HELP
from gpumon.commands.target import add_target, find
from gpumon.console.terminal import output_not_terminal
from gpumon.errors import UsageError
from gpumon.frontends.detach import RUNNER_LOG


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
    add_target(attach)
    attach.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="SLOT=RUN",
        help=f"an exclusive run of job A or B ({RUN_HELP}) to compare the "
        "run with: live slowdown, STP and verdict in this viewer, also when the run was started "
        "without one (it replaces the run's own --baseline of that slot here; the run is not changed)",
    )
    attach.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # deferred: +0.04 s CPU (psutil) on gpumon --help
    from gpumon.core.store.runner import RUNNING
    from gpumon.core.store.runstore import parse_baselines
    from gpumon.core.store.runsfolder import runs_dir_or_default

    runs_dir = runs_dir_or_default(args.runs_dir)
    target = find(args.run, runs_dir, "attach", args.any_user)
    baselines = parse_baselines(args.baseline, runs_dir)
    not_terminal = output_not_terminal()
    if not_terminal:
        log = target.path / RUNNER_LOG  # a detached run's; a run started in a terminal has none
        where = f"its log: {log}" if log.exists() else f"its run directory: {target.path}"
        raise UsageError(printable(f"gpumon attach needs a terminal ({not_terminal}); {where}"))
    if target.status != RUNNING:
        # deferred: +0.3 s CPU (textual) on gpumon --help
        from gpumon.tui.app import ViewerApp
        from gpumon.tui.screens.replay import ReplayScreen, open_replay

        print(
            printable(
                f"gpumon: {target.path.name} is not running ({target.status}): opening it as a replay"
            ),
            file=sys.stderr,
        )
        if baselines:
            exclusive = " ".join(f"--exclusive {path}" for _, path in baselines)
            print(
                printable(
                    f"gpumon: a replay shows no --baseline; compare it: gpumon compare {exclusive} "
                    f"--shared {target.path}"
                ),
                file=sys.stderr,
            )
        source, feed = open_replay(target.path)
        return ViewerApp(ReplayScreen(source, feed)).run() or 0
    # deferred: +0.3 s CPU (textual) on gpumon --help
    from gpumon.tui.app import run_viewer

    return run_viewer(target.path, baselines, any_user=args.any_user)
