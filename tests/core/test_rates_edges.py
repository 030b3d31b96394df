"""gpumon.core.records.rates at its edges: each definition against values worked out by hand (the boundaries of
the verdict and of r, the interference line's words, the overlap's interpolated edges and what close and forget
change). Written for the mutation run (benchmarks/mutation.py, docs/testing.md): each check fails a mutant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpumon.core.records.rates import (
    CANNOT_TELL, LOSES, MIN_OVERLAP_S, PAYS, ROUNDING, Overlap, OverlapRates, Point, _between, interference,
    live_rate, overlap_window, slowdown, verdict,
)

NAN = math.nan


def _over(rates: dict[str, float]) -> Overlap:
    """An overlap window long enough to hold a verdict (ten times the minimum), with these shared rates."""
    duration = 10 * MIN_OVERLAP_S
    return Overlap(0.0, duration, {slot: rate * duration for slot, rate in rates.items()}, dict(rates))


def test_the_verdict_needs_the_whole_interval_beyond_rounding() -> None:
    assert verdict(1 + 2 * ROUNDING, 3.0) == PAYS
    assert verdict(1 + ROUNDING, 3.0) == CANNOT_TELL  # at the rounding: not above it
    assert verdict(0.2, 1 - 2 * ROUNDING) == LOSES
    assert verdict(0.2, 1 - ROUNDING) == CANNOT_TELL
    assert verdict(0.9, 1.1) == CANNOT_TELL and verdict(NAN, NAN) == CANNOT_TELL


def test_r_needs_both_rates_positive_and_finite() -> None:
    assert slowdown(0.5, 0.25) == 2.0  # rates under one per second are rates too
    assert slowdown(3.0, 0.5) == 6.0
    for x, s in ((0.0, 1.0), (1.0, 0.0), (-1.0, 1.0), (math.inf, 1.0), (1.0, math.inf), (NAN, 1.0), (1.0, NAN)):
        assert math.isnan(slowdown(x, s)), (x, s)


def test_an_overlap_needs_time_between_its_edges() -> None:
    assert overlap_window([1.0, 2.0], [2.0, 5.0]) is None  # the later start is the earlier end: no time together
    assert overlap_window([1.0, 2.0], [3.0, 5.0]) == (2.0, 3.0)


def test_a_live_rate_runs_from_its_anchor_else_its_first_step() -> None:
    steps = [Point(1.0, 10), Point(2.0, 12), Point(3.0, 14)]
    assert live_rate(None, steps, ever=True) == 2.0
    assert live_rate(Point(0.0, 5), steps, ever=True) == 3.0
    assert math.isnan(live_rate(None, [Point(1.0, 10)], ever=True))  # one step, no anchor: no time yet


def test_the_curve_between_two_steps_is_a_straight_line() -> None:
    assert _between(Point(1.0, 4), Point(3.0, 10), 2.0) == Point(2.0, 7.0)
    assert _between(Point(1.0, 4), Point(5.0, 12), 4.0) == Point(4.0, 10.0)
    assert _between(Point(1.0, 4), None, 9.0) == Point(9.0, 4)  # nothing after it yet: the count stands
    assert _between(Point(1.0, 4), Point(1.0, 6), 1.0) == Point(1.0, 4)


def test_the_interference_line_in_words() -> None:
    even = interference({"A": 100.0, "B": 50.0}, _over({"B": 25.0, "A": 50.0}))
    assert list(even.shared.items()) == [("A", 50.0), ("B", 25.0)] and even.slowdown == {"A": 2.0, "B": 2.0}
    assert (even.stp, even.verdict, even.text) == (1.0, CANNOT_TELL, "cannot tell: STP 1.00")
    pays = interference({"A": 100.0, "B": 100.0}, _over({"A": 80.0, "B": 80.0}))
    assert (pays.stp, pays.verdict, pays.text) == (pytest.approx(1.6), PAYS, "sharing pays: STP 1.60")
    loses = interference({"A": 100.0, "B": 100.0}, _over({"A": 40.0, "B": 40.0}))
    assert (loses.verdict, loses.text) == (LOSES, "sharing loses: STP 0.80")
    barely = interference({"A": 100.0, "B": 100.0}, _over({"A": 50.2, "B": 50.0}))  # STP 1.002: 1.00 as shown
    assert barely.verdict == CANNOT_TELL and barely.text == "cannot tell: STP 1.00"


def test_the_interference_line_says_which_exclusive_rate_is_missing() -> None:
    one = interference({"A": 100.0}, _over({"B": 50.0, "A": 80.0}))
    assert list(one.shared.items()) == [("A", 80.0), ("B", 50.0)]
    assert one.slowdown["A"] == 1.25 and math.isnan(one.slowdown["B"]) and math.isnan(one.stp)
    assert (one.verdict, one.text) == ("", "STP needs the exclusive rate of B")
    both = interference({}, _over({"A": 1.0, "B": 2.0}))
    assert both.text == "STP needs the exclusive rate of A and B"
    stalled = interference({"A": 100.0, "B": 100.0}, _over({"A": 50.0, "B": 0.0}))  # B known alone, no shared steps
    assert math.isnan(stalled.slowdown["B"]) and stalled.verdict == "" and stalled.text == "measuring…"
    alone = interference({}, _over({"A": 5.0}))
    assert alone.text == "" and alone.shared == {"A": 5.0}


# A steps at whole seconds with a gap (7 → 9); B warms up, then steps every 0.5 s from 3.25 to 7.75.
A_STEPS = [(1.0, 0), (2.0, 1), (3.0, 2), (4.0, 3), (5.0, 4), (6.0, 5), (7.0, 6), (9.0, 7), (10.0, 8)]
B_STEPS = [(3.25 + 0.5 * k, k) for k in range(10)]
B_WARMUP = [(2.0, -2), (2.5, -1)]


def _fed() -> OverlapRates:
    rates = OverlapRates()
    events = [(t, "A", n, False) for t, n in A_STEPS] + [(t, "B", n, False) for t, n in B_STEPS]
    events += [(t, "B", n, True) for t, n in B_WARMUP]
    for t, process, n, warmup in sorted(events):
        rates.add(process, Point(t, n), warmup)
    return rates


def _by_hand(start: float, end: float, steps: list[tuple[float, int]]) -> float:
    t, n = zip(*steps)
    at_start, at_end = np.interp([start, end], t, n)
    return float((at_end - at_start) / (end - start))


def test_the_overlap_rates_interpolate_both_edges_as_compare_does() -> None:
    rates = _fed().rates(["A", "B"])
    start, end = 3.25, 7.75  # B's first steady step, B's last step (A stepped on, to 10 s)
    assert rates["A"] == pytest.approx(_by_hand(start, end, A_STEPS), rel=1e-12)
    assert rates["A"] == pytest.approx((6.375 - 2.25) / 4.5, rel=1e-12)  # A at 7.75 s: 6 + 0.75 / 2 steps
    assert rates["B"] == pytest.approx(9 / 4.5, rel=1e-12)


def test_nan_until_every_job_is_past_its_warmup() -> None:
    rates = OverlapRates()
    assert rates.rates([]) == {}
    rates.add("A", Point(1.0, 0), False)
    rates.add("A", Point(2.0, 1), False)
    rates.add("B", Point(2.5, 0), True)
    assert all(math.isnan(v) for v in rates.rates(["A", "B"]).values())
    rates.add("B", Point(3.0, 1), False)
    assert all(math.isnan(v) for v in rates.rates(["A", "B"]).values())  # no time together yet
    rates.add("A", Point(4.0, 2), False)
    rates.add("B", Point(5.0, 3), False)
    assert rates.rates(["A", "B"]) == pytest.approx({"A": 0.5, "B": 1.0})  # window 3 → 4 s


def test_after_a_job_left_the_rates_stay_as_they_were() -> None:
    rates = _fed()
    before = rates.rates(["A", "B"])
    rates.close("B")
    rates.add("B", Point(8.75, 10), False)  # whatever comes later does not move the window
    rates.add("A", Point(11.0, 9), False)
    assert rates.rates(["A", "B"]) == before


def test_closing_a_job_alone_or_unknown_closes_nothing() -> None:
    rates = OverlapRates()
    rates.add("A", Point(1.0, 0), False)
    rates.close("A")  # alone: no overlap to end
    rates.close("B")  # never stepped
    rates.add("A", Point(2.0, 1), False)
    rates.add("B", Point(2.5, 0), False)
    rates.add("A", Point(3.0, 2), False)
    rates.add("B", Point(3.5, 1), False)
    assert rates.rates(["A", "B"]) == pytest.approx({"A": 1.0, "B": 1.0})


def test_a_new_job_in_a_slot_starts_a_new_overlap() -> None:
    rates = _fed()
    rates.close("B")
    rates.forget("B")
    assert math.isnan(rates.rates(["A"])["A"])  # no overlap now
    for k in range(5):  # a new B from 12 s, every 0.5 s; A on at whole seconds
        rates.add("B", Point(12.0 + 0.5 * k, k), False)
        if k % 2 == 0:
            rates.add("A", Point(12.0 + 0.5 * k + 0.25, 9 + k // 2), False)
    got = rates.rates(["A", "B"])
    a_steps = [*A_STEPS, (12.25, 9), (13.25, 10), (14.25, 11)]
    assert got["A"] == pytest.approx(_by_hand(12.0, 14.0, a_steps), rel=1e-12)
    assert got["B"] == pytest.approx(4 / 2.0, rel=1e-12)
