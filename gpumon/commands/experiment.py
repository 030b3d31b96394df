"""The ``gpumon experiment`` subcommand: parse, validate the spec completely, run the cells, report."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpumon.commands.argtypes import positive_seconds, positive_whole_number
from gpumon.errors import UsageError
from gpumon.extras import require

if TYPE_CHECKING:
    from gpumon.experiments.cells import Cell
    from gpumon.experiments.spec import ExperimentSpec, Settings

DESCRIPTION = """\
Run an experiment from a declarative spec (a TOML file, or a shipped one: --list): the spec is expanded into
cells, each one `gpumon run --headless` of one workload alone (exclusive) or two sharing the
device (shared: A first, B after a stagger). Cells run one at a time; each stops once its jobs
have run `seconds` past warm-up (together, for a shared cell). Results go to --out:
results.md with the tables and intervals, CSVs, PNG plots, per-pair `gpumon compare` reports,
cells.json (status, reason and run directory of every cell) and runs/ (the run directories).

Run the same command again to resume: completed cells are found in cells.json and skipped
(failed ones too, unless --retry-failed); a cell whose settings changed runs again."""

EPILOG = """\
shipped specs (gpumon experiment --list):
{shipped}

examples:
  gpumon experiment q2_pairwise                      tiny preset on the CPU, paper on a GPU
  gpumon experiment q2_pairwise --preset paper --repeats 3 --device cuda:1
  gpumon experiment my_sweep.toml --seconds 20 --out results/batch
  gpumon experiment q4_contention --profile          also record each job with py-spy
  gpumon experiment my_sweep.toml --dry-run          list the cells without running them
  gpumon experiment q2_pairwise --ray                one cell per GPU of this machine at once
  gpumon experiment q2_pairwise --ray head:6379      cells fanned out on an existing Ray cluster

spec format and the study's questions: docs/experiments.md"""


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add ``experiment`` to the CLI's subcommands, with ``handler=run``."""
    p = subparsers.add_parser(
        "experiment",
        help="run a declarative experiment (the study's Q1-Q4, classic sweeps) and write results.md",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _epilog_when_shown(p)
    p.add_argument(
        "spec",
        nargs="?",
        metavar="SPEC",
        help="a spec file, or the name of a shipped spec (q2_pairwise)",
    )
    p.add_argument(
        "--device",
        default=None,
        help="auto, cpu, cuda or cuda:N (default: the spec's, usually auto)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="experiment directory (default: gpumon-experiments/NAME-PRESET-DEVICE here)",
    )
    p.add_argument(
        "--preset",
        default=None,
        help="the spec's preset: tiny or paper (default: tiny on CPU, paper on CUDA)",
    )
    p.add_argument(
        "--repeats",
        type=positive_whole_number,
        default=None,
        metavar="N",
        help="runs of every cell",
    )
    p.add_argument(
        "--seconds",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="steady-state seconds each job is measured",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="record every training process with py-spy (speedscope)",
    )
    p.add_argument(
        "--retry-failed", action="store_true", help="run failed cells again when resuming"
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run cells in parallel on a Ray cluster, one cell per GPU (per CPU core with --device cpu); "
        "no ADDRESS starts a local cluster on this machine's GPUs or cores (needs pip install 'gpumon[ray]')",
    )
    p.add_argument(
        "--predict",
        action="store_true",
        help="run the exclusive cells first and write predicted.md (every pair's slowdowns and STP from "
        "them alone, docs/predict.md) before any shared cell runs; results.md then puts predicted "
        "beside measured per pair, with the error and the MAPE",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the cells and their commands; run nothing"
    )
    p.add_argument("--list", action="store_true", help="list the shipped specs")
    p.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="the Python that runs the built-in workloads of every cell (it needs torch, not gpumon); "
        "default: $GPUMON_PYTHON, else gpumon's own",
    )
    p.set_defaults(handler=run)


def _epilog_when_shown(parser: argparse.ArgumentParser) -> None:
    """The epilog names every shipped spec, read when the help is shown: building the CLI's parser (every command's
    start) reads no spec folder and imports no spec module."""
    format_help = parser.format_help

    def with_epilog() -> str:
        parser.epilog = EPILOG.format(shipped=shipped_names())
        return format_help()

    parser.format_help = with_epilog  # type: ignore[method-assign]  # the help, built when shown


def shipped_names(per_line: int = 4) -> str:
    """Every shipped spec's name, as --list lists them (the help never names fewer)."""
    from gpumon.experiments.spec import shipped_specs

    names = [path.stem for path in shipped_specs()] or [
        "(none: installed without its package data)"
    ]
    return "\n".join(
        "  " + "  ".join(names[i : i + per_line]) for i in range(0, len(names), per_line)
    )


def list_specs() -> int:
    from gpumon.experiments.spec import load_spec, shipped_dir, shipped_specs

    paths = shipped_specs()
    if not paths:
        raise UsageError(
            f"no shipped specs in {shipped_dir()}: this gpumon was installed without its package data"
        )
    for path in paths:
        spec = load_spec(path)
        print(f"{path.stem:<20} {spec.analysis:<12} {spec.question}")
    return 0


def run(args: argparse.Namespace) -> int:
    from gpumon.core.jobs.interpreter import ENV_PYTHON, choose, require_workload_python
    from gpumon.frontends.plan import check_device
    from gpumon.experiments.cells import check_all_presets, expand
    from gpumon.experiments.device import cuda_status, resolve_device
    from gpumon.experiments.spec import (
        choose_preset,
        device_kind,
        find_spec,
        load_spec,
        with_overrides,
    )

    if args.list:
        return list_specs()
    if args.spec is None:
        raise UsageError(
            "give an experiment spec: a .toml file or a shipped name (gpumon experiment --list)"
        )
    if args.device is not None:
        check_device(args.device)
    if args.ray is not None:
        from gpumon.experiments.rayrun import require_ray

        require_ray()
    if args.python:
        # every cell's `gpumon run`, and the CUDA probe below, inherit it
        os.environ[ENV_PYTHON] = choose(args.python).path
    spec = load_spec(find_spec(args.spec))
    check_all_presets(spec)
    first = next(iter(spec.presets.values()))
    guess = resolve_device(args.device or first.device)
    preset = choose_preset(spec, args.preset, guess.startswith("cuda"))
    settings = with_overrides(
        spec.presets[preset], seconds=args.seconds, repeats=args.repeats, device=args.device
    )
    device = resolve_device(settings.device)
    cells = expand(spec, settings, device)
    out = args.out or Path("gpumon-experiments") / f"{spec.name}-{preset}-{device_kind(device)}"
    resume_python(out, explicit=bool(args.python or os.environ.get(ENV_PYTHON)))
    if args.dry_run:
        if spec.requires == "cuda" and not device.startswith("cuda"):
            print(f"(on {device} nothing would run: {spec.name} needs CUDA)")
        return dry_run(cells, out)
    require("matplotlib", "gpumon experiment (its plots)")
    require_workload_python(args.python)
    if spec.requires == "cuda" and not device.startswith("cuda"):
        status = cuda_status()
        why = status.reason if not status.available else f"--device {device} was chosen"
        print(
            f"{spec.name} needs CUDA and this run would be on {device} ({why}): nothing was run, no numbers are reported."
        )
        print(f"On a GPU box: gpumon experiment {spec.path.stem} --device cuda")
        return 0
    check_device(device)
    if device.startswith("cuda") and not cuda_status().available:
        raise UsageError(
            f"--device {device}: CUDA is not available here ({cuda_status().reason}); use --device cpu"
        )
    return execute(spec, preset, settings, device, cells, out, args)


def resume_python(out: Path, explicit: bool) -> None:
    """Resuming without ``--python`` or ``$GPUMON_PYTHON``: the cells run in the Python the experiment ran with."""
    from gpumon.core.jobs.interpreter import ENV_PYTHON, choose
    from gpumon.experiments.manifest import MANIFEST, Manifest

    recorded = None if explicit else Manifest.recorded_python(out)
    if recorded is not None:
        os.environ[ENV_PYTHON] = choose(recorded).path
        print(
            f"gpumon: the workloads' python, as {out / MANIFEST} recorded it: {recorded} (--python changes it)",
            file=sys.stderr,
        )


def dry_run(cells: list[Cell], out: Path) -> int:
    from gpumon.experiments.cellrun import cell_args

    print(f"{len(cells)} cells into {out}:")
    for cell in cells:
        args = cell_args(cell, out / "runs", out / "scratch" / cell.id)
        print(
            f"  {cell.id:<40} {cell.mode:<9} ≤{cell.duration_s:g} s  {shlex.join([sys.executable, '-m', 'gpumon', *args])}"
        )
    return 0


def execute(
    spec: ExperimentSpec,
    preset: str,
    settings: Settings,
    device: str,
    cells: list[Cell],
    out: Path,
    args: argparse.Namespace,
) -> int:
    from gpumon.experiments.device import cuda_status
    from gpumon.experiments.manifest import FAILED, Manifest
    from gpumon.experiments.pyspy import check_pyspy
    from gpumon.experiments.report import counts, write_results
    from gpumon.experiments.results import Context
    from gpumon.experiments.cellrun import CellScheduler

    from gpumon.core.jobs.interpreter import choose

    python = choose()
    header = {
        "name": spec.name,
        "title": spec.title,
        "spec": str(spec.path),
        "analysis": spec.analysis,
        "preset": preset,
        "device": device,
        "python": None if python.own else python.path,
    }
    manifest = Manifest.open(out, header)
    manifest.save()
    pyspy = check_pyspy() if args.profile else None
    if pyspy is not None and not pyspy.usable:
        print(
            f"gpumon: --profile: {pyspy.problem}; running without py-spy recordings",
            file=sys.stderr,
        )
    print(
        f"gpumon: experiment {spec.name} (preset {preset}, device {device}): {len(cells)} cells into {out}",
        file=sys.stderr,
    )
    pool = None
    if args.ray is not None:
        from gpumon.experiments.rayrun import RayPool, describe

        pool = RayPool(args.ray or None, on_gpu=device.startswith("cuda"))
        pool.start()
        print(f"gpumon: Ray workers: {describe(pool)}", file=sys.stderr)
    ctx = Context(spec, settings, preset, device, cells, manifest, predict=args.predict)
    try:
        scheduler = CellScheduler(manifest, cuda_status, pyspy, args.retry_failed, pool=pool)
        signum = (
            scheduler.run([c for c in cells if c.mode == "exclusive"]) if args.predict else None
        )
        if args.predict and signum is None:
            from gpumon.experiments.predicted import write_predicted

            print(
                f"gpumon: predicted from the exclusive cells: {write_predicted(ctx)}",
                file=sys.stderr,
            )
        signum = signum if signum is not None else scheduler.run(cells)
    finally:
        if pool is not None:
            pool.stop()
    if signum is not None:
        print(
            f"gpumon: interrupted; run the same command again to resume ({out / 'cells.json'})",
            file=sys.stderr,
        )
        return 128 + signum
    path = write_results(ctx, pyspy.problem if pyspy is not None else None)
    tally = counts(ctx)
    print(f"{path}  ({', '.join(f'{n} {s}' for s, n in sorted(tally.items()))})")
    return 1 if tally.get(FAILED) and not tally.get("ok") else 0
