"""The one definition of rates, slowdown, STP and the verdict (gpumon.core.records.rates), and the live figures built on it."""

from __future__ import annotations

import math

import pytest

from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import StepEvent
from gpumon.core.records.rates import OverlapRates, Point, exclusive_rate, live_rate, overlap_window, slope


def test_a_rate_is_a_wall_clock_slope():
    assert slope(Point(1.0, 10), Point(3.0, 30)) == 10.0
    assert math.isnan(slope(Point(1.0, 10), Point(1.0, 11)))
    assert exclusive_rate([1.0, 2.0, 5.0], [3, 4, 7]) == pytest.approx(1.0)
    assert math.isnan(exclusive_rate([1.0], [3]))
    assert overlap_window((0.0, 4.0), (10.0, 20.0)) == (4.0, 10.0) and overlap_window((0.0, 2.0), (1.0, 3.0)) is None
    assert live_rate(None, [], ever=True) == 0.0 and math.isnan(live_rate(None, [], ever=False))
    assert live_rate(Point(0.0, 0), [Point(1.0, 5)], ever=True) == 5.0


def _step(process: str, n: int, t: float, busy_s: float, warmup: bool = False) -> StepEvent:
    return StepEvent(process, 1, n, t, busy_s, samples=8.0, warmup=warmup)


def test_live_rate_divides_by_elapsed_time_not_busy_time():
    """Steps every 0.1 s whose recorded durations add up to half of that: 10 it/s, not 20."""
    stats = LiveStats(window_s=2.0)
    for n in range(50):
        stats.handle(_step("A", n, 0.1 * (n + 1), 0.05))
    figures = stats.figures("A", 5.0)
    assert figures.iter_per_s == pytest.approx(10.0)
    assert figures.samples_per_s == pytest.approx(80.0)
    assert stats.figures("A", 60.0).iter_per_s == 0.0, "a job that stopped stepping reads 0"
    assert math.isnan(stats.figures("B", 5.0).iter_per_s)


def test_overlap_rates_start_at_the_later_first_steady_step():
    """A runs alone at 10 it/s, then B joins; both run at 5 it/s from B's first post-warm-up step."""
    o = OverlapRates()
    events = [("A", Point(0.1 * (i + 1), i), i < 3) for i in range(100)]  # A alone until 10 s
    events += [("A", Point(10.0 + 0.2 * (i + 1), 100 + i), False) for i in range(50)]
    events += [("B", Point(10.0 + 0.2 * (i + 1), i), i < 2) for i in range(50)]
    for process, point, warm in sorted(events, key=lambda e: (e[1].t, e[0])):
        o.add(process, point, warm)
        if process == "B" and point.n == 1:
            assert all(math.isnan(r) for r in o.rates(["A", "B"]).values()), "B still warming up"
    assert o.rates(["A", "B"]) == {"A": pytest.approx(5.0), "B": pytest.approx(5.0)}
    o.forget("B")
    assert math.isnan(o.rates(["A", "B"])["A"])


def test_overlap_rates_interpolate_at_the_window_edges_and_freeze_when_a_job_leaves():
    """A steps every 0.3 s, B every 0.2 s from 1.0 s to 3.0 s: the window is [1.2, 3.0], both edges interpolated."""
    o = OverlapRates()
    events = [("A", Point(0.3 * (i + 1), i)) for i in range(20)]
    events += [("B", Point(1.0 + 0.2 * (i + 1), i)) for i in range(10)]
    for process, point in sorted(events, key=lambda e: e[1].t):
        o.add(process, point, warmup=False)
        if process == "B" and point.n == 9:
            o.close("B")
    assert o.rates(["A", "B"]) == {"A": pytest.approx(1 / 0.3), "B": pytest.approx(5.0)}
