"""95 % intervals of slowdown r and STP (both defined in ``gpumon.core.records.rates``, with the verdict).

Intervals come from bootstrap replicates of every rate:

* within one run, a circular moving-block bootstrap over the window cut into
  equal time bins (each bin holds the steps every job completed in it, read off
  the cumulative-steps curves), so autocorrelated step times and the coupling of
  two co-resident jobs (the same bins are drawn for both) are kept;
* across repeats (two or more runs of a condition), from the spread between
  the runs: a Student t with n - 1 degrees of freedom on log rates
  (analysis/spread.py), because resampling three runs cannot see beyond them.

The interval is the 2.5th-97.5th percentile of the replicates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, cast

import numpy as np

from gpumon.analysis import spread
from gpumon.analysis.rates import Curve, Window
from gpumon.core.records import rates as defs

CONFIDENCE = 0.95
N_BOOT = 2000
MIN_BINS = 8
MAX_BINS = 400


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95 % interval (NaN bounds when there is none)."""

    value: float
    low: float = math.nan
    high: float = math.nan

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    def to_dict(self) -> dict[str, float | None]:
        return {"estimate": _num(self.value), "low": _num(self.low), "high": _num(self.high)}


@dataclass(frozen=True, eq=False)
class RateSample:
    """Rates of one or two jobs over one window: point values and bootstrap replicates."""

    points: np.ndarray
    replicates: np.ndarray | None


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def bin_count(curves: Sequence[Curve], window: Window) -> int:
    """Bins holding about two steps of the slowest job each, at most MAX_BINS (below MIN_BINS: no interval)."""
    slowest = min(float(c.at(window.end) - c.at(window.start)) for c in curves)
    return int(min(MAX_BINS, slowest // 2))


def bin_progress(curves: Sequence[Curve], window: Window, bins: int) -> np.ndarray:
    """Steps completed per bin, shape (bins, jobs), fractional where a step straddles a bin edge."""
    edges = np.linspace(window.start, window.end, bins + 1)
    return np.column_stack([np.diff(c.at(edges)) for c in curves])


def block_bootstrap_means(series: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Circular moving-block bootstrap of the column means of ``series`` (rows in time order).

    Blocks are ceil(sqrt(rows)) rows long; returns shape (n_boot, columns).
    """
    rows = series.shape[0]
    length = math.ceil(math.sqrt(rows))
    blocks = math.ceil(rows / length)
    wrapped = np.concatenate([series, series[: length - 1]], axis=0)
    sums = np.cumsum(np.concatenate([np.zeros((1, series.shape[1])), wrapped]), axis=0)
    block_sums = sums[length : length + rows] - sums[:rows]
    starts = rng.integers(0, rows, size=(n_boot, blocks))
    return block_sums[starts].sum(axis=1) / (blocks * length)


def window_rates(
    curves: Sequence[Curve], window: Window, rng: np.random.Generator, n_boot: int = N_BOOT
) -> RateSample:
    """The jobs' rates in ``window`` and their joint block-bootstrap replicates (None if too few steps)."""
    points = np.array([c.rate(window) for c in curves])
    bins = bin_count(curves, window)
    if bins < MIN_BINS:
        return RateSample(points, None)
    progress = bin_progress(curves, window, bins)
    replicates = block_bootstrap_means(progress, n_boot, rng) / (window.duration / bins)
    return RateSample(points, replicates)


def combine(
    samples: Sequence[RateSample], rng: np.random.Generator, n_boot: int = N_BOOT
) -> RateSample:
    """The mean over repeats and its replicates: from the spread between runs (analysis/spread.py).

    A single run keeps its own block replicates (within-run noise only), or none.
    """
    points = np.mean([s.points for s in samples], axis=0)
    if len(samples) == 1:
        return RateSample(points, samples[0].replicates)
    stacked = np.array([s.points for s in samples], dtype=float)
    if not np.all(np.isfinite(stacked) & (stacked > 0)):
        return RateSample(points, None)
    return RateSample(points, spread.between_runs_replicates(stacked, n_boot, rng))


def interval(value: float, replicates: np.ndarray | None) -> Estimate:
    """The point value with the percentile interval of its finite replicates (none if half are not)."""
    if replicates is None:
        return Estimate(value)
    finite = replicates[np.isfinite(replicates)]
    if len(finite) < len(replicates) // 2:
        return Estimate(value)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return Estimate(value, float(low), float(high))


def ratio(x: RateSample, s: RateSample, job: int) -> tuple[float, np.ndarray | None]:
    """``defs.slowdown`` of the shared sample's ``job``: the value and its replicates (None unless both sides have some)."""
    value = defs.slowdown(float(x.points[0]), float(s.points[job]))
    if x.replicates is None or s.replicates is None:
        return value, None
    with np.errstate(divide="ignore", invalid="ignore"):
        return value, x.replicates[:, 0] / s.replicates[:, job]  # defs.slowdown, vectorised


def stp_estimate(baselines: Sequence[RateSample], s: RateSample) -> Estimate:
    """``defs.stp`` of the jobs' slowdowns, with its interval (the same sum over every replicate)."""
    ratios = [ratio(x, s, j) for j, x in enumerate(baselines)]
    reps = [r_reps for _, r_reps in ratios]
    # defs.stp over the replicate arrays (element by element): an array, typed as its float
    with np.errstate(
        divide="ignore"
    ):  # a replicate r of 0 (spread's far tail): its 1 / r is inf, as it should be
        replicates = None if any(r is None for r in reps) else defs.stp(reps)  # type: ignore[arg-type]
    return interval(defs.stp(r for r, _ in ratios), cast("np.ndarray | None", replicates))
