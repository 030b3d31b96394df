"""``gpumon stop``: stop a run that its runner (``gpumon run … --detach``) is writing, and wait until run.json is final."""

from __future__ import annotations

import argparse
import sys
import time

from gpumon.commands.argtypes import positive_seconds
from gpumon.commands.target import add_target, find
from gpumon.core.records.printable import printable

STOP_TIMEOUT_S = 60.0  # the runner stops its jobs (SIGTERM, 5 s, SIGKILL) and finalises run.json


def register(sub: argparse._SubParsersAction) -> None:
    stop = sub.add_parser(
        "stop",
        help="stop a detached run cleanly: its jobs stopped, the capture finalised",
        description="Stop a run that its runner is writing (gpumon run … --detach), as q stops a run started in "
        "the terminal: the runner stops the jobs (SIGTERM, then SIGKILL after 5 s), finalises run.json and exits. "
        "Returns once run.json is final.",
    )
    add_target(stop)
    stop.add_argument(
        "--timeout",
        type=positive_seconds,
        default=STOP_TIMEOUT_S,
        metavar="S",
        help=f"give up waiting after S seconds (default {STOP_TIMEOUT_S:g}; the run is then still running)",
    )
    stop.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # deferred: +0.04 s CPU (psutil) on gpumon --help
    from gpumon.core.jobs.runnerstop import stop_runner
    from gpumon.core.store.runner import RUNNING
    from gpumon.core.store.runsfolder import runs_dir_or_default
    from gpumon.core.store.trace import load_live

    target = find(args.run, runs_dir_or_default(args.runs_dir), "stop", args.any_user)
    name = printable(target.path.name)  # a directory name is anyone's text
    if target.status != RUNNING or target.runner is None:
        print(f"gpumon: {name} is not running ({target.status}): nothing to stop", file=sys.stderr)
        return 0
    if not stop_runner(target.path, target.runner, args.any_user):
        print(f"gpumon: {name} is not running (its runner just ended)", file=sys.stderr)
        return 0
    print(
        f"gpumon: stopping {name} (runner pid {target.runner.pid}): its jobs stop and the capture is finalised…",
        file=sys.stderr,
        flush=True,
    )
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        status = load_live(target.path)[1]
        if status != RUNNING:
            break
        time.sleep(0.1)
    else:
        print(
            f"gpumon: {name} still running after {args.timeout:g} s (runner pid {target.runner.pid})",
            file=sys.stderr,
        )
        return 1
    print(f"gpumon: run saved to {printable(str(target.path))} ({status})", file=sys.stderr)
    return 0
