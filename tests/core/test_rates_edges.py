"""gpumon.core.records.rates at its edges: each definition against values worked out by hand (the boundaries of
the verdict and of r, the interference line's words, the overlap's interpolated edges and what close and forget
change). Written for the mutation run (benchmarks/mutation.py, docs/testing.md): each check fails a mutant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpumon.core.records.rates import (
    CANNOT_TELL,
    KEEP_S,
    LOSES,
    MAX_KEPT,
    MIN_OVERLAP_S,
    PAYS,
    ROUNDING,
    TRIM_EVERY,
    Overlap,
    OverlapRates,
    Point,
    _between,
    _Curve,
    interference,
    live_rate,
    overlap_window,
    slowdown,
    verdict,
)

NAN = math.nan


def _over(rates: dict[str, float]) -> Overlap:
    """An overlap window long enough to hold a verdict (ten times the minimum), with these shared rates."""
    duration = 10 * MIN_OVERLAP_S
    return Overlap(
        0.0, duration, {slot: rate * duration for slot, rate in rates.items()}, dict(rates)
    )


def test_the_verdict_needs_the_whole_interval_beyond_rounding() -> None:
    assert verdict(1 + 2 * ROUNDING, 3.0) == PAYS
    assert verdict(1 + ROUNDING, 3.0) == CANNOT_TELL  # at the rounding: not above it
    assert verdict(0.2, 1 - 2 * ROUNDING) == LOSES
    assert verdict(0.2, 1 - ROUNDING) == CANNOT_TELL
    assert verdict(0.9, 1.1) == CANNOT_TELL and verdict(NAN, NAN) == CANNOT_TELL


def test_r_needs_both_rates_positive_and_finite() -> None:
    assert slowdown(0.5, 0.25) == 2.0  # rates under one per second are rates too
    assert slowdown(3.0, 0.5) == 6.0
    for x, s in (
        (0.0, 1.0),
        (1.0, 0.0),
        (-1.0, 1.0),
        (math.inf, 1.0),
        (1.0, math.inf),
        (NAN, 1.0),
        (1.0, NAN),
    ):
        assert math.isnan(slowdown(x, s)), (x, s)


def test_an_overlap_needs_time_between_its_edges() -> None:
    assert (
        overlap_window([1.0, 2.0], [2.0, 5.0]) is None
    )  # the later start is the earlier end: no time together
    assert overlap_window([1.0, 2.0], [3.0, 5.0]) == (2.0, 3.0)


def test_a_live_rate_runs_from_its_anchor_else_its_first_step() -> None:
    steps = [Point(1.0, 10), Point(2.0, 12), Point(3.0, 14)]
    assert live_rate([], steps, 3.0) == 2.0
    assert live_rate([Point(0.0, 5)], steps, 3.0) == 3.0
    assert math.isnan(live_rate([], [Point(1.0, 10)], 1.0))  # one step, no anchor: no time yet
    # fewer than MIN_LIVE_STEPS steps in the window: the span reaches back to the job's last MIN_LIVE_STEPS steps
    before = [Point(0.0, 0), Point(10.0, 1), Point(20.0, 2)]
    assert live_rate(before, [Point(30.0, 3)], 30.5) == pytest.approx(0.1)


def test_the_curve_between_two_steps_is_a_straight_line() -> None:
    assert _between(Point(1.0, 4), Point(3.0, 10), 2.0) == Point(2.0, 7.0)
    assert _between(Point(1.0, 4), Point(5.0, 12), 4.0) == Point(4.0, 10.0)
    assert _between(Point(1.0, 4), None, 9.0) == Point(
        9.0, 4
    )  # nothing after it yet: the count stands
    assert _between(Point(1.0, 4), Point(1.0, 6), 1.0) == Point(1.0, 4)


def test_the_interference_line_in_words() -> None:
    even = interference({"A": 100.0, "B": 50.0}, _over({"B": 25.0, "A": 50.0}))
    assert list(even.shared.items()) == [("A", 50.0), ("B", 25.0)] and even.slowdown == {
        "A": 2.0,
        "B": 2.0,
    }
    assert (even.stp, even.verdict, even.text) == (1.0, CANNOT_TELL, "cannot tell: STP 1.00")
    pays = interference({"A": 100.0, "B": 100.0}, _over({"A": 80.0, "B": 80.0}))
    assert (pays.stp, pays.verdict, pays.text) == (
        pytest.approx(1.6),
        PAYS,
        "sharing pays: STP 1.60",
    )
    loses = interference({"A": 100.0, "B": 100.0}, _over({"A": 40.0, "B": 40.0}))
    assert (loses.verdict, loses.text) == (LOSES, "sharing loses: STP 0.80")
    barely = interference(
        {"A": 100.0, "B": 100.0}, _over({"A": 50.2, "B": 50.0})
    )  # STP 1.002: 1.00 as shown
    assert barely.verdict == CANNOT_TELL and barely.text == "cannot tell: STP 1.00"


def test_the_interference_line_says_which_exclusive_rate_is_missing() -> None:
    one = interference({"A": 100.0}, _over({"B": 50.0, "A": 80.0}))
    assert list(one.shared.items()) == [("A", 80.0), ("B", 50.0)]
    assert one.slowdown["A"] == 1.25 and math.isnan(one.slowdown["B"]) and math.isnan(one.stp)
    assert (one.verdict, one.text) == ("", "STP needs the exclusive rate of B")
    both = interference({}, _over({"A": 1.0, "B": 2.0}))
    assert both.text == "STP needs the exclusive rate of A and B"
    stalled = interference(
        {"A": 100.0, "B": 100.0}, _over({"A": 50.0, "B": 0.0})
    )  # B known alone, no shared steps
    assert (
        math.isnan(stalled.slowdown["B"]) and stalled.verdict == "" and stalled.text == "measuring…"
    )
    alone = interference({}, _over({"A": 5.0}))
    assert alone.text == "" and alone.shared == {"A": 5.0}


# A steps at whole seconds with a gap (7 → 9); B warms up, then steps every 0.5 s from 3.25 to 7.75.
A_STEPS = [
    (1.0, 0),
    (2.0, 1),
    (3.0, 2),
    (4.0, 3),
    (5.0, 4),
    (6.0, 5),
    (7.0, 6),
    (9.0, 7),
    (10.0, 8),
]
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
    assert rates["A"] == pytest.approx(
        (6.375 - 2.25) / 4.5, rel=1e-12
    )  # A at 7.75 s: 6 + 0.75 / 2 steps
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


def test_the_time_left_is_unknown_without_edges_jobs_or_counts() -> None:
    assert math.isnan(
        Overlap(NAN, NAN, {"A": 10.0, "B": 10.0}, {"A": 2.0, "B": 2.0}).left_s()
    )  # no edges yet
    assert math.isnan(Overlap(0.0, 10.0, {}, {}).left_s())  # no job in it
    assert math.isnan(
        Overlap(0.0, 10.0, {"A": 60.0}, {"A": 6.0, "B": 6.0}).left_s()
    )  # B's count is not known


def test_a_job_under_one_step_per_second_still_gets_its_time_left() -> None:
    """10 s long, 5 steps of each job: 45 more at 0.5 it/s take 90 s."""
    assert Overlap(0.0, 10.0, {"A": 5.0, "B": 5.0}, {"A": 0.5, "B": 0.5}).left_s() == 90.0


def test_the_line_names_every_job_it_waits_for() -> None:
    said = interference({"A": 10.0, "B": 10.0}, OverlapRates().window(["A", "B"]))
    assert said.text == "measuring… (waiting for A and B to pass their warm-up)"


def test_a_window_not_open_yet_is_unknown_and_says_whom_it_waits_for() -> None:
    rates = OverlapRates()
    rates.add("A", Point(1.0, 0), False)
    for window, waiting in ((rates.window(["A", "B"]), ("B",)), (rates.window(["A"]), ())):
        assert math.isnan(window.start) and math.isnan(window.end) and math.isnan(window.duration)
        assert list(window.steps) == list(window.rates) == list(waiting and "AB" or "A")
        assert all(math.isnan(v) for v in (*window.steps.values(), *window.rates.values()))
        assert window.closed is False and window.waiting == waiting


def test_a_window_is_closed_from_when_a_job_left_until_a_new_one_came() -> None:
    rates = _fed()
    assert rates.window(["A", "B"]).closed is False
    rates.close("B")
    assert rates.window(["A", "B"]).closed is True
    rates.forget("B")
    assert rates.window(["A", "B"]).closed is False and rates.window(["A", "B"]).waiting == ("B",)


def test_the_window_counts_each_jobs_steps_between_its_edges() -> None:
    window = _fed().window(["A", "B"])
    assert (window.start, window.end, window.duration) == (3.25, 7.75, 4.5)
    assert window.steps == {
        "A": 6.375 - 2.25,
        "B": 9.0,
    }  # A: 2.25 steps at 3.25 s, 6.375 at 7.75 s; B: 0 to 9


def test_a_window_without_time_in_it_counts_no_steps() -> None:
    """A's batch (to 4 s) came before B's first step at 3 s: the window opens at 3 s and ends there, for now."""
    rates = OverlapRates()
    for t, n in ((1.0, 0), (2.0, 1), (4.0, 2)):
        rates.add("A", Point(t, n), False)
    rates.add("B", Point(3.0, 0), False)
    window = rates.window(["A", "B"])
    assert (window.start, window.end, window.duration) == (3.0, 3.0, 0.0)
    assert all(math.isnan(v) for v in (*window.steps.values(), *window.rates.values()))
    rates.add("B", Point(5.0, 4), False)
    window = rates.window(["A", "B"])  # 3 → 4 s: A from 1.5 steps to 2, B from 0 to 2
    assert window.steps == {"A": 0.5, "B": 2.0} and window.rates == {"A": 0.5, "B": 2.0}


def test_the_window_ends_where_the_job_that_left_took_its_last_step() -> None:
    """A steps at 1 it/s, B at 2 it/s from 1 s; B leaves after its step at 5 s while A's steps have come to 4 s.
    The window is 1 → 5 s: B's 8 steps in it, A's so far to its latest step. A's next two steps end 0.5 ms apart, the
    second exactly at 5 s: that is A's count at the end, though a step 0.5 ms after the one before moves on with
    the next (RESOLUTION_S) and A steps on."""
    rates = OverlapRates()
    for k in range(5):
        rates.add("A", Point(float(k), k), False)
        rates.add("B", Point(1.0 + k, 2 * k), False)
    rates.close("B")
    window = rates.window(["A", "B"])
    assert (window.start, window.end, window.closed) == (1.0, 5.0, True)
    assert window.steps == {"A": 3.0, "B": 8.0} and window.rates == {"A": 1.0, "B": 2.0}
    for t, n in ((4.9995, 5), (5.0, 6), (6.0, 7), (7.0, 8)):
        rates.add("A", Point(t, n), False)
    window = rates.window(["A", "B"])
    assert window.end == 5.0 and window.steps == {"A": 6.0 - 1.0, "B": 8.0}


def test_the_window_of_two_of_three_jobs_starts_at_their_own_later_first_step() -> None:
    """A at 1 it/s from 0 s, B at 2 it/s from 1 s, C from 3 s: A and B overlap from 1 s to B's latest step, 5 s."""
    rates = OverlapRates()
    events = [(float(t), "A", t) for t in range(0, 7, 2)] + [
        (1.0 + t, "B", 2 * t) for t in range(0, 5, 2)
    ]
    events += [(3.0, "C", 0), (5.0, "C", 1)]
    for t, slot, n in sorted(events):
        rates.add(slot, Point(t, n), False)
    window = rates.window(["A", "B"])
    assert (window.start, window.end) == (1.0, 5.0)
    assert window.steps == {"A": 4.0, "B": 8.0} and window.rates == {"A": 1.0, "B": 2.0}


def test_an_edge_more_than_keep_s_late_is_extrapolated_along_the_kept_steps() -> None:
    """A steps alone at 8 it/s for 40 s and keeps its last KEEP_S seconds; then B's first steps come, from 20 s (a
    batch 20 s late): A's count at 20 s and 24 s lies on its steady line, 160 and 192."""
    rates = OverlapRates()
    for k in range(321):
        rates.add("A", Point(k / 8, k), False)
    assert rates._curves["A"].points[0].t > 20.0  # trimmed: 20 s is before A's oldest kept step
    for k in range(5):
        rates.add("B", Point(20.0 + k, k), False)
    window = rates.window(["A", "B"])
    assert (window.start, window.end) == (20.0, 24.0)
    assert window.steps == {"A": 192.0 - 160.0, "B": 4.0} and window.rates == {"A": 8.0, "B": 1.0}


def test_the_count_at_the_start_is_taken_before_a_later_step_moves_the_last_point() -> None:
    """Steps less than RESOLUTION_S (1 ms) apart move the last kept point on: a job's count at the window's start is
    interpolated between its steps around the start before that, as compare interpolates them."""
    # B's first step at 1.0002 s comes after A's steps at 1.0 s (10) and 1.0005 s (11): A counts 10.4 at the start.
    rates = OverlapRates()
    for t, n in ((0.0, 0), (1.0, 10), (1.0005, 11)):
        rates.add("A", Point(t, n), False)
    rates.add("B", Point(1.0002, 0), False)
    for slot, t, n in (("A", 1.0008, 12), ("A", 2.0002, 20), ("B", 2.0002, 10)):
        rates.add(slot, Point(t, n), False)
    assert rates.window(["A", "B"]).steps == {"A": pytest.approx(20 - 10.4, abs=1e-9), "B": 10.0}
    # B's first step at 1.0005 s comes between A's at 1.0 s (10) and 1.0005 s (11): A counts 11 at the start.
    rates = OverlapRates()
    for slot, t, n in (
        ("A", 0.0, 0),
        ("A", 1.0, 10),
        ("B", 1.0005, 0),
        ("A", 1.0005, 11),
        ("A", 1.0009, 12),
        ("A", 2.0005, 21),
        ("B", 2.0005, 10),
    ):
        rates.add(slot, Point(t, n), False)
    assert rates.window(["A", "B"]).steps == {"A": pytest.approx(21 - 11, abs=1e-9), "B": 10.0}


def test_a_long_overlap_keeps_each_jobs_last_keep_s_seconds() -> None:
    """Both jobs step every 0.1 s for 60 s: each keeps at most the points of KEEP_S seconds, plus one trim's worth."""
    rates = OverlapRates()
    for k in range(600):
        rates.add("A", Point(0.1 * k, k), False)
        rates.add("B", Point(0.1 * k + 0.05, k), False)
    assert all(
        len(curve.points) <= KEEP_S / 0.1 + TRIM_EVERY + 1 for curve in rates._curves.values()
    )
    assert rates.rates(["A", "B"]) == {"A": pytest.approx(10.0), "B": pytest.approx(10.0)}


def test_a_jobs_points_are_trimmed_every_trim_every_steps() -> None:
    """Steps 1 s apart: the curve holds every step until the TRIM_EVERY-th after its first, then its last KEEP_S
    seconds (the step at 54 s to the one at 64 s: 11 points)."""
    rates = OverlapRates()
    for k in range(TRIM_EVERY + 1):
        rates.add("A", Point(float(k), k), False)
        expected = k + 1 if k < TRIM_EVERY else KEEP_S + 1
        assert len(rates._curves["A"].points) == expected, k
    assert rates._curves["A"].points[0] == Point(TRIM_EVERY - KEEP_S, TRIM_EVERY - KEEP_S)


def test_a_curve_keeps_its_steps_a_resolution_apart_and_its_last_step_exact() -> None:
    curve = _Curve(Point(0.0, 0))
    curve.add(Point(0.0005, 1))
    curve.add(Point(0.002, 2))  # 0.5 ms after the one before: the last point moves on
    assert list(curve.points) == [Point(0.0, 0), Point(0.002, 2)]
    curve = _Curve(Point(0.0, 0))
    curve.add(Point(0.001, 1))
    curve.add(Point(0.0015, 2))  # 1 ms after the one before: it stays
    assert list(curve.points) == [Point(0.0, 0), Point(0.001, 1), Point(0.0015, 2)]
    curve.add(Point(0.0015, 3))  # a step that ended with the last one counts
    curve.add(Point(0.0012, 9))  # an older one was seen already
    assert list(curve.points) == [Point(0.0, 0), Point(0.001, 1), Point(0.0015, 3)]


def test_a_curves_count_between_and_beyond_its_kept_points() -> None:
    """Steps at 2 s (10), 3 s (14), 6 s (18): 4 it/s, then 4/3 it/s; 2 it/s from the first to the last."""
    curve = _Curve(Point(2.0, 10))
    curve.add(Point(3.0, 14))
    curve.add(Point(6.0, 18))
    assert (
        curve.at(6.5) is None
        and curve.at(6.0) == 18.0
        and curve.at(3.0) == 14.0
        and curve.at(2.0) == 10.0
    )
    assert curve.at(2.5) == 12.0 and curve.at(4.5) == 16.0
    assert (
        curve.at(1.0) == 8.0 and curve.at(0.0) == 6.0
    )  # before the oldest kept point: along 2 it/s
    alone = _Curve(Point(5.0, 3))
    assert alone.at(4.0) == 3.0 and alone.at(5.0) == 3.0 and alone.at(5.5) is None
    twice = _Curve(Point(1.0, 0))
    twice.add(Point(1.0, 1))  # two steps ended at 1 s: the count there is the later one's
    assert twice.at(1.0) == 1.0 and twice.at(0.5) == 0.0


def test_a_curve_forgets_the_points_before_the_last_one_at_or_before_a_time() -> None:
    curve = _Curve(Point(0.0, 0))
    for k in range(1, 4):
        curve.add(Point(float(k), k))
    curve.drop_before(1.0)
    assert list(curve.points) == [Point(1.0, 1), Point(2.0, 2), Point(3.0, 3)]
    curve.drop_before(10.0)
    assert list(curve.points) == [Point(3.0, 3)]
    curve = _Curve(Point(0.0, 0))
    for k in range(1, MAX_KEPT + 2):
        curve.add(Point(float(k), k))
    curve.drop_before(-1.0)  # nothing is old enough: only the bound drops the oldest
    assert len(curve.points) == MAX_KEPT and curve.points[0] == Point(2.0, 2)
