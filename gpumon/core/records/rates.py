"""The one definition of iteration rates, slowdown r, STP and the verdict (no torch, no pandas, no numpy).

Iterations per second is always wall-clock: the steps a job completed between two
points of its cumulative-steps curve (step number against the time the step
ended) divided by the time between them, ``slope``. Busy time (the sum of step
durations) is never a denominator. The three rates differ only in the points:

* exclusive rate x: a job alone, from its first to its last post-warm-up step;
* shared rate s: inside the overlap window, from the later of the two jobs'
  first post-warm-up steps to the earlier of their last steps (``overlap_window``);
  the live line uses the overlap so far, anchored on each job's last step at or
  before the window's start (``OverlapRates``);
* live rate: the last ``window_s`` seconds of steps, anchored on the last step
  before the window (``live_rate``).

Slowdown r = x / s, STP = sum of 1 / r, and the verdict has one vocabulary:
``pays`` (STP above 1), ``loses`` (below 1), ``cannot tell``. The analysis layer
(``gpumon.analysis``) vectorises these over numpy arrays for its intervals and
calls these functions for every point value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

NAN = math.nan
PAYS, LOSES, CANNOT_TELL = "pays", "loses", "cannot tell"
VERDICTS = (PAYS, LOSES, CANNOT_TELL)
ROUNDING = 1e-9
LIVE_DIGITS = 2
LIVE_WINDOW_S = 2.0  # the live rate's window (panels, status lines, the process table)

# The one vocabulary: what each figure is, in the words the monitor's help (?), ``gpumon compare --help`` and
# docs/numbers.md say (the first two are made from this; tests/core/test_vocabulary.py reads all three).
DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("iter/s", "training steps per second, wall-clock: the steps completed ÷ the time between their end stamps "
     "(never ÷ the time inside the steps), exact from each step's monotonic end stamp; live, over the last "
     f"{LIVE_WINDOW_S:g} s"),
    ("exclusive rate x", "a job's steady-state iter/s alone, from its first to its last step after warm-up: in a run "
     "of its own (--baseline A=RUN, --exclusive RUN) or while the other slot was empty (the exclusive phase of a "
     "staggered start)"),
    ("overlap window", "from the later of the two jobs' first steps after warm-up to the earlier of their last steps: "
     "a fixed duration, not a fixed number of steps, so a job running its tail alone does not count"),
    ("shared rate s", "a job's iter/s inside the overlap window (live: the window so far), its step count "
     "interpolated at the window's edges"),
    ("slowdown r", "x / s: 1 = unaffected, 2 = half speed while sharing"),
    ("STP", "1/r_A + 1/r_B, the pair's combined throughput in units of one job alone: sharing pays when STP > 1; "
     "below 1 the jobs would finish sooner one after the other"),
    ("verdict", "'sharing pays' when the whole 95 % interval of STP is above 1, 'sharing loses' when it is below 1, "
     "else 'cannot tell'; the live line, which has no interval, judges STP rounded to two digits"),
)


@dataclass(frozen=True)
class Point:
    """A point of a job's cumulative-steps curve: step number ``n`` ended at run time ``t``."""

    t: float
    n: float


def slope(first: Point, last: Point) -> float:
    """Iterations/s between two points of a cumulative-steps curve: (n1 - n0) / (t1 - t0); NaN if t1 <= t0."""
    dt = last.t - first.t
    return (last.n - first.n) / dt if dt > 0 else NAN


def exclusive_rate(t: Sequence[float], n: Sequence[float]) -> float:
    """A job's steady-state rate alone: the slope from its first to its last post-warm-up step (sorted by time)."""
    if len(t) < 2:
        return NAN
    return slope(Point(float(t[0]), float(n[0])), Point(float(t[-1]), float(n[-1])))


def overlap_window(firsts: Sequence[float], lasts: Sequence[float]) -> tuple[float, float] | None:
    """From the latest first post-warm-up step to the earliest last step; None if the jobs never ran together."""
    start, end = max(firsts), min(lasts)
    return (start, end) if end > start else None


def live_rate(anchor: Point | None, steps: Sequence[Point], ever: bool) -> float:
    """Iterations/s over a window's steps, from ``anchor`` (the last step before it, else its first) to its last.

    ``ever``: the job has stepped before; a window without steps then reads 0, else NaN.
    """
    if not steps:
        return 0.0 if ever else NAN
    first = anchor if anchor is not None else steps[0]
    return slope(first, steps[-1])


def slowdown(exclusive: float, shared: float) -> float:
    """r = x / s: 1 = unaffected, 2 = half speed while sharing; NaN unless both rates are positive and finite."""
    if exclusive > 0 and shared > 0 and math.isfinite(exclusive) and math.isfinite(shared):
        return exclusive / shared
    return NAN


def stp(slowdowns: Iterable[float]) -> float:
    """System throughput: the sum of 1 / r, the pair's combined throughput in units of one job alone."""
    return sum(1 / r for r in slowdowns)


def verdict(low: float, high: float) -> str:
    """``pays`` when the whole STP interval is above 1, ``loses`` when below (beyond rounding), else ``cannot tell``.

    NaN bounds (no interval) give ``cannot tell``; the live line, which has a
    point and no interval, passes its STP rounded to the shown digits as both.
    """
    if low > 1 + ROUNDING:
        return PAYS
    if high < 1 - ROUNDING:
        return LOSES
    return CANNOT_TELL


@dataclass(frozen=True)
class Interference:
    """What sharing costs now: shared rate s and r per job (NaN without an exclusive rate), STP, verdict word, a line."""

    shared: dict[str, float]
    slowdown: dict[str, float]
    stp: float
    verdict: str
    text: str


def interference(exclusive: Mapping[str, float], shared: Mapping[str, float]) -> Interference:
    """Slowdowns of every job in ``shared``; STP and the (point) verdict when every job has both rates."""
    ratios = {slot: slowdown(exclusive.get(slot, NAN), rate) for slot, rate in sorted(shared.items())}
    known = [r for r in ratios.values() if not math.isnan(r)]
    if len(ratios) < 2 or len(known) < len(ratios):
        missing = [slot for slot, r in ratios.items() if math.isnan(r) and math.isnan(exclusive.get(slot, NAN))]
        text = f"STP needs the exclusive rate of {' and '.join(missing)}" if missing and len(ratios) > 1 else ""
        return Interference(dict(sorted(shared.items())), ratios, NAN, "", text)
    value = stp(known)
    shown = round(value, LIVE_DIGITS)
    word = verdict(shown, shown)
    text = f"sharing {word}: STP {value:.2f}" if word != CANNOT_TELL else f"{word}: STP {value:.2f}"
    return Interference(dict(sorted(shared.items())), ratios, value, word, text)


def _between(before: Point, after: Point | None, t: float) -> Point:
    """The curve's point at ``t``, linearly interpolated between the steps around it (``before`` if none after)."""
    if after is None or after.t <= before.t:
        return Point(t, before.n)
    return Point(t, before.n + (after.n - before.n) * (t - before.t) / (after.t - before.t))


class OverlapRates:
    """The live shared rate of each job: ``slope`` over the overlap window so far, as compare reads it (O(1) state).

    Feed every step in time order. The window starts at the later of the jobs'
    first post-warm-up steps and ends at the earlier of their latest steps (or
    where the first job to leave took its last step); each job's step count at
    both edges is interpolated between its steps around them, as compare does.
    """

    def __init__(self) -> None:
        self._first: dict[str, Point] = {}
        self._last: dict[str, Point] = {}
        self._start: dict[str, tuple[Point, Point | None]] = {}
        self._end: dict[str, tuple[Point, Point | None]] = {}
        self._closed = False

    def add(self, slot: str, point: Point, warmup: bool) -> None:
        if self._closed:
            return
        if not warmup and slot not in self._first:
            self._first[slot] = point
            for other in self._first:
                self._start[other] = (point, point) if other == slot else (self._last[other], None)
        elif slot in self._start and self._start[slot][1] is None:
            self._start[slot] = (self._start[slot][0], point)
        if slot in self._end and self._end[slot][1] is None:
            self._end[slot] = (self._end[slot][0], point)
        self._last[slot] = point
        for other in self._last:
            if other != slot:
                self._end[other] = (self._last[other], None)

    def close(self, slot: str) -> None:
        """A job of the overlap left: the window ends at the last step it took; the rates stay as they were."""
        self._closed = self._closed or slot in self._first and len(self._first) > 1

    def forget(self, slot: str) -> None:
        """A job left its slot for a new one: the overlap starts again when every job is past its warm-up."""
        for table in (self._first, self._last, self._start, self._end):
            table.pop(slot, None)
        self._start.clear()
        self._closed = False

    def rates(self, slots: Iterable[str]) -> dict[str, float]:
        """Shared rates of ``slots`` (NaN until every one is past its warm-up)."""
        wanted = list(slots)
        if not wanted or not all(p in self._first and p in self._start for p in wanted):
            return {p: NAN for p in wanted}
        window = overlap_window([self._first[p].t for p in wanted], [self._last[p].t for p in wanted])
        if window is None:
            return {p: NAN for p in wanted}
        start, end = window
        out = {}
        for p in wanted:
            first = _between(*self._start[p], start)
            last = self._last[p] if self._last[p].t <= end else _between(*self._end.get(p, (self._last[p], None)), end)
            out[p] = slope(first, last)
        return out
