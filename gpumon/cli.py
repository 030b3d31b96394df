"""Command line: parses, builds a config, calls one function per command."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from gpumon import __version__

from gpumon.console import stopsignals
from gpumon.commands.argtypes import finite_number, whole_number
from gpumon.core.jobs import lifeline
from gpumon.frontends.detach import RUNNER_FLAG
from gpumon.errors import UsageError
from gpumon.extras import require
from gpumon.console.terminal import output_not_terminal

if TYPE_CHECKING:
    from gpumon.core.store.trace import RunSummary
    from gpumon.frontends.plan import RunPlan

DESCRIPTION = """\
Watch, capture and compare co-resident training jobs on a shared GPU.

Run one or two training processes on the same GPU (or on the CPU when there is
none), watch their iteration rate, host-to-device copy bandwidth and GPU
utilisation live, capture the run to a run directory, and compare exclusive and
shared captures: slowdown r = exclusive rate / shared rate for each job and the
combined throughput STP = 1/r_A + 1/r_B (sharing pays when STP > 1).

With no command, opens the live monitor."""

EPILOG = """\
examples:
  gpumon run fcn lstm                    live monitor, two built-in jobs sharing the device
  gpumon run fcn gemm --headless --duration 30
  gpumon run fcn --cmd "python train.py" --stagger 10
  gpumon run gemm --beside 4242 --duration 120   what starting gemm does to your running job (pid 4242)
  gpumon run fcn vgg19 --share mps       the same pair under NVIDIA MPS instead of time slicing
  gpumon runs                            list captures
  gpumon export last --csv out/          plain CSV of the newest capture
  gpumon compare --exclusive RUN_A --exclusive RUN_B --shared RUN_AB

Built-in workloads: fcn, vgg19, resnet50, lstm, h2d (copy-bound), gemm (compute-bound).
Options follow a colon: resnet50:batch=16,preset=tiny,input=disk (see docs/workloads.md).
Runs are stored in $GPUMON_RUNS, else $XDG_DATA_HOME/gpumon/runs, else ~/.local/share/gpumon/runs."""


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="launch one or two workloads and watch (or capture) them",
        description="Launch one or two co-resident workloads (built-in or your own command), "
        "watch them live and capture the run to a new run directory.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD[:k=v,...]", help="built-in workload with options")
    p.add_argument(
        "--cmd",
        action="append",
        default=[],
        metavar="COMMAND",
        help="your own training command, run without a shell; iteration rate comes from the auto-probe "
        "(torch optimizer steps) or from gpumon.probe calls in the script",
    )
    p.add_argument("--device", default="auto", help="auto (CUDA if present, else CPU), cpu, cuda or cuda:N; a GPU this machine lacks "
        "(NVML, /proc/driver/nvidia, CUDA_VISIBLE_DEVICES) is refused before anything starts")
    p.add_argument("--stagger", type=finite_number, default=None, metavar="S", help="start the second job S seconds after the first "
        "(with --beside: once B's steps alone span S seconds, default 10)")
    p.add_argument(
        "--beside",
        default=None,
        metavar="PID",
        help="watch a process of yours that is already running (in tmux, by a scheduler, under 'gpumon wrap') as "
        "job B: its GPU and host use are recorded like a launched job's, its steps when it runs gpumon's probe "
        "(else its rate is 'unknown (no probe)'). gpumon never signals it: quitting, Ctrl-C or --duration leave it "
        "running. Job A starts once B's steps alone span --stagger seconds (from the probe's history when it has "
        "one), so compare --shared RUN gives B's slowdown from this one run",
    )
    p.add_argument("--duration", type=finite_number, default=None, metavar="S", help="stop everything S seconds after the first start")
    p.add_argument("--label", default=None, help="name of the capture (default: the workload names)")
    p.add_argument("--out", type=Path, default=None, metavar="RUNS_DIR", help="where captures go (default: see below)")
    p.add_argument("--interval", type=whole_number, default=100, metavar="MS", help="sampling interval in ms (default 100)")
    p.add_argument("--gpu", default=None, metavar="INDEX|UUID", help="GPU to sample with NVML: an index or a "
        "GPU-... UUID (default: the first of CUDA_VISIBLE_DEVICES, else 0); one NVML does not list is refused before anything starts")
    p.add_argument("--warmup", type=whole_number, default=None, metavar="N", help="steps marked warm-up (default 5)")
    p.add_argument("--no-nvml", action="store_true", help="do not load NVML")
    p.add_argument(
        "--share",
        default="timeslice",
        metavar="MODE",
        help="how the jobs share the GPU: timeslice (the driver's default: each context runs alone for a "
        "time slice), mps (gpumon starts its own NVIDIA MPS daemon; kernels of both jobs run at once), "
        "mps:threads=PCT_A,PCT_B (MPS, each job capped at that %% of the SMs), mps:existing (clients of "
        "an MPS daemon you already run)",
    )
    p.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="the Python that runs the built-in workloads, e.g. your training environment's (it needs torch, "
        "not gpumon); default: $GPUMON_PYTHON, else gpumon's own",
    )
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
        help="exclusive run of job A or B (a run directory, a run name, or 'last'): live slowdown, STP and verdict (TUI and --headless)",
    )
    p.add_argument(
        "--metrics",
        default=None,
        metavar="[HOST:]PORT",
        help="serve the live numbers for Prometheus at http://HOST:PORT/metrics while the run lasts "
        "(host 127.0.0.1 unless you name one; port 0 picks a free one)",
    )
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
    p.add_argument(RUNNER_FLAG, action="store_true", help=argparse.SUPPRESS)  # the detached runner itself
    p.add_argument("--json", action="store_true", help="with --headless: status lines as JSON objects; with --detach: "
                   "one object with the run directory and the runner's PID")
    p.set_defaults(handler=cmd_run)


def add_runs_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list captured runs", description="List the captured runs in a runs directory.")
    p.add_argument("dir", nargs="?", type=Path, default=None, metavar="DIR", help="runs directory (default: see gpumon --help)")
    p.add_argument("--json", action="store_true", help="one JSON array for scripts")
    p.set_defaults(handler=cmd_runs)


def add_export_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a run's tables as plain CSV (or Parquet)",
        description="Write steps.csv, device.csv, processes.csv, host.csv and gpu_others.csv (the other GPU processes; "
        "runs recorded before it have none) of a run, complete rows only. "
        "RUN is a run directory, a run name in the runs directory, or 'last'.",
    )
    p.add_argument("run", metavar="RUN")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", type=Path, metavar="OUTDIR", help="write CSV files into OUTDIR")
    target.add_argument("--parquet", type=Path, metavar="OUTDIR", help="write Parquet files into OUTDIR")
    p.add_argument("--runs-dir", type=Path, default=None, help="where to look up RUN by name")
    p.set_defaults(handler=cmd_export)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpumon",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpumon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in _registrations():
        register(sub)
    return parser


def _registrations() -> list[Callable[[argparse._SubParsersAction], None]]:
    from gpumon.commands.compare import register as register_compare
    from gpumon.commands.predict import register as register_predict
    from gpumon.commands.doctor import register as register_doctor
    from gpumon.commands.experiment import register as register_experiment
    from gpumon.commands.attach import register as register_runctl
    from gpumon.commands.wrap import register as register_wrap

    return [add_run_parser, register_runctl, add_runs_parser, add_export_parser, register_compare, register_predict,
            register_doctor, register_experiment, register_wrap]


def cmd_run(args: argparse.Namespace) -> int:
    from gpumon.core.jobs.beside import DEFAULT_LEAD_S
    from gpumon.core.jobs.devices import check_gpu_present, parse_gpu
    from gpumon.core.capture.metrics import parse_address
    from gpumon.core.jobs.mps import parse_share
    from gpumon.core.store.runstore import runs_dir_or_default
    from gpumon.frontends.plan import make_plan
    from gpumon.core.capture.session import SessionConfig

    if args.json and not (args.headless or args.detach):
        raise UsageError("--json goes with --headless or --detach")
    if args.runner and not args.detach:
        raise UsageError("--runner is gpumon's own (the process --detach starts)")
    gpu = parse_gpu(args.gpu) if args.gpu is not None else None
    if gpu is not None and not args.no_nvml:
        check_gpu_present(gpu)
    stagger = args.stagger if args.stagger is not None else DEFAULT_LEAD_S if args.beside is not None else 0.0
    config = SessionConfig(
        share=parse_share(args.share),
        metrics=parse_address(args.metrics) if args.metrics is not None else None,
        device=args.device,
        interval_ms=args.interval,
        gpu_index=gpu,
        runs_dir=runs_dir_or_default(args.out),
        warmup=args.warmup,
        stagger_s=stagger,
        nvml=not args.no_nvml,
        python=args.python,
        on_capture_error=args.on_capture_error,
        detached=args.runner,
    )
    plan = make_plan(
        args.workloads, args.cmd, session=config, label=args.label, duration_s=args.duration, stagger_s=stagger,
        beside=args.beside,
    )
    if args.baseline:
        from gpumon.core.store.runstore import parse_baselines

        plan = dataclasses.replace(plan, baselines=parse_baselines(args.baseline, config.runs_dir))
    if args.detach:
        if not plan.jobs:
            raise UsageError("--detach needs at least one workload (e.g. gpumon run fcn --detach)")
        if args.runner:
            from gpumon.frontends.headless import run_headless

            return run_headless(plan, args.json, detached=True)
        from gpumon.frontends.detach import start_runner

        return start_runner(args.raw_argv, args.json)
    not_terminal = None if args.headless else output_not_terminal()
    if args.headless or not_terminal:
        from gpumon.frontends.headless import run_headless

        if not_terminal:
            print(NOT_A_TERMINAL.format(not_terminal), file=sys.stderr, flush=True)
        return run_headless(plan, args.json)
    return run_tui(plan)


NOT_A_TERMINAL = "gpumon: {} is not a terminal: running headless (status lines instead of the live monitor)"


def run_tui(plan: "RunPlan") -> int:
    from gpumon.tui.app import run_app

    return run_app(plan)


def cmd_runs(args: argparse.Namespace) -> int:
    from gpumon.core.store.runner import RUNNING
    from gpumon.core.store.runstore import runs_dir_or_default
    from gpumon.core.store.trace import list_runs, summarize
    from gpumon.core.records.units import fmt_rate, json_number

    runs_dir = runs_dir_or_default(args.dir)
    summaries = [summarize(run) for run in list_runs(runs_dir)]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": s.name,
                        "path": str(runs_dir / s.name),
                        "label": s.label,
                        "mode": s.mode,
                        "share": s.share,
                        "status": s.status,
                        "workloads": s.workloads,
                        "duration_s": json_number(s.duration_s),
                        "iter_per_s": {k: json_number(v) for k, v in s.rates.items()},
                        "runner": runner_json(s),
                    }
                    for s in summaries
                ],
                indent=2,
            )
        )
        return 0
    if not summaries:
        print(f"no runs in {runs_dir}")
        return 0
    print(f"{'RUN':<34} {'MODE':<9} {'SHARE':<10} {'STATUS':<11} {'DURATION':>8}  RATES / WORKLOADS")
    for s in summaries:
        rates = "  ".join(f"{k} {fmt_rate(v)}" for k, v in sorted(s.rates.items())) or "no steps"
        duration = "–" if math.isnan(s.duration_s) else f"{s.duration_s:.1f}s"
        runner = ""
        if s.status == RUNNING and s.runner is not None:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.runner.started))
            runner = f"  (runner pid {s.runner.pid} since {since}{', detached' if s.runner.detached else ''})"
        print(f"{s.name:<34.34} {s.mode:<9} {s.share:<10} {s.status:<11} {duration:>8}  {rates}  [{s.workloads}]{runner}")
    return 0


def runner_json(summary: "RunSummary") -> dict | None:
    """``runs --json``'s runner: who writes (wrote) the run, and since when (ISO 8601, local time with its offset)."""
    from gpumon.core.store.runner import RUNNING

    runner = summary.runner
    if runner is None:
        return None
    since = datetime.datetime.fromtimestamp(runner.started).astimezone().isoformat(timespec="seconds")
    return {"pid": runner.pid, "since": since, "user": runner.user, "host": runner.host, "detached": runner.detached,
            "alive": summary.status == RUNNING}


def cmd_export(args: argparse.Namespace) -> int:
    from gpumon.core.store.runstore import resolve_run, runs_dir_or_default
    from gpumon.core.store.trace import export, load_run

    fmt, out = ("csv", args.csv) if args.csv is not None else ("parquet", args.parquet)
    if fmt == "parquet":
        require("pyarrow", "--parquet")
    run = load_run(resolve_run(args.run, runs_dir_or_default(args.runs_dir)))
    for path in export(run, out, fmt):
        print(path)
    return 0


def cmd_monitor(args: argparse.Namespace) -> int:
    """``gpumon`` with no command: the live monitor with nothing launched yet."""
    from gpumon.frontends.plan import make_plan
    from gpumon.core.capture.session import SessionConfig

    not_terminal = output_not_terminal()
    if not_terminal:
        raise UsageError(
            f"the live monitor needs a terminal ({not_terminal} is not one); without one: gpumon run WORKLOAD --headless"
        )
    plan = make_plan([], [], session=SessionConfig(), label=None, duration_s=None, stagger_s=0.0)
    return run_tui(plan)


def main(argv: Sequence[str] | None = None, *, quick_exit: bool = False) -> int:
    """Run one gpumon command; ``quick_exit`` (the ``gpumon`` program, not a caller in Python): see ``console``."""
    stopsignals.unblock()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.raw_argv = list(sys.argv[1:] if argv is None else argv)  # what --detach hands its runner
    handler = getattr(args, "handler", cmd_monitor)
    try:
        status = int(handler(args) or 0)
    except UsageError as exc:
        print(f"gpumon: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    if quick_exit and status == 0 and getattr(args, "quick_exit", False):
        lifeline.exit_now(status)
    return status


def console() -> None:
    """The ``gpumon`` program.

    A read-only command that succeeded (``compare``: its handler sets ``quick_exit``) ends without the
    interpreter's teardown: with pandas, pyarrow and an hour of steps loaded that is 0.15 s of a
    2-second budget, spent freeing what the exit frees anyway. Its output is flushed first; nothing it
    started is left (the scipy helper has answered and exited).
    """
    status = main(quick_exit=True)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`| head -1`): the exit status stands, not the teardown's 120
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(status)
