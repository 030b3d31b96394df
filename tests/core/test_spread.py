"""Intervals across repeats (analysis/spread.py): they must cover what a rerun would show."""

from __future__ import annotations

import numpy as np

from gpumon.analysis.slowdown import RateSample, combine, interval
from gpumon.analysis.spread import WITHIN, basis, between_runs_replicates


def test_three_repeat_intervals_cover_the_true_ratio_at_least_90_percent() -> None:
    """Runs whose rates move 10 % between repeats (as on the H100): 3 runs a side, 400 trials."""
    rng = np.random.default_rng(0)
    sigma = 0.10
    true_x, true_s = 100 * np.exp(sigma**2 / 2), 50 * np.exp(sigma**2 / 2)
    hits = 0
    for _ in range(400):
        x = combine(
            [RateSample(np.array([v]), None) for v in 100 * np.exp(rng.normal(0, sigma, 3))],
            rng,
            2000,
        )
        s = combine(
            [RateSample(np.array([v]), None) for v in 50 * np.exp(rng.normal(0, sigma, 3))],
            rng,
            2000,
        )
        e = interval(float(x.points[0] / s.points[0]), x.replicates[:, 0] / s.replicates[:, 0])
        hits += e.low <= true_x / true_s <= e.high
    assert hits >= 0.90 * 400


def test_jobs_measured_together_keep_their_covariance() -> None:
    """Two jobs of one shared run that rise and fall together between runs: their replicates do too."""
    points = np.array([[10.0, 20.0], [11.0, 22.0], [9.0, 18.0], [10.5, 21.0]])
    reps = between_runs_replicates(points, 4000, np.random.default_rng(1))
    assert reps.shape == (4000, 2)
    assert np.corrcoef(np.log(reps).T)[0, 1] > 0.99
    assert np.all(reps > 0)


def test_basis_says_whether_an_interval_sees_other_runs() -> None:
    one = [RateSample(np.array([1.0]), None)]
    assert basis(one) == WITHIN
    assert basis(one * 3) == "between 3 runs"
