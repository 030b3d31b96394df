"""An experiment from start to end: its manifest, py-spy, Ray, the cells (exclusive first with ``--predict``),
then the study's answer. The study is handed in (``Study``): the runner never imports it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpumon.core.jobs.interpreter import WorkloadPython
from gpumon.core.records.printable import printable
from gpumon.errors import UsageError
from gpumon.experiments.runner.cellrun import CellScheduler
from gpumon.experiments.runner.cells import Cell
from gpumon.experiments.runner.device import cuda_status
from gpumon.experiments.runner.manifest import FAILED, MANIFEST, OK, Manifest
from gpumon.experiments.runner.outlock import LOCK_FILE
from gpumon.experiments.runner.pyspy import check_pyspy
from gpumon.experiments.runner.spec import ExperimentSpec
from gpumon.safewrite import check_destination
from gpumon.experiments.runner.rayrun import RayPool, describe

# the study's two outputs, refused up front when they are symbolic links (the runner does not import the study)
RESULTS_FILE, PREDICTED_FILE = "results.md", "predicted.md"


@dataclass(frozen=True)
class Options:
    """How to run the cells: ``gpumon experiment``'s switches."""

    profile: bool = False
    retry_failed: bool = False
    ray: str | None = None  # an address, "" for a local cluster, None for no Ray
    predict: bool = False
    force: bool = False  # outputs in a folder that is not this experiment's are replaced


@dataclass(frozen=True)
class Study:
    """What the study does at the runner's two moments, given the manifest the cells are recorded in."""

    # with --predict, once the exclusive cells ran: the predictions' file
    predicted: Callable[[Manifest], Path]
    # at the end: results.md (told why py-spy recorded nothing, if so) and the cells by status
    results: Callable[[Manifest, str | None], tuple[Path, dict[str, int]]]


def conduct(
    spec: ExperimentSpec,
    preset: str,
    device: str,
    cells: list[Cell],
    out: Path,
    python: WorkloadPython,
    options: Options,
    study: Study,
) -> int:
    """Run ``cells`` into ``out`` (resuming what cells.json holds) in the workloads' Python ``python``, then the
    study; the command's exit status."""
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
    refuse_foreign_outputs(out, manifest.own, options.force)
    manifest.save()
    pyspy = check_pyspy() if options.profile else None
    if pyspy is not None and not pyspy.usable:
        say(f"--profile: {pyspy.problem}; running without py-spy recordings")
    say(f"experiment {spec.name} (preset {preset}, device {device}): {len(cells)} cells into {out}")
    pool = None
    if options.ray is not None:
        pool = RayPool(options.ray or None, on_gpu=device.startswith("cuda"))
        pool.start()
        say(f"Ray workers: {describe(pool)}")
    try:
        scheduler = CellScheduler(
            manifest,
            lambda: cuda_status(python.path),
            pyspy,
            options.retry_failed,
            pool=pool,
            python=python,
        )
        signum = None
        if options.predict:
            signum = scheduler.run([c for c in cells if c.mode == "exclusive"])
            if signum is None:
                say(f"predicted from the exclusive cells: {study.predicted(manifest)}")
        signum = signum if signum is not None else scheduler.run(cells)
    finally:
        if pool is not None:
            pool.stop()
    if signum is not None:
        say(f"interrupted; run the same command again to resume ({out / 'cells.json'})")
        return 128 + signum
    path, tally = study.results(manifest, pyspy.problem if pyspy is not None else None)
    print(f"{path}  ({', '.join(f'{n} {s}' for s, n in sorted(tally.items()))})")
    return 1 if tally.get(FAILED) and not tally.get(OK) else 0


def refuse_foreign_outputs(out: Path, own: bool, force: bool) -> None:
    """Before any cell runs: refuse a symlinked results.md or predicted.md, and a folder holding other files
    that is not this experiment's, unless ``--force``."""
    for name in (RESULTS_FILE, PREDICTED_FILE):
        check_destination(out / name, replace=True)
    others = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE)
    if others and not own and not force:
        raise UsageError(
            f"{out} holds {printable(', '.join(others[:3]))}{' ...' if len(others) > 3 else ''} and is not "
            f"this experiment's folder (no {MANIFEST}): nothing written (choose another --out, or --force to "
            "write into it, replacing outputs of the same names)"
        )


def say(text: str) -> None:
    print(f"gpumon: {text}", file=sys.stderr)
