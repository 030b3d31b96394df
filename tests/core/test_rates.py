"""The one definition of rates, slowdown, STP and the verdict (gpumon.core.records.rates), and the live figures built on it."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import StepBatch, StepEvent
from gpumon.core.records.rates import (
    KEEP_S,
    MAX_KEPT,
    MIN_OVERLAP_S,
    MIN_OVERLAP_STEPS,
    RESOLUTION_S,
    TRIM_EVERY,
    Overlap,
    OverlapRates,
    Point,
    exclusive_rate,
    interference,
    MIN_LIVE_STEPS,
    live_rate,
    overlap_window,
    slope,
)


def test_a_rate_is_a_wall_clock_slope():
    assert slope(Point(1.0, 10), Point(3.0, 30)) == 10.0
    assert math.isnan(slope(Point(1.0, 10), Point(1.0, 11)))
    assert exclusive_rate([1.0, 2.0, 5.0], [3, 4, 7]) == pytest.approx(1.0)
    assert math.isnan(exclusive_rate([1.0], [3]))
    assert (
        overlap_window((0.0, 4.0), (10.0, 20.0)) == (4.0, 10.0)
        and overlap_window((0.0, 2.0), (1.0, 3.0)) is None
    )
    assert math.isnan(live_rate([], [], 1.0))
    assert live_rate([Point(0.0, 0)], [], 1.0) == 0.0  # one step, none since: 0
    assert live_rate([Point(0.0, 0)], [Point(1.0, 5)], 1.0) == 5.0


def _step(process: str, n: int, t: float, busy_s: float, warmup: bool = False) -> StepBatch:
    return StepBatch.of(StepEvent(process, 1, n, t, busy_s, samples=8.0, warmup=warmup))


def test_live_rate_divides_by_elapsed_time_not_busy_time():
    """Steps every 0.1 s whose recorded durations add up to half of that: 10 it/s, not 20."""
    stats = LiveStats(window_s=2.0)
    for n in range(50):
        stats.handle(_step("A", n, 0.1 * (n + 1), 0.05))
    figures = stats.figures("A", 5.0)
    assert figures.iter_per_s == pytest.approx(10.0)
    assert figures.samples_per_s == pytest.approx(80.0)
    assert stats.figures("A", 60.0).iter_per_s == pytest.approx(
        MIN_LIVE_STEPS / (60.0 - 5.0 + 0.1 * MIN_LIVE_STEPS)
    ), "a job that stopped stepping decays towards 0: its last steps over the time up to now"


def test_a_slow_job_reads_its_last_steps_rate_not_zero():
    """Steps every 6.2 s (issue 43: resnet18 on a CPU): no step in the 2 s window, yet the rate is one step per
    6.2 s from the last steps, between steps, and it decays only once the next step is overdue."""
    stats = LiveStats(window_s=2.0)
    for n in range(4):
        stats.handle(_step("A", n, 6.2 * (n + 1), 6.2))
    last = 6.2 * 4
    assert stats.figures("A", last + 0.5).iter_per_s == pytest.approx(1 / 6.2)
    assert stats.figures("A", last + 5.0).iter_per_s == pytest.approx(1 / 6.2)
    assert stats.figures("A", last + 3.0 * 6.2).iter_per_s < 1 / 6.2
    warm = LiveStats(window_s=2.0)  # a slow job in its warm-up stays in it between two steps
    for n in range(3):
        warm.handle(StepBatch.of(StepEvent("A", 1, n, 6.2 * (n + 1), 6.2, warmup=True)))
    assert warm.figures("A", 6.2 * 3 + 0.5).warmup and warm.figures("A", 6.2 * 3 + 5.0).warmup
    single = LiveStats(window_s=2.0)
    single.handle(_step("A", 0, 6.2, 6.2))
    single.handle(_step("A", 1, 12.4, 6.2))
    assert single.figures("A", 13.0).iter_per_s == pytest.approx(1 / 6.2)
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


def _bursty_pair() -> list[tuple[str, Point, bool]]:
    """A steps in pairs (2 ms, then 58 ms: 33 it/s), B irregularly (5-55 ms) from 3.37 s; each with warm-up steps."""
    rng = random.Random(34)
    steps, t = [], 0.0
    for n in range(600):
        t += 0.002 if n % 2 else 0.058
        steps.append(("A", Point(round(t, 6), n), n < 3))
    t = 3.37
    for n in range(500):
        t += rng.uniform(0.005, 0.055)
        steps.append(("B", Point(round(t, 6), n), n < 2))
    return sorted(steps, key=lambda s: s[1].t)


def _reference(steps: list[tuple[str, Point, bool]], until: float) -> dict[str, float]:
    """compare's definition, written out: post-warm-up curves interpolated at the overlap's edges."""
    curves = {
        slot: [(p.t, p.n) for s, p, warm in steps if s == slot and not warm and p.t <= until]
        for slot in "AB"
    }
    start, end = max(c[0][0] for c in curves.values()), min(c[-1][0] for c in curves.values())
    at = {
        slot: lambda x, c=c: float(np.interp(x, [p[0] for p in c], [p[1] for p in c]))
        for slot, c in curves.items()
    }
    return {slot: (at[slot](end) - at[slot](start)) / (end - start) for slot in curves}


@pytest.mark.parametrize("first", ["A", "B"])
def test_overlap_rates_do_not_depend_on_the_order_the_jobs_batches_arrive_in(first):
    """Each job's steps reach the monitor in batches of its own (the probe writes every 0.1 s, headless reads every
    second), so one job's batch comes after the other's later steps. Fed in that order, the overlap's rates are, at
    every reading, those of the same steps in time order: compare's (on the base, readings were off by up to 100 %
    with A's batches first and 48 % with B's: a job's count at the window's edges was taken from whichever of its
    steps had arrived)."""
    steps = _bursty_pair()
    arrival = sorted(
        steps, key=lambda s: (math.ceil(s[1].t), s[0] != first, s[1].t)
    )  # per second, one job first
    in_order, batched = OverlapRates(), OverlapRates()
    readings = 0
    for second in range(1, math.ceil(steps[-1][1].t) + 1):
        for slot, point, warm in (s for s in steps if second - 1 < s[1].t <= second):
            in_order.add(slot, point, warm)
        for slot, point, warm in (s for s in arrival if second - 1 < s[1].t <= second):
            batched.add(slot, point, warm)
        expected = in_order.rates("AB")
        if not math.isnan(expected["B"]):
            readings += 1
            assert batched.rates("AB") == pytest.approx(expected, rel=1e-9), second
            assert expected == pytest.approx(_reference(steps, second), rel=1e-6)
    assert readings >= 15


def test_overlap_rates_keep_a_bounded_history_of_a_job_alone():
    """A job alone for a long while keeps only its last KEEP_S seconds (at most MAX_KEPT points, trimmed every
    TRIM_EVERY steps) for a late edge."""
    o = OverlapRates()
    for n in range(200_000):
        o.add("A", Point(n * 0.0005, n), False)
    assert len(o._curves["A"].points) <= min(MAX_KEPT, KEEP_S / RESOLUTION_S) + TRIM_EVERY + 1
    o.add(
        "B", Point(99.0, 0), False
    )  # B's first step, 1 s behind A's latest: A's count there is still known
    o.add("B", Point(99.5, 10), False)
    assert o.rates("AB") == pytest.approx({"A": 2000.0, "B": 20.0})


def test_no_r_nor_verdict_before_the_window_can_hold_one():
    """The live line measures until the overlap is MIN_OVERLAP_S long with MIN_OVERLAP_STEPS steps of each job, says
    how long that still takes at each job's rate so far, and says why there will be none when the overlap ended
    short."""
    x = {"A": 40.0, "B": 20.0}
    short = Overlap(
        10.0, 12.0, {"A": 40.0, "B": 20.0}, {"A": 20.0, "B": 10.0}
    )  # 2 s: B's 50 steps come at 5 s
    said = interference(x, short)
    assert (
        said.measuring
        and said.left_s == pytest.approx(3.0)
        and said.text == "measuring… (3 s left)"
    )
    assert (
        all(math.isnan(r) for r in said.slowdown.values())
        and math.isnan(said.stp)
        and said.verdict == ""
    )
    slow = Overlap(
        10.0, 16.0, {"A": 60.0, "B": 30.0}, {"A": 10.0, "B": 5.0}
    )  # 6 s, but B needs 4 s more steps
    assert interference(x, slow).text == "measuring… (4 s left)"
    enough = Overlap(
        10.0, 10.0 + MIN_OVERLAP_S, {"A": 100.0, "B": MIN_OVERLAP_STEPS}, {"A": 20.0, "B": 10.0}
    )
    assert (
        not interference(x, enough).measuring
        and interference(x, enough).text == "cannot tell: STP 1.00"
    )
    waiting = Overlap(
        math.nan,
        math.nan,
        {"A": math.nan, "B": math.nan},
        {"A": math.nan, "B": math.nan},
        waiting=("B",),
    )
    assert interference(x, waiting).text == "measuring… (waiting for B to pass its warm-up)"
    assert (
        interference({"A": 40.0}, short).text
        == "measuring… (3 s left); STP needs the exclusive rate of B"
    )
    ended = Overlap(10.0, 11.5, {"A": 30.0, "B": 15.0}, {"A": 20.0, "B": 10.0}, closed=True)
    assert interference(x, ended).text == (
        f"too short to tell: the jobs overlapped 1.5 s (a verdict needs "
        f"{MIN_OVERLAP_S:g} s and {MIN_OVERLAP_STEPS} steps of each job)"
    )


def test_a_rate_under_one_step_a_second_reads_as_a_steps_time():
    from gpumon.core.records.units import fmt_rate

    assert fmt_rate(1 / 6.2) == "1 step / 6.2 s" and fmt_rate(0.0) == "0.00 it/s"
    assert fmt_rate(12.5) == "12.5 it/s" and fmt_rate(0.5, "samples/s") == "0.50 samples/s"
