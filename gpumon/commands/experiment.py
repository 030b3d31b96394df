"""The ``gpumon experiment`` subcommand: parse, validate the spec completely, run the cells, report."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpumon.commands.argtypes import positive_seconds, positive_whole_number
from gpumon.errors import UsageError
from gpumon.extras import require
from gpumon.core.jobs.interpreter import WorkloadPython, checked, choose
from gpumon.experiments.runner.device import cuda_status, resolve_device

if TYPE_CHECKING:
    from gpumon.experiments.runner.cells import Cell
    from gpumon.experiments.runner.spec import ExperimentSpec, Settings

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
    _add_what(p)
    _add_how(p)
    p.set_defaults(handler=run)


def _add_what(p: argparse.ArgumentParser) -> None:
    """Which experiment, where, and how much of it."""
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


def _add_how(p: argparse.ArgumentParser) -> None:
    """How its cells run (or are only listed)."""
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
        "--force",
        action="store_true",
        help="write into an --out folder that holds other files and is not this experiment's (no cells.json), "
        "replacing outputs of the same names; resuming an experiment's own folder needs no --force",
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
    # deferred: +0.02 s CPU on gpumon --help
    from gpumon.experiments.runner.spec import shipped_specs

    names = [path.stem for path in shipped_specs()] or [
        "(none: installed without its package data)"
    ]
    return "\n".join(
        "  " + "  ".join(names[i : i + per_line]) for i in range(0, len(names), per_line)
    )


def list_specs() -> int:
    # deferred: +0.02 s CPU on gpumon --help
    from gpumon.experiments.runner.spec import load_spec, shipped_dir, shipped_specs

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
    # deferred: +0.13 s CPU (psutil) on gpumon --help
    from gpumon.frontends.plan import check_device
    from gpumon.experiments.runner.cells import check_all_presets, expand
    from gpumon.experiments.runner.spec import (
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
        # deferred: +0.07 s CPU (psutil) on gpumon --help
        from gpumon.experiments.runner.rayrun import require_ray

        require_ray()
    # the workloads' Python: named to every cell's `gpumon run` (--python) and asked about CUDA
    python = choose(args.python)
    spec = load_spec(find_spec(args.spec))
    check_all_presets(spec)
    first = next(iter(spec.presets.values()))
    guess = resolve_device(args.device or first.device, python.path)
    preset = choose_preset(spec, args.preset, guess.startswith("cuda"))
    settings = with_overrides(
        spec.presets[preset], seconds=args.seconds, repeats=args.repeats, device=args.device
    )
    device = resolve_device(settings.device, python.path)
    cells = expand(spec, settings, device)
    out = args.out or Path("gpumon-experiments") / f"{spec.name}-{preset}-{device_kind(device)}"
    python = resume_python(out, python)
    if args.dry_run:
        if spec.requires == "cuda" and not device.startswith("cuda"):
            print(f"(on {device} nothing would run: {spec.name} needs CUDA)")
        return dry_run(cells, out, python)
    require("matplotlib", "gpumon experiment (its plots)")
    checked(python)
    if spec.requires == "cuda" and not device.startswith("cuda"):
        status = cuda_status(python.path)
        why = status.reason if not status.available else f"--device {device} was chosen"
        print(
            f"{spec.name} needs CUDA and this run would be on {device} ({why}): nothing was run, no numbers are reported."
        )
        print(f"On a GPU box: gpumon experiment {spec.path.stem} --device cuda")
        return 0
    check_cuda(device, python)
    # deferred: +0.004 s CPU on gpumon --help
    from gpumon.experiments.runner.outlock import FolderLock

    with FolderLock.take(out):
        return execute(spec, preset, settings, device, cells, out, python, args)


def check_cuda(device: str, python: WorkloadPython) -> None:
    """Refuse (one line, exit 2) a CUDA device that the workloads' Python cannot use."""
    # deferred: +0.13 s CPU (psutil) on gpumon --help
    from gpumon.frontends.plan import check_device

    check_device(device)
    cuda = cuda_status(python.path) if device.startswith("cuda") else None
    if cuda is not None and not cuda.available:
        raise UsageError(
            f"--device {device}: CUDA is not available here ({cuda.reason}); use --device cpu"
        )


def resume_python(out: Path, python: WorkloadPython) -> WorkloadPython:
    """Resuming without ``--python`` or ``$GPUMON_PYTHON`` (``python`` is gpumon's own): the cells run in the Python
    the experiment ran with."""
    # deferred: +0.07 s CPU (psutil) on gpumon --help
    from gpumon.experiments.runner.manifest import MANIFEST, Manifest

    recorded = Manifest.recorded_python(out) if python.own else None
    if recorded is None:
        return python
    print(
        f"gpumon: the workloads' python, as {out / MANIFEST} recorded it: {recorded} (--python changes it)",
        file=sys.stderr,
    )
    return choose(recorded)


def dry_run(cells: list[Cell], out: Path, python: WorkloadPython) -> int:
    # deferred: +0.08 s CPU (psutil) on gpumon --help
    from gpumon.experiments.runner.cellrun import cell_args

    print(f"{len(cells)} cells into {out}:")
    for cell in cells:
        args = cell_args(cell, out / "runs", out / "scratch" / cell.id, python)
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
    python: WorkloadPython,
    args: argparse.Namespace,
) -> int:
    """The runner's ``conduct`` with the study's two answers (the predictions, the results) handed in."""
    # deferred: +0.21 s CPU (numpy, psutil) on gpumon --help
    from gpumon.experiments.runner.conduct import Options, Study, conduct
    from gpumon.experiments.runner.manifest import Manifest
    from gpumon.experiments.study.predicted import write_predicted
    from gpumon.experiments.study.report import counts, write_results
    from gpumon.experiments.study.results import Context

    def context(manifest: Manifest) -> Context:
        return Context(
            spec, settings, preset, device, cells, manifest, predict=args.predict, force=args.force
        )

    def results(manifest: Manifest, profile_problem: str | None) -> tuple[Path, dict[str, int]]:
        ctx = context(manifest)
        return write_results(ctx, profile_problem), counts(ctx)

    study = Study(lambda manifest: write_predicted(context(manifest)), results)
    options = Options(args.profile, args.retry_failed, args.ray, args.predict, args.force)
    return conduct(spec, preset, device, cells, out, python, options, study)
