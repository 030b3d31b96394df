"""Intervals that hold across runs: replicates of a mean rate from the spread between repeats.

Resampling three runs with replacement cannot reach beyond the slowest and the
fastest of them, and the percentile interval it gives covers the mean of a
longer series far less often than it claims. With n repeats the mean's
replicates are drawn instead from a Student t with n - 1 degrees of freedom
scaled by the standard error between runs, on log rates (so a rate stays
positive), jointly for the jobs measured together (their covariance between
runs is kept). benchmarks/interval_coverage.py measures what this covers.
"""

from __future__ import annotations

from typing import Sized

import numpy as np

WITHIN = "within one run"
WITHIN_NOTE = (
    "Intervals cover the noise within one run only: a rerun can land outside them (on an H100 the same job "
    "alone moved up to 15 % between runs). For intervals that hold across runs, capture each condition "
    "several times (several --exclusive and --shared runs here, --repeats 3 in experiments), or take the "
    "baselines from the exclusive phases of one staggered run (--stagger S), so baseline and shared share a run."
)


def between_runs_replicates(
    points: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Replicates of the mean of ``points`` (runs x jobs, rates > 0): multivariate t on the log scale.

    Returns shape (n_boot, jobs); the mean of the runs times exp(t-distributed error).
    """
    runs = points.shape[0]
    logs = np.log(points)
    deviations = (logs - logs.mean(axis=0)) / np.sqrt(
        runs - 1
    )  # deviations.T @ deviations = sample covariance
    normal = rng.standard_normal((n_boot, runs)) @ deviations / np.sqrt(runs)
    scale = np.sqrt((runs - 1) / rng.chisquare(runs - 1, size=(n_boot, 1)))
    # two or three runs give the t few degrees of freedom: its far tail overflows exp to inf (and underflows to 0),
    # a draw beyond any bound, which the interval's percentiles take as such; no warning on the user's terminal
    with np.errstate(over="ignore"):
        return points.mean(axis=0) * np.exp(normal * scale)


def basis(samples: Sized) -> str:
    """What an interval over these rate samples (one per run) reflects: one run's noise, or the spread between n runs."""
    return WITHIN if len(samples) < 2 else f"between {len(samples)} runs"
