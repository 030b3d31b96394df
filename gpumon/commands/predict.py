"""The ``gpumon predict`` subcommand: argument parsing, text and JSON output (imports stay light)."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING
from gpumon.core.records.printable import printable
from gpumon.commands.argtypes import add_exclusive, parse_runs

if TYPE_CHECKING:
    from gpumon.analysis.predict import Prediction
    from gpumon.analysis.slowdown import Estimate

DESCRIPTION = """\
Predict, before sharing, how two jobs would slow each other on one GPU: each job's
slowdown r, the pair's combined throughput (STP = 1/r_A + 1/r_B), whether sharing
would pay, and why in words, from each job's exclusive (solo) runs alone.

model (docs/predict.md): each solo step splits into kernel time (NVML utilisation
times the step, less the copies, read through the GPU's utilisation scale), copy time
and host time. Time slicing lets the kernels take turns: a context holds the GPU for
at most one slice while the other waits, gives it up as soon as it runs out of work,
and a switch costs only when both have work (a short-kernel job waits for a GPU-bound
partner's whole slice; two light jobs fill each other's gaps); host parts overlap.
MPS runs kernels of both at once, but a running block keeps its SM, so a job's kernels
progress on the SMs its partner's running kernels leave (GPM SM activity where
recorded, else estimated from utilisation). On the CPU it predicts pinned cores.

constants  the time slice, switch cost, utilisation scale and MPS SM fill of the runs'
           GPU model: gpumon calibrate's measurement, else those fitted on that model's
           captures (the H100's), else the H100's with "uncalibrated for <GPU>:
           intervals widened"; --json names them (model.constants, model.calibrated).
intervals  the model's out-of-sample error of r and of STP (leave one workload family
           out, benchmarks/predict_accuracy.py), widened for an uncalibrated GPU, for
           copies not recorded and for a utilisation outside the range checked, and
           combined with the spread of the solo repeats; the verdict is "cannot tell"
           when the STP interval straddles 1. With --share all, the better mode is
           named only when its STP interval clears the other's.
"""

EPILOG = """\
examples:
  gpumon predict --exclusive RUN_A --exclusive RUN_B
  gpumon predict --exclusive RUN_A1 --exclusive RUN_A2 --exclusive RUN_B --share all
  gpumon predict --exclusive A=RUN_1 --exclusive B=RUN_2 --json
"""


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add ``predict`` to the CLI's subcommands."""
    parser = subparsers.add_parser(
        "predict",
        help="predict a pair's slowdowns and STP from each job's solo runs, before sharing",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_exclusive(
        parser,
        "a run of one job alone (repeat for each job and for repeats; runs of one spec "
        "are repeats of one job; one job given alone is paired with itself)",
    )
    parser.add_argument(
        "--share",
        choices=("timeslice", "mps", "all"),
        default="timeslice",
        help="the sharing mode to predict (default timeslice); all: both side by side",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON shaped like compare --json: workloads.A.slowdown.{estimate,low,high}, "
        "pair.stp, pair.verdict, pair.share, pair.reason, model.constants, model.calibrated, "
        "notes; with --share all, {modes: [...], better}",
    )
    parser.set_defaults(handler=run, quick_exit=True)


def _fmt(e: "Estimate") -> str:
    if math.isnan(e.value):
        return "unknown"
    return f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"


def render(predictions: "list[Prediction]", best: str | None) -> list[str]:
    """The predictions as text, one block per mode."""
    lines = []
    for p in predictions:
        lines.append(f"share {p.share}: sharing {p.verdict}: STP {_fmt(p.stp)} (predicted, 95 %)")
        for job, r in zip(p.jobs, p.slowdown):
            lines.append(
                f"  {job.slot} {job.spec:<28} r {_fmt(r)}  ({len(job.runs)} solo run(s), {job.rate:.1f} it/s alone)"
            )
        lines.append(f"  why: {p.reason}")
        lines += [f"  note: {n}" for n in p.notes]
    if len(predictions) > 1:
        lines.append(
            f"better: {best}" if best else "better: cannot tell (the STP intervals overlap)"
        )
    return [printable(line) for line in lines]  # specs, notes: text from the runs


def run(args: argparse.Namespace) -> int:
    """Handler of ``gpumon predict``."""
    # deferred: +0.17 s CPU (numpy, psutil) on gpumon --help
    from gpumon.analysis.predict import better, predict
    from gpumon.core.store.trace import load_run

    paths, _, assign = parse_runs(args.exclusive, [])
    predictions = predict([load_run(p) for p in paths], args.share, assign)
    best = better(predictions) if len(predictions) > 1 else None
    if args.json:  # --share all keeps its shape (modes) also where only one mode applies (CPU runs)
        data = (
            predictions[0].to_dict()
            if args.share != "all"
            else {"modes": [p.to_dict() for p in predictions], "better": best}
        )
        print(json.dumps(data, indent=2, allow_nan=False))
    else:
        print("\n".join(render(predictions, best)))
    return 0
