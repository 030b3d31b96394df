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
  before the window, and never fewer than the job's last ``MIN_LIVE_STEPS`` steps (``live_rate``).

Slowdown r = x / s, STP = sum of 1 / r, and the verdict has one vocabulary:
``pays`` (STP above 1), ``loses`` (below 1), ``cannot tell``. The analysis layer
(``gpumon.analysis``) vectorises these over numpy arrays for its intervals and
calls these functions for every point value.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from operator import attrgetter
from typing import Iterable, Mapping, NamedTuple, Sequence

NAN = math.nan
PAYS, LOSES, CANNOT_TELL = "pays", "loses", "cannot tell"
VERDICTS = (PAYS, LOSES, CANNOT_TELL)
# A job's slowdown r in words, the same in the live line and compare (docs/numbers.md says why these thresholds):
FASTER, BARELY, SLOWER = "runs faster beside", "barely notices", "runs slower"
FASTER_BELOW = 0.95  # r below this: it runs faster beside the other job
BARELY_BELOW = 1.05  # r from FASTER_BELOW to below this: it barely notices the other job; from it on, it runs slower
ROUNDING = 1e-9
LIVE_DIGITS = 2
LIVE_WINDOW_S = 2.0  # the live rate's window (panels, status lines, the process table)
MIN_LIVE_STEPS = 3  # ... which always spans a job's last this many steps, however long they took
# The live line's overlap: each job's steps of the last KEEP_S seconds stay for an edge that comes late (the other
# job's batch), kept at least RESOLUTION_S apart (interpolating across a millisecond of steps), MAX_KEPT at most.
KEEP_S = 10.0
RESOLUTION_S = 0.001
MAX_KEPT = 20_000
TRIM_EVERY = 64  # a job's kept points are trimmed every this many of its steps
# The live line's verdict waits for a window that can hold one (docs/numbers.md says why these):
MIN_OVERLAP_S = 5.0
# A job's exclusive phase (its steps alone, before the other job's start) is a rate once it holds this many
# post-warm-up step intervals over this long (the live line's; --beside waits for them before it starts A)
MIN_EXCLUSIVE_STEPS = 10
MIN_EXCLUSIVE_S = 1.0
MIN_OVERLAP_STEPS = 50

# The one vocabulary: what each figure is, in the words the monitor's help (?), ``gpumon compare --help`` and
# docs/numbers.md say (the first two are made from this; tests/core/test_vocabulary.py reads all three).
DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "iter/s",
        "training steps per second, wall-clock: the steps completed ÷ the time between their end stamps "
        "(never ÷ the time inside the steps), exact from each step's monotonic end stamp; live, over the last "
        f"{LIVE_WINDOW_S:g} s and at least the last {MIN_LIVE_STEPS} steps however long they took",
    ),
    (
        "exclusive rate x",
        "a job's steady-state iter/s alone, from its first to its last step after warm-up: in a run "
        "of its own (--baseline A=RUN, --exclusive RUN) or while the other slot was empty (the exclusive phase of a "
        "staggered start)",
    ),
    (
        "overlap window",
        "from the later of the two jobs' first steps after warm-up to the earlier of their last steps: "
        "a fixed duration, not a fixed number of steps, so a job running its tail alone does not count",
    ),
    (
        "shared rate s",
        "a job's iter/s inside the overlap window (live: the window so far), its step count "
        "interpolated at the window's edges",
    ),
    ("slowdown r", "x / s: 1 = unaffected, 2 = half speed while sharing"),
    (
        "STP",
        "1/r_A + 1/r_B, the pair's combined throughput in units of one job alone: sharing pays when STP > 1; "
        "below 1 the jobs would finish sooner one after the other",
    ),
    (
        "verdict",
        "'sharing pays' when the whole 95 % interval of STP is above 1, 'sharing loses' when it is below 1, "
        "else 'cannot tell'; the live line, which has no interval, judges STP rounded to two digits, and only once its "
        f"overlap window holds {MIN_OVERLAP_S:g} s and {MIN_OVERLAP_STEPS} steps of each job: before, it says "
        "'measuring… (N s left)' and gives no r",
    ),
    (
        "barely notices",
        f"a job's r from {FASTER_BELOW:g} to below {BARELY_BELOW:g}: within "
        f"{round(100 * (BARELY_BELOW - 1)):g} % of its speed alone; below {FASTER_BELOW:g} it 'runs faster beside' the "
        f"other job, from {BARELY_BELOW:g} it 'runs r× slower' (the live line and compare say the same)",
    ),
)


class Point(NamedTuple):
    """A point of a job's cumulative-steps curve: step number ``n`` ended at run time ``t``.

    A named tuple, not a frozen dataclass: the live window makes one per step (0.36 against 0.98 µs, 2-core VM)."""

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


def live_rate(before: Sequence[Point], window: Sequence[Point], now: float) -> float:
    """Iterations/s at run time ``now`` from a job's steps in the live window and the few before it (``before``).

    From the last step before the window to the window's last step; a window holding fewer than ``MIN_LIVE_STEPS``
    steps reaches back to span the job's last ``MIN_LIVE_STEPS`` steps, however long they took (a job stepping every
    6 s reads one step per 6 s, not 0). Once the next step is overdue (no step in the window, and longer since the
    last than those steps took each), the slope runs to ``now``: a job that stopped stepping decays towards 0.
    NaN before the job's first step, or with one step in the window and none before.
    """
    points = [*before, *window]
    if not points:
        return NAN
    if before and len(window) >= MIN_LIVE_STEPS:
        anchor = before[-1]
    else:
        anchor = points[max(0, len(points) - 1 - MIN_LIVE_STEPS)]
    last = points[-1]
    steps = last.n - anchor.n
    if not window and (steps <= 0 or now - last.t > (last.t - anchor.t) / steps):
        last = Point(now, last.n)
    return slope(anchor, last)


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
    """What sharing costs now: shared rate s and r per job (NaN without an exclusive rate), STP, verdict word, a line.

    ``left_s``: while the overlap cannot hold a verdict yet, the seconds until it can (NaN: not known yet); r, STP
    and the verdict wait for it (NaN, "") and the line says so.
    """

    shared: dict[str, float]
    slowdown: dict[str, float]
    stp: float
    verdict: str
    text: str
    left_s: float = 0.0

    @property
    def measuring(self) -> bool:
        return not self.left_s == 0


def effect(r: float) -> str:
    """What slowdown ``r`` is called: ``FASTER``, ``BARELY`` or ``SLOWER`` ("" without one)."""
    if math.isnan(r):
        return ""
    return FASTER if r < FASTER_BELOW else BARELY if r < BARELY_BELOW else SLOWER


def measuring_words(overlap: Overlap, left: float) -> str:
    """What the live line says while its window cannot hold a verdict yet (or, over, never could)."""
    if overlap.waiting:
        who = " and ".join(overlap.waiting)
        if overlap.closed:
            return f"no overlap: {who} never passed the warm-up beside the other job"
        return f"measuring… (waiting for {who} to pass {'its' if len(overlap.waiting) == 1 else 'their'} warm-up)"
    if overlap.closed:
        return (
            f"too short to tell: the jobs overlapped {overlap.duration:.1f} s (a verdict needs {MIN_OVERLAP_S:g} s "
            f"and {MIN_OVERLAP_STEPS} steps of each job)"
        )
    return "measuring…" if math.isnan(left) else f"measuring… ({math.ceil(left)} s left)"


def interference(exclusive: Mapping[str, float], overlap: Overlap) -> Interference:
    """Slowdowns of the overlap's jobs; STP and the (point) verdict when every job has both rates.

    None of them before the window can hold a verdict (``Overlap.left_s``): the text says how long it still
    measures, and which exclusive rate STP will need.
    """
    shared = dict(sorted(overlap.rates.items()))
    missing = [slot for slot in shared if math.isnan(exclusive.get(slot, NAN))]
    needs = (
        f"STP needs the exclusive rate of {' and '.join(missing)}"
        if missing and len(shared) > 1
        else ""
    )
    left = overlap.left_s()
    if left != 0:
        text = "; ".join(part for part in (measuring_words(overlap, left), needs) if part)
        return Interference(shared, {slot: NAN for slot in shared}, NAN, "", text, left)
    ratios = {slot: slowdown(exclusive.get(slot, NAN), rate) for slot, rate in shared.items()}
    known = [r for r in ratios.values() if not math.isnan(r)]
    if len(ratios) < 2 or len(known) < len(ratios):
        return Interference(shared, ratios, NAN, "", needs)
    value = stp(known)
    shown = round(value, LIVE_DIGITS)
    word = verdict(shown, shown)
    text = f"sharing {word}: STP {value:.2f}" if word != CANNOT_TELL else f"{word}: STP {value:.2f}"
    return Interference(shared, ratios, value, word, text)


def _between(before: Point, after: Point | None, t: float) -> Point:
    """The curve's point at ``t``, linearly interpolated between the steps around it (``before`` if none after)."""
    if after is None or after.t <= before.t:
        return Point(t, before.n)
    return Point(t, before.n + (after.n - before.n) * (t - before.t) / (after.t - before.t))


@dataclass(frozen=True)
class Overlap:
    """The overlap window so far (``OverlapRates.window``): its edges, each job's steps and rate in it.

    ``start``/``end`` are NaN while a job has no step after its warm-up (``waiting`` names it); ``closed``: a job of
    it left, so it will grow no more.
    """

    start: float
    end: float
    steps: dict[
        str, float
    ]  # each job's step count at the end minus at the start (both interpolated)
    rates: dict[str, float]  # each job's shared rate s
    closed: bool = False
    waiting: tuple[str, ...] = ()

    @property
    def duration(self) -> float:
        return (
            max(0.0, self.end - self.start)
            if not (math.isnan(self.start) or math.isnan(self.end))
            else NAN
        )

    def left_s(self) -> float:
        """Seconds until the window holds a verdict: ``MIN_OVERLAP_S`` long with ``MIN_OVERLAP_STEPS`` steps of each
        job, at each job's rate so far; 0 once it does; NaN while that cannot be told (a job has not passed its
        warm-up, or has no rate in the window yet)."""
        if self.waiting or not self.rates or math.isnan(self.duration):
            return NAN
        left = MIN_OVERLAP_S - self.duration
        for slot, rate in self.rates.items():
            missing = MIN_OVERLAP_STEPS - self.steps.get(slot, NAN)
            if missing > ROUNDING:
                if not rate > 0:
                    return NAN
                left = max(left, missing / rate)
            elif math.isnan(missing):
                return NAN
        return max(0.0, left)


_time = attrgetter("t")


class _Curve:
    """One job's post-warm-up cumulative-steps curve, as far as the overlap's edges may still need it."""

    __slots__ = ("first", "points", "start", "added")

    def __init__(self, first: Point) -> None:
        self.first = first
        self.points: deque[Point] = deque(
            [first]
        )  # oldest first, RESOLUTION_S apart but for the last (exact)
        self.start: float | None = (
            None  # the step count at the window's start, once the job reached it
        )
        self.added = 0

    @property
    def last(self) -> Point:
        return self.points[-1]

    def add(self, point: Point) -> None:
        points = self.points
        if point.t < points[-1].t:
            return  # a job's own steps come in order: an older one was seen already
        if len(points) >= 2 and points[-1].t - points[-2].t < RESOLUTION_S:
            points[-1] = (
                point  # the last point is still within RESOLUTION_S of the one before: it moves on
            )
        else:
            points.append(point)
        self.added += 1

    def at(self, t: float) -> float | None:
        """The step count at ``t``: from the last kept point at or before it, interpolated toward the next one (of two
        steps that ended at ``t``, the later counts); None before the job reached ``t``.

        Before the oldest kept point (an edge that came more than ``KEEP_S`` late), along the kept points' slope.
        """
        points = self.points
        first, last = points[0], points[-1]
        if t > last.t:
            return None
        if t < first.t:
            return first.n - (first.t - t) * slope(first, last) if last.t > first.t else first.n
        after = bisect_right(
            points, t, key=_time
        )  # the first kept point after t (not the oldest: first.t <= t)
        return _between(points[after - 1], points[after] if after < len(points) else None, t).n

    def drop_before(self, t: float) -> None:
        """Forget the points that no edge at or after ``t`` needs (the last one at or before ``t`` stays), and the
        oldest beyond ``MAX_KEPT``."""
        points = self.points
        while len(points) > 1 and (points[1].t <= t or len(points) > MAX_KEPT):
            points.popleft()


class OverlapRates:
    """The live shared rate of each job: ``slope`` over the overlap window so far, as compare reads it.

    Feed each job's steps in its own time order; the jobs may interleave in any order: each job's steps reach the
    monitor in batches of their own (the probe writes every 0.1 s, headless reads every second), so one job's batch
    can come after the other's later steps. The window starts at the later of the jobs' first post-warm-up steps
    and ends at the earlier of their latest steps (or where the first job to leave took its last step); each job's
    step count at both edges is interpolated between its steps around them, as compare does. Each job keeps the
    points its edges may still need: the last ``KEEP_S`` seconds, and back to the window's end and (until counted)
    its start.
    """

    def __init__(self) -> None:
        self._curves: dict[str, _Curve] = {}
        self._start: float | None = (
            None  # the later of the jobs' first post-warm-up steps, once two have one
        )
        self._end: float | None = (
            None  # where the window ended: the last step of the first job to leave it
        )
        self._left = False  # a job left (the window, if there was one, grows no more)

    def add(self, slot: str, point: Point, warmup: bool) -> None:
        if warmup:
            return  # compare's curves have no warm-up steps
        curve = self._curves.get(slot)
        if curve is None:
            curve = self._curves[slot] = _Curve(point)
            self._restart()
        elif self._end is not None and curve.last.t >= self._end:
            return  # the window is over and this job's curve already reaches its end
        else:
            curve.add(point)
        start = self._start
        if curve.start is None and start is not None and point.t >= start:
            curve.start = curve.at(start)
        if curve.added % TRIM_EVERY == 0:
            self._trim(curve)

    def _restart(self) -> None:
        """The window's start moved (a job joined or left): each job counts it again."""
        firsts = [c.first.t for c in self._curves.values()]
        self._start = max(firsts) if len(firsts) > 1 else None
        for curve in self._curves.values():
            curve.start = curve.at(self._start) if self._start is not None else None

    def _end_of(self, curves: Iterable[_Curve]) -> float:
        """Where the window of ``curves`` ends: where the first job to leave took its last step, else at the earliest
        of their latest steps."""
        return self._end if self._end is not None else min(c.last.t for c in curves)

    def _trim(self, curve: _Curve) -> None:
        """Drop the points of ``curve`` that no edge needs any more: before its last ``KEEP_S`` seconds and before the
        window's end. (A job not yet counted at the window's start has not reached it: its last point, which stays,
        is the one the start will be interpolated from. A job alone ends its own window: its last step.)"""
        curve.drop_before(min(curve.last.t - KEEP_S, self._end_of(self._curves.values())))

    def close(self, slot: str) -> None:
        """A job of the overlap left: the window ends at the last step it took; the rates stay as they were."""
        self._left = True
        curve = self._curves.get(slot)
        if self._end is None and curve is not None and len(self._curves) > 1:
            self._end = curve.last.t

    def forget(self, slot: str) -> None:
        """A job left its slot for a new one: the overlap starts again when every job is past its warm-up."""
        self._curves.pop(slot, None)
        self._end = None
        self._left = False
        self._restart()

    def window(self, slots: Iterable[str]) -> Overlap:
        """The overlap of ``slots`` so far: its edges, each job's steps and rate in it (NaN until every one is past
        its warm-up)."""
        curves = {slot: self._curves.get(slot) for slot in slots}
        unknown = {slot: NAN for slot in curves}
        waiting = tuple(slot for slot, curve in curves.items() if curve is None)
        if len(curves) < 2 or waiting:  # one job alone overlaps nothing
            return Overlap(NAN, NAN, unknown, dict(unknown), self._left, waiting)
        known = {slot: curve for slot, curve in curves.items() if curve is not None}
        start = max(c.first.t for c in known.values())
        end = self._end_of(known.values())
        steps, rates = dict(unknown), dict(unknown)
        for slot, curve in known.items():
            counted = (
                curve.start if curve.start is not None and start == self._start else curve.at(start)
            )
            at_end = curve.at(
                end
            )  # None while the job has not reached the end: it counts to its latest step
            last = curve.last if at_end is None else Point(end, at_end)
            if counted is not None and last.t > start:
                steps[slot], rates[slot] = last.n - counted, slope(Point(start, counted), last)
        return Overlap(start, max(start, end), steps, rates, self._left)

    def rates(self, slots: Iterable[str]) -> dict[str, float]:
        """Shared rates of ``slots`` (NaN until every one is past its warm-up)."""
        return self.window(slots).rates
