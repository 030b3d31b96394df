"""``gpumon run``: launch one or two workloads and watch them live (the TUI), headless, or detached."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from gpumon.commands import argtypes
from gpumon.commands.argtypes import finite_number
from gpumon.commands.base import EPILOG, RUN_HELP
from gpumon.commands.sessionargs import add_session_options, session_config
from gpumon.console.terminal import output_not_terminal
from gpumon.analysis.predict_phase import partner_spec
from gpumon.errors import UsageError
from gpumon.frontends.detach import DETACHED_CHILD_FLAG, start_runner

if TYPE_CHECKING:
    from gpumon.frontends.plan import RunPlan


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="launch one or two workloads and watch (or capture) them",
        description="Launch one or two co-resident workloads (built-in or your own command), "
        "watch them live and capture the run to a new run directory.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    _add_jobs(p)
    add_session_options(p)
    _add_capture(p)
    _add_front_end(p)
    p.set_defaults(handler=run)


def _add_jobs(p: argparse.ArgumentParser) -> None:
    """What runs, and when."""
    p.add_argument(
        "workloads", nargs="*", metavar="WORKLOAD[:k=v,...]", help="built-in workload with options"
    )
    p.add_argument(
        "--cmd",
        action="append",
        default=[],
        metavar="COMMAND",
        help="your own training command, run without a shell; iteration rate comes from the auto-probe "
        "(torch optimizer steps) or from gpumon.probe calls in the script. A bare 'python' or 'python3' is the "
        "workloads' Python (--python, else $GPUMON_PYTHON; without either, the python on PATH, refused when that is "
        "gpumon's own and has no torch)",
    )
    p.add_argument(
        "--stagger",
        type=finite_number,
        default=None,
        metavar="S",
        help="start the second job S seconds after the first "
        "(with --beside: once B's steps alone span S seconds, default 10)",
    )
    p.add_argument(
        "--beside",
        default=None,
        metavar="PID",
        help="watch a process of yours that is already running (in tmux, by a scheduler, under 'gpumon wrap') as "
        "job B: its GPU and host use are recorded like a launched job's, its steps when it runs gpumon's probe "
        "(else its rate is 'unknown (no probe)'). gpumon never signals it: quitting, Ctrl-C or --duration leave it "
        "running. Job A starts once B's steps alone span --stagger seconds (from the probe's history when it has "
        "one) and number at least 11, so compare --shared RUN gives B's slowdown from this one run",
    )
    p.add_argument(
        "--partner-phase",
        type=finite_number,
        default=None,
        metavar="S",
        help="end a one-job capture with S seconds beside gpumon's standard GPU-bound partner (the built-in "
        "gemm), started once --duration less S has passed: 'gpumon predict' reads the job's solo part as an "
        "exclusive run and, from the phase, how often its step waits for a turn (docs/predict.md)",
    )
    p.add_argument(
        "--duration",
        type=finite_number,
        default=None,
        metavar="S",
        help="stop everything S seconds after the first start",
    )
    p.add_argument(
        "--label", default=None, help="name of the capture (default: the workload names)"
    )


def _add_capture(p: argparse.ArgumentParser) -> None:
    """What the run is measured against and where its numbers go besides the capture."""
    p.add_argument(
        "--on-capture-error",
        choices=("stop", "continue"),
        default="stop",
        help="when the capture cannot be written (disk full, directory removed): stop the jobs (default) "
        "or let them continue unrecorded; either way run.json says 'truncated' and gpumon exits 1",
    )
    p.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="SLOT=RUN",
        help=f"exclusive run of job A or B ({RUN_HELP}): live slowdown, STP and verdict (TUI and --headless)",
    )
    p.add_argument(
        "--metrics",
        default=None,
        metavar="[HOST:]PORT",
        help="serve the live numbers for Prometheus at http://HOST:PORT/metrics while the run lasts "
        "(host 127.0.0.1 unless you name one; port 0 picks a free one)",
    )


def _add_front_end(p: argparse.ArgumentParser) -> None:
    """How the run is shown: the TUI, status lines, or a runner in the background."""
    p.add_argument(
        "--headless",
        action="store_true",
        help="no TUI: one status line per second per workload (the default when stdout or stderr is not a "
        "terminal, e.g. redirected to a file or a pipe; a one-line notice on stderr says so)",
    )
    p.add_argument(
        "--detach",
        action="store_true",
        help="run headless in the background, in a session of its own: the run outlives this terminal (an SSH "
        "drop, a closed laptop). Prints the run directory and returns once the capture has started; watch it with "
        "'gpumon attach', stop it with 'gpumon stop'. The jobs still die with their runner (even kill -9)",
    )
    p.add_argument(
        DETACHED_CHILD_FLAG, action="store_true", help=argparse.SUPPRESS
    )  # the detached runner itself
    p.add_argument(
        "--json",
        action="store_true",
        help="with --headless: status lines as JSON objects; with --detach: "
        "one object with the run directory and the runner's PID",
    )


def run(args: argparse.Namespace) -> int:
    # deferred: +0.13 s CPU (psutil) on gpumon --help
    from gpumon.core.jobs.beside import DEFAULT_LEAD_S
    from gpumon.frontends.plan import make_plan

    if args.json and not (args.headless or args.detach):
        raise UsageError("--json goes with --headless or --detach")
    if args.detached_child and not args.detach:
        raise UsageError("--detached-child is gpumon's own (the process --detach starts)")
    stagger = (
        args.stagger
        if args.stagger is not None
        else DEFAULT_LEAD_S
        if args.beside is not None
        else 0.0
    )
    workloads = list(args.workloads)
    if args.partner_phase is not None:
        stagger = _partner_phase(args)
        workloads.append(partner_spec(workloads[0] if workloads else ""))
    config = session_config(
        args,
        metrics=argtypes.metrics_address(args.metrics) if args.metrics is not None else None,
        stagger_s=stagger,
        on_capture_error=args.on_capture_error,
        detached=args.detached_child,
    )
    plan = make_plan(
        workloads,
        args.cmd,
        session=config,
        label=args.label,
        duration_s=args.duration,
        stagger_s=stagger,
        beside=args.beside,
    )
    if args.baseline:
        # deferred: +0.04 s CPU (psutil) on gpumon --help
        from gpumon.core.store.runstore import parse_baselines

        plan = dataclasses.replace(plan, baselines=parse_baselines(args.baseline, config.runs_dir))
    if args.detach:
        if not plan.jobs:
            raise UsageError("--detach needs at least one workload (e.g. gpumon run fcn --detach)")
        if args.detached_child:
            # deferred: +0.15 s CPU (psutil) on gpumon --help
            from gpumon.frontends.headless import run_headless

            return run_headless(plan, args.json, detached=True)
        return start_runner(args.raw_argv, args.json)
    not_terminal = None if args.headless else output_not_terminal()
    if args.headless or not_terminal:
        # deferred: +0.15 s CPU (psutil) on gpumon --help
        from gpumon.frontends.headless import run_headless

        if not_terminal:
            print(NOT_A_TERMINAL.format(not_terminal), file=sys.stderr, flush=True)
        return run_headless(plan, args.json)
    return run_tui(plan)


def _partner_phase(args: argparse.Namespace) -> float:
    """The stagger that leaves the last --partner-phase seconds to the partner; UsageError where it cannot."""
    if len(args.workloads) + len(args.cmd) != 1 or args.beside is not None:
        raise UsageError("--partner-phase takes one job (built-in or --cmd), and no --beside")
    if args.stagger is not None:
        raise UsageError("--partner-phase sets the stagger itself (--duration less the phase)")
    if args.duration is None or not 0 < args.partner_phase < args.duration:
        raise UsageError(
            "--partner-phase S needs --duration longer than S (the job's solo part is the rest)"
        )
    return float(args.duration - args.partner_phase)


NOT_A_TERMINAL = "gpumon: {}: running headless (status lines instead of the live monitor)"


def run_tui(plan: "RunPlan") -> int:
    # deferred: +0.3 s CPU (textual) on gpumon --help
    from gpumon.tui.app import run_app

    return run_app(plan)
