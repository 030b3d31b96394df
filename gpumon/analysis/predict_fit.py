"""A GPU model's constants fitted on measured pairs: the grid search behind ``predict_model.FITTED``,
``gpumon calibrate --from-pairs`` and every fold of benchmarks/predict_accuracy.py (pure Python).

The fit keeps the grid point with the smallest mean absolute percentage error of r over the pairs: time slicing
fits the slice, the switch cost and the utilisation scale; MPS fits the SM fill on top of the GPU's time-slicing
constants. The grid is coarse on purpose: 13 H100 pairs or 181 single 30-second Lucid runs do not pin the
constants down finer (the error surface is flat around its minimum, docs/predict.md).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from gpumon import __version__
from gpumon.analysis.predict_model import (
    DEFAULT,
    MPS,
    TIMESLICE,
    Constants,
    UNCALIBRATED,
    Solo,
    predict_pair,
)
from gpumon.core.store.calibration import Calibration
from gpumon.core.records.plainfile import open_plain
from gpumon.errors import UsageError
from gpumon.analysis.predict import read_jobs, gpu_model
from gpumon.core.interference.evidence import device_identity
from gpumon.core.store.trace import TraceError, load_run
from gpumon.core.store import calibration

MAX_PAIRS = (
    1000  # rows of a --from-pairs CSV (each reads two runs; tests/data/h100_pairs.json holds 16)
)
GRID: dict[str, list[dict[str, float]]] = {
    TIMESLICE: [
        {"slice_s": t * 1e-3, "switch_s": s * 1e-3, "util_scale": k / 100}
        for t in (1, 1.5, 2, 3, 3.5, 4, 5, 6, 8)
        for s in (0, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8)
        for k in range(50, 101, 5)
    ],
    MPS: [{"sm_fill": g / 100} for g in range(40, 101, 2)],
}


@dataclass(frozen=True)
class Measured:
    """One measured pair: the two jobs' solo profiles and their measured slowdowns."""

    a: Solo
    b: Solo
    r: tuple[float, float]


def mape(pairs: Sequence[Measured], mode: str, c: Constants) -> float:
    """Mean absolute percentage error of r over ``pairs`` with constants ``c``."""
    errors = [
        abs(p - m) / m
        for pair in pairs
        for p, m in zip(predict_pair(pair.a, pair.b, mode, c).slowdown, pair.r)
    ]
    return 100 * sum(errors) / len(errors) if errors else math.nan


def fit(pairs: Sequence[Measured], mode: str, base: Constants = DEFAULT) -> tuple[Constants, float]:
    """The constants of ``mode`` that predict ``pairs`` best (``base`` for the others and when there are no pairs),
    and their MAPE of r."""
    if not pairs:
        return base, math.nan
    best, best_err = base, math.inf
    for point in GRID[mode]:
        c = dataclasses.replace(base, **point)
        err = mape(pairs, mode, c)
        if err < best_err:
            best, best_err = c, err
    return best, best_err


def _read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of the pairs CSV ``path`` (at most ``MAX_PAIRS``: each reads two runs); UsageError when it cannot be
    read, lacks the columns or holds more."""
    try:
        with io.TextIOWrapper(open_plain(path), encoding="utf-8", newline="") as f:
            rows = list(itertools.islice(csv.DictReader(f), MAX_PAIRS + 1))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"--from-pairs {path}: {exc}") from None
    if len(rows) > MAX_PAIRS:
        raise UsageError(f"--from-pairs {path}: more than {MAX_PAIRS} pairs (a fit needs tens)")
    needed = ("run_a", "run_b", "r_a", "r_b")
    if not rows or any(k not in rows[0] for k in needed):
        raise UsageError(
            f"--from-pairs {path}: needs a header with {', '.join(needed)} and at least one pair"
        )
    return rows


def _solo(path: Path, number: int, run: str) -> tuple[Solo, str]:
    """The solo profile of the exclusive run ``run`` (relative to the CSV's folder) and its GPU model."""
    try:
        loaded = load_run(Path(run) if Path(run).is_absolute() else path.parent / run)
    except TraceError as exc:
        raise UsageError(f"--from-pairs {path}, line {number}: {exc}") from None
    kind, gpu = device_identity(loaded)
    if kind != "cuda":
        raise UsageError(f"--from-pairs {path}, line {number}: {run} is not a GPU run")
    return read_jobs([loaded])[0][0].solo, gpu


def _measured(
    path: Path, number: int, row: dict[str, str], jobs: dict[str, tuple[Solo, str]]
) -> Measured:
    """Line ``number`` of the CSV decoded and checked: its runs' solo profiles (loaded once into ``jobs``) and its
    measured slowdowns."""
    for key in ("run_a", "run_b"):
        if row[key] not in jobs:
            jobs[row[key]] = _solo(path, number, row[key])
    try:
        r = (float(row["r_a"]), float(row["r_b"]))
    except ValueError:
        raise UsageError(
            f"--from-pairs {path}, line {number}: r_a and r_b must be numbers"
        ) from None
    if not all(math.isfinite(x) and x > 0 for x in r):
        raise UsageError(f"--from-pairs {path}, line {number}: r_a and r_b must be positive")
    return Measured(jobs[row["run_a"]][0], jobs[row["run_b"]][0], r)


def _read_pairs(path: Path) -> tuple[list[Measured], str]:
    """The measured pairs of the CSV ``path`` and the one GPU model they all come from; UsageError otherwise."""
    jobs: dict[str, tuple[Solo, str]] = {}
    pairs = [_measured(path, n, row, jobs) for n, row in enumerate(_read_rows(path), start=2)]
    gpus = {gpu for _, gpu in jobs.values()}
    if len(gpus) != 1:
        raise UsageError(
            f"--from-pairs {path}: the runs come from {len(gpus)} GPU models ({', '.join(sorted(gpus))}); "
            "calibrate one at a time"
        )
    return pairs, gpus.pop()


def from_pairs(path: Path, share: str = TIMESLICE) -> Calibration:
    """``gpumon calibrate --from-pairs``: the constants of ``share`` fitted on the pairs of the CSV ``path``
    (columns run_a, run_b: exclusive runs; r_a, r_b: measured slowdowns), all from one GPU model, merged into that
    model's stored calibration (the constants the fit does not touch are kept). UsageError for bad input."""
    pairs, gpu = _read_pairs(path)
    base = (
        gpu_model(gpu, TIMESLICE)[0].constants or UNCALIBRATED
    )  # time slicing always has constants
    constants, error = fit(pairs, share, base)
    try:
        stored = calibration.load(gpu)
    except calibration.CalibrationError:
        stored = None  # replaced by this one
    kept = dict(stored.constants) if stored else {}
    fitted = {k: getattr(constants, k) for k in GRID[share][0]}
    return Calibration(
        gpu=gpu,
        constants={**kept, **fitted},
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        gpumon=__version__,
        device=calibration.FROM_PAIRS,
        details={
            "fitted_on": str(path),
            "share": share,
            "pairs": len(pairs),
            "mape_r_pct": round(error, 2),
            "fitted": sorted({*fitted, *(stored.pair_fitted if stored else ())}),
        },
    )
