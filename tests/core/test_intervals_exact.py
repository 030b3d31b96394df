"""The intervals of r and STP (gpumon.analysis.slowdown, gpumon.analysis.spread) against what their statistics
imply, worked out by hand: bin counts, the percentile bounds, when there is no interval, an unbiased circular block
bootstrap, and between-run replicates distributed as a Student t on log rates. Written for the mutation run
(benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from gpumon.analysis import spread
from gpumon.analysis.rates import Curve, Window
from gpumon.analysis.slowdown import (
    MAX_BINS,
    MIN_BINS,
    Estimate,
    RateSample,
    bin_count,
    block_bootstrap_means,
    combine,
    interval,
    ratio,
    window_rates,
)

NAN = math.nan
T4_975 = 2.776  # the 97.5th percentile of Student's t with 4 degrees of freedom (tables)


def _line(rate: float, seconds: float = 100.0) -> Curve:
    t = np.linspace(0.0, seconds, 1001)
    return Curve(t, rate * t)


def test_bins_hold_about_two_steps_of_the_slowest_job() -> None:
    assert (
        bin_count([_line(1.0), _line(3.0)], Window(0.0, 22.0)) == 11
    )  # 22 steps of the slower: 11 bins
    assert bin_count([_line(3.0), _line(1.0)], Window(10.0, 32.0)) == 11
    assert bin_count([_line(100.0)], Window(0.0, 100.0)) == MAX_BINS


def test_an_interval_from_min_bins_up() -> None:
    rng = np.random.default_rng(1)
    at_min = window_rates([_line(1.0)], Window(0.0, 2.0 * MIN_BINS), rng, n_boot=50)
    assert at_min.replicates is not None and at_min.replicates.shape == (50, 1)
    assert at_min.points.tolist() == [1.0]
    below = window_rates([_line(1.0)], Window(0.0, 2.0 * MIN_BINS - 1.0), rng, n_boot=50)
    assert below.replicates is None and below.points.tolist() == [1.0]


def test_the_circular_block_bootstrap_is_unbiased() -> None:
    """Every row is in as many blocks as any other (the blocks wrap around): the replicates' mean is the mean."""
    series = np.zeros((16, 2))
    series[0, 0] = 16.0  # a spike in the first row, the first column: mean 1
    series[9, 1] = 16.0
    reps = block_bootstrap_means(series, 200_000, np.random.default_rng(2))
    assert reps.shape == (200_000, 2)
    assert reps.mean(axis=0) == pytest.approx([1.0, 1.0], rel=0.01)


def test_the_interval_is_the_middle_95_percent_of_the_finite_replicates() -> None:
    est = interval(1.5, np.arange(0.0, 1001.0))
    assert (est.value, est.low, est.high) == (
        1.5,
        pytest.approx(25.0),
        pytest.approx(975.0),
    ) and est.has_interval
    assert est.to_dict() == {
        "estimate": 1.5,
        "low": pytest.approx(25.0),
        "high": pytest.approx(975.0),
    }
    half = np.array([1.0, 2.0, 3.0, 4.0, 5.0] + [NAN] * 5)  # half finite: still an interval
    assert interval(2.0, half).has_interval
    assert not interval(2.0, np.array([1.0, 2.0, 3.0, 4.0] + [NAN] * 6)).has_interval
    assert interval(
        2.0, np.array([1.0, 2.0, 3.0, 4.0, 5.0] + [NAN] * 6)
    ).has_interval  # 5 of 11: 11 // 2 = 5
    none = interval(2.0, None)
    assert (
        none.value == 2.0
        and not none.has_interval
        and none.to_dict() == {"estimate": 2.0, "low": None, "high": None}
    )
    assert interval(3.0, np.array([1.0] + [NAN] * 9)).value == 3.0


def test_repeats_combine_only_positive_finite_rates() -> None:
    rng = np.random.default_rng(3)
    slow = [RateSample(np.array([0.5]), None), RateSample(np.array([0.6]), None)]
    both = combine(slow, rng, n_boot=100)
    assert both.points.tolist() == [pytest.approx(0.55)] and both.replicates is not None
    for bad in (0.0, -1.0, NAN, math.inf):
        got = combine(
            [RateSample(np.array([2.0]), None), RateSample(np.array([bad]), None)], rng, n_boot=100
        )
        assert got.replicates is None and got.points.shape == (1,), bad
    one = RateSample(np.array([4.0]), np.array([[3.0], [5.0]]))
    kept = combine([one], rng)
    assert kept.points.tolist() == [4.0] and kept.replicates is one.replicates


def test_between_runs_replicates_are_a_student_t_on_log_rates_around_the_mean() -> None:
    points = np.array(
        [[10.0, 20.0], [12.0, 24.0], [9.0, 18.0], [11.0, 22.0], [13.0, 26.0]]
    )  # B = 2 A in every run
    reps = spread.between_runs_replicates(points, 400_000, np.random.default_rng(4))
    assert reps.shape == (400_000, 2)
    assert np.median(reps, axis=0) == pytest.approx(points.mean(axis=0), rel=0.005)
    assert reps[:, 1] / reps[:, 0] == pytest.approx(
        2.0
    )  # the jobs' covariance between runs is kept
    se = np.log(points[:, 0]).std(ddof=1) / math.sqrt(len(points))
    scaled = np.log(reps[:, 0] / points[:, 0].mean()) / se
    assert np.percentile(scaled, [2.5, 97.5]) == pytest.approx([-T4_975, T4_975], rel=0.02)
    assert scaled.std() == pytest.approx(
        math.sqrt(4 / 2), rel=0.03
    )  # var of t with 4 d.o.f.: 4 / (4 - 2)


def test_what_an_interval_reflects() -> None:
    assert spread.basis([1.0]) == spread.WITHIN
    assert spread.basis([1.0, 2.0]) == "between 2 runs"
    assert spread.basis([1.0, 2.0, 3.0]) == "between 3 runs"


def test_an_estimate_without_an_interval() -> None:
    assert not Estimate(1.0, NAN, 2.0).has_interval and not Estimate(1.0, 0.5, NAN).has_interval
    assert Estimate(NAN).to_dict() == {"estimate": None, "low": None, "high": None}


def test_a_replicate_of_zero_gives_an_infinite_or_undefined_ratio_silently() -> None:
    """A bootstrap replicate with no steps divides by zero: inf or NaN (interval() drops them), and no numpy warning
    on gpumon's stderr."""
    x = RateSample(np.array([2.0]), np.array([[1.0], [0.0], [2.0]]))
    s = RateSample(np.array([1.0, 1.0]), np.array([[0.5, 0.0], [1.0, 0.0], [1.0, 1.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, reps = ratio(x, s, 1)
    assert value == 2.0
    assert reps[0] == math.inf and math.isnan(reps[1]) and reps[2] == 2.0
    assert ratio(x, RateSample(s.points, None), 0) == (2.0, None)
