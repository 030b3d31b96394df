"""The ``gpumon calibrate`` subcommand: measure (or fit) this GPU model's constants for ``gpumon predict``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from gpumon.errors import UsageError
from gpumon.core.jobs.interpreter import ENV_PYTHON, choose
from gpumon.core.records.printable import printable

DESCRIPTION = """\
Measure the constants gpumon predict needs for this GPU model, in under a minute,
with two small probe processes of gpumon's own: the time slice the driver gives a
context while another waits, the cost of switching between two contexts that both
have work, how NVML's utilisation reads kernel time, and, where MPS is available
(nvidia-cuda-mps-control on PATH), how much of the SMs a GPU-bound job's kernels
hold when two share them. They are stored per GPU model where gpumon predict
finds them ($GPUMON_CALIBRATION, else $XDG_DATA_HOME/gpumon/calibration, else
~/.local/share/gpumon/calibration); predictions for a GPU model never calibrated
use the H100's constants and say "uncalibrated for <GPU>: intervals widened".

--from-pairs fits the constants instead on pairs measured on that GPU (when the
GPU itself is out of reach): a CSV with the columns run_a, run_b (exclusive runs
of the two jobs, paths relative to the CSV or absolute) and r_a, r_b (their
measured slowdowns, as gpumon compare gives them), all runs of one GPU model
(docs/predict.md)."""

EPILOG = """\
examples:
  gpumon calibrate                         the GPU gpumon run would use
  gpumon calibrate --device cuda:1 --json
  gpumon calibrate --from-pairs pairs.csv  constants fitted on measured pairs
"""

NAMES = {
    "slice_s": ("time slice", 1e3, "ms"),
    "switch_s": ("switch", 1e3, "ms"),
    "util_scale": ("utilisation scale", 1.0, ""),
    "sm_fill": ("MPS SM fill", 1.0, ""),
}


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add ``calibrate`` to the CLI's subcommands."""
    parser = subparsers.add_parser(
        "calibrate",
        help="measure this GPU model's time slice, switch cost and MPS split for predict",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--device",
        default="cuda",
        metavar="DEVICE",
        help="where the probes run: cuda (default) or cuda:N; sliced:SOCKET is the test suite's "
        "time-sliced stand-in for a GPU (tests/fakegpu)",
    )
    parser.add_argument(
        "--gpu",
        type=int,
        metavar="INDEX",
        default=None,
        help="NVML index of the GPU whose model is calibrated (default: that of --device cuda:N, "
        "else the first of CUDA_VISIBLE_DEVICES, else 0)",
    )
    parser.add_argument(
        "--no-mps", action="store_true", help="measure time slicing only (no MPS daemon started)"
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="the Python the probes use on a GPU (needs torch; default: $GPUMON_PYTHON, else "
        "gpumon's own)",
    )
    parser.add_argument(
        "--from-pairs",
        metavar="CSV",
        type=Path,
        help="fit the constants on these measured pairs instead of measuring them",
    )
    parser.add_argument(
        "--share",
        choices=("timeslice", "mps"),
        default="timeslice",
        help="with --from-pairs: the sharing mode the pairs were measured under (default timeslice)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the calibration as one JSON object"
    )
    parser.set_defaults(handler=run)


def render(data: dict[str, Any], path: Path) -> list[str]:
    """The calibration as text (the GPU's name escaped: --from-pairs takes it from run.json files)."""
    gpu = printable(data["gpu"])
    constants = ", ".join(
        f"{NAMES[k][0]} {v * NAMES[k][1]:.3g}{(' ' + NAMES[k][2]) if NAMES[k][2] else ''}"
        for k, v in data["constants"].items()
        if k in NAMES
    )
    lines = [
        f"calibrated {gpu}: {constants}",
        f"  stored in {printable(path)}; gpumon predict uses it for runs on {gpu}",
    ]
    mps = data.get("details", {}).get("mps")
    if isinstance(mps, str):
        lines.append(f"  MPS {printable(mps)}")
    return lines


def _gpu_index(args: argparse.Namespace) -> int | None:
    if args.gpu is not None:
        return int(args.gpu)
    kind, _, index = args.device.partition(":")
    return int(index) if kind == "cuda" and index.isdigit() else None


def _measure(args: argparse.Namespace) -> Any:
    # deferred: +0.04 s CPU on gpumon --help (the NVML source: never while parsing)
    from gpumon.analysis.calibration import CalibrationFailed
    from gpumon.checks.calibrate import calibrate
    from gpumon.core.sources.nvml import NvmlSource

    kind = args.device.partition(":")[0]
    if kind not in ("cuda", "sliced") or (kind == "sliced" and not args.device.partition(":")[2]):
        raise UsageError(
            f"bad --device {args.device!r} (cuda, cuda:N, or sliced:SOCKET for the test stand-in)"
        )
    if args.python:
        os.environ[ENV_PYTHON] = choose(args.python).path
    source = NvmlSource(_gpu_index(args))
    status = source.open()
    if not status.available:
        print(
            f"gpumon: calibrate needs an NVIDIA GPU: NVML {status.reason.removeprefix('unavailable: ')}",
            file=sys.stderr,
        )
        return None
    try:
        info = source.device_info()
        say = (
            (lambda _: None)
            if args.json
            else (lambda text: print(f"calibrate: {text} ...", file=sys.stderr))
        )
        return calibrate(args.device, source, info, mps=not args.no_mps, say=say)
    except CalibrationFailed as exc:
        print(f"gpumon: calibration failed: {exc}", file=sys.stderr)
        return None
    finally:
        source.close()


def run(args: argparse.Namespace) -> int:
    """Handler of ``gpumon calibrate``."""
    # deferred: +0.004 s CPU on gpumon --help
    from gpumon.core.store import calibration

    if args.from_pairs is not None:
        # deferred: +0.46 s CPU (numpy, pandas) on gpumon --help
        from gpumon.analysis.predict_fit import from_pairs

        result = from_pairs(args.from_pairs, args.share)
    else:
        result = _measure(args)
        if result is None:
            return 1
    path = calibration.save(result)
    data = result.to_dict()
    if args.json:
        print(json.dumps({**data, "path": str(path)}, indent=2, allow_nan=False))
    else:
        print("\n".join(render(data, path)))
    return 0
