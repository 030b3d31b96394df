"""The live computation of a bus: per-job figures over a sliding window of steps, which jobs run, and each
running job's rate over the overlap so far (the live slowdown's shared rate).

There is one per bus: the session's (``Session.live``: what the TUI, the headless status lines and the Prometheus
collector show), a replayed or followed run's (its ``LiveModel``'s), the probe scanner's. Each reader asks
``now(t)``; every answer is published on the bus as a ``LiveNow`` record. Rates follow
``gpumon.core.records.rates``: wall-clock slopes, never steps over busy time.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from gpumon.core.records.bus import Bus
from gpumon.core.records.enums import JobState
from gpumon.core.records.model import (
    ENDED_STATES,
    ProcessSample,
    StepBatch,
    StepEvent,
    WorkloadState,
)
from gpumon.core.records.rates import (
    LIVE_WINDOW_S,
    MIN_EXCLUSIVE_S,
    MIN_EXCLUSIVE_STEPS,
    MIN_LIVE_STEPS,
    Overlap,
    OverlapRates,
    Point,
    exclusive_rate,
    live_rate,
)

WINDOW_S = LIVE_WINDOW_S
# Steps are taken in when figures are asked for (a status line, a refresh: once a second), in one pass, or by the
# publisher itself once this many wait (nobody asks): a step costs the publisher an append, not a lock and a window.
ABSORB_AT = 4096
ENDED = ENDED_STATES
RUNNING_STATES = (
    "starting",
    "running",
)  # a job runs from its start until it ends (exited, stopped, detached...)


@dataclass(frozen=True)
class LiveFigures:
    """What a workload is doing now; NaN where nothing was measured."""

    slot: str
    steps: int
    iter_per_s: float
    samples_per_s: float
    copy_bandwidth: float
    copy_bytes_per_s: float
    cpu_pct: float
    rss_mib: float
    gpu_mem_mib: float
    gpu_sm_util: float
    warmup: bool


@dataclass(frozen=True)
class LiveNow:
    """What the jobs on a bus are doing at run time ``t``, as its one live computation sees it (published on it)."""

    t: float
    figures: dict[str, LiveFigures]  # every job seen so far, by slot
    running: tuple[
        str, ...
    ]  # the jobs that run now, by slot: the one answer to "which jobs are running"
    # the overlap so far of every job that stepped or runs, once there are two (the ones that still run for the live
    # line, all of them for the overlap's final figures when one leaves); None without overlap rates
    overlap: Overlap | None
    # each job's rate alone so far: its post-warm-up steps while no other job ran (NaN: too few yet, or none)
    exclusive: dict[str, float]

    @property
    def shared(self) -> dict[str, float]:
        """Each job's rate over the overlap so far (empty without one)."""
        return self.overlap.rates if self.overlap is not None else {}


def _point(step: StepEvent) -> Point:
    return Point(step.t, step.step)


@dataclass
class _Solo:
    """A job's exclusive phase: its first and last post-warm-up steps while no other job ran; ``over`` once another
    started after it had begun (what follows is sharing, never its rate alone again)."""

    first: Point | None = None
    last: Point | None = None
    over: bool = False

    def end(self, other_start: float, step: Point) -> None:
        """The phase ends at the other job's start, its step count interpolated there between its last step alone
        and ``step``, its first beside the other (``gpumon compare``'s window edge)."""
        last = self.last
        self.over = True
        if last is None or other_start <= last.t:  # else last.t < other_start <= step.t
            return
        self.last = Point(
            other_start, last.n + (step.n - last.n) * (other_start - last.t) / (step.t - last.t)
        )

    def rate(self) -> float:
        first, last = self.first, self.last
        if (
            first is None
            or last is None
            or last.n - first.n < MIN_EXCLUSIVE_STEPS
            or last.t - first.t < MIN_EXCLUSIVE_S
        ):
            return math.nan
        return exclusive_rate((first.t, last.t), (first.n, last.n))


class LiveStats:
    """Keeps the last ``window_s`` of steps per workload (and the step before them) and each job's state; safe to
    feed from the bus thread.

    Steps wait in a queue until figures or shared rates are asked for (``ABSORB_AT``), then are taken in, in order.
    A job's history starts again when a new job starts in its slot ("starting").
    """

    TAKES = (StepBatch, ProcessSample, WorkloadState)  # what ``handle`` reads (Bus.subscribe)

    def __init__(
        self, window_s: float = WINDOW_S, shared: bool = True, bus: Bus | None = None
    ) -> None:
        """``shared``: keep each job's rate over the overlap (``overlap``); a front end that never asks for it
        (a runner without ``--baseline``) spares that work at every step. ``bus``: the bus it is the live computation
        of (it subscribes, and publishes every ``now``); None: fed through ``handle``, publishes nothing."""
        self.window_s = window_s
        self.bus = bus
        self._states: dict[str, str] = {}  # each job's last state
        self._steps: dict[str, deque[StepEvent]] = {}
        self._before: dict[str, deque[StepEvent]] = {}  # a job's last steps before the window
        self._counts: dict[str, int] = {}
        self._last_sample: dict[str, ProcessSample] = {}
        self._solo: dict[str, _Solo] = {}
        self._ran: dict[
            str, tuple[float, float]
        ] = {}  # each job's start and end (inf: still running), run time
        self._overlap = OverlapRates() if shared else None
        self._pending: deque[StepEvent] = (
            deque()
        )  # appended by the publisher, taken in under the lock
        self._lock = threading.Lock()
        if bus is not None:
            bus.subscribe(self.handle, *self.TAKES)

    def handle(self, item: object) -> None:
        if isinstance(item, StepBatch):
            self._pending.extend(item.steps)
            if len(self._pending) >= ABSORB_AT:
                with self._lock:
                    self._absorb()
        elif isinstance(item, ProcessSample):
            self._last_sample[item.slot] = item
        elif isinstance(item, WorkloadState):
            if item.state == JobState.STARTING:
                self.reset(item.slot)
            with self._lock:
                self._states[item.slot] = item.state
                if item.state in RUNNING_STATES and item.slot not in self._ran:
                    self._ran[item.slot] = (item.t, math.inf)
                elif item.state in ENDED and item.slot in self._ran:
                    self._ran[item.slot] = (self._ran[item.slot][0], item.t)
                if item.state in ENDED and self._overlap is not None:
                    self._absorb()  # the job's last steps belong to the overlap it leaves
                    self._overlap.close(item.slot)

    def _absorb(self) -> None:
        """Take in the waiting steps, in order (the lock held)."""
        pending, steps, counts, overlap = self._pending, self._steps, self._counts, self._overlap
        for _ in range(len(pending)):
            item = pending.popleft()
            slot = item.slot
            window = steps.get(slot)
            if window is None:
                window = steps[slot] = deque()
            window.append(item)
            counts[slot] = item.step + 1
            if not item.warmup:
                point = Point(item.t, item.step)
                if overlap is not None:
                    overlap.add(slot, point, False)
                self._file_solo(slot, point)

    def _file_solo(self, slot: str, point: Point) -> None:
        """A post-warm-up step of ``slot`` ending at ``point`` in its job's exclusive phase if no other job ran at its
        time (from the other's start to its end, as ``gpumon compare`` cuts a phase: a step that reaches the bus after
        the other job's start is still judged by when it was taken)."""
        solo = self._solo.get(slot)
        if solo is None:
            solo = self._solo[slot] = _Solo()
        elif solo.over:
            return
        t = point.t
        others = [
            start for other, (start, end) in self._ran.items() if other != slot and start <= t < end
        ]
        if others:
            if solo.first is not None:
                solo.end(min(others), point)
            return
        if solo.first is None:
            solo.first = point
        solo.last = point

    def running(self) -> tuple[str, ...]:
        """The jobs that run now, by slot: started (a "starting" or "running" state) and not ended since."""
        with self._lock:
            return tuple(
                sorted(slot for slot, state in self._states.items() if state in RUNNING_STATES)
            )

    def now(self, t: float) -> LiveNow:
        """Every job's figures at run time ``t``, which run, and (two jobs, ``shared``) their overlap so far;
        published on the bus this computation belongs to."""
        with self._lock:
            self._absorb()
            seen = sorted(set(self._steps) | set(self._last_sample) | set(self._states))
        running = self.running()
        figures = {slot: self.figures(slot, t) for slot in seen}
        jobs = sorted({slot for slot in seen if figures[slot].steps} | set(running))
        overlap = self.overlap(jobs) if self._overlap is not None and len(jobs) > 1 else None
        with self._lock:
            exclusive = {slot: solo.rate() for slot, solo in self._solo.items()}
        live = LiveNow(t, figures, running, overlap, exclusive)
        if self.bus is not None:
            self.bus.publish(live)
        return live

    def reset(self, slot: str) -> None:
        """Forget a slot's history (a new workload was launched in it)."""
        with self._lock:
            self._absorb()
            self._steps.pop(slot, None)
            self._before.pop(slot, None)
            self._counts.pop(slot, None)
            self._last_sample.pop(slot, None)
            self._solo.pop(slot, None)
            self._ran.pop(slot, None)
            if self._overlap is not None:
                self._overlap.forget(slot)

    def overlap(self, slots: Iterable[str]) -> Overlap:
        """The overlap window of ``slots`` so far, with each job's steps and rate in it
        (``gpumon.core.records.rates.OverlapRates``)."""
        if self._overlap is None:
            raise RuntimeError("this LiveStats keeps no shared rates (shared=False)")
        with self._lock:
            self._absorb()
            return self._overlap.window(slots)

    def figures(self, slot: str, now: float) -> LiveFigures:
        with self._lock:
            self._absorb()
            window = self._steps.setdefault(slot, deque())
            before = self._before.setdefault(slot, deque(maxlen=MIN_LIVE_STEPS + 1))
            while window and window[0].t < now - self.window_s:
                before.append(window.popleft())
            steps = list(window)
            earlier = list(before)
            count = self._counts.get(slot, 0)
        # live_rate reads no further back in the window than its last MIN_LIVE_STEPS + 1 steps (its anchor): the
        # window's other steps are not made points (a few hundred a second per job, every second)
        tail = steps[-(MIN_LIVE_STEPS + 1) :]
        rate = live_rate([_point(s) for s in earlier], [_point(s) for s in tail], now)
        anchor = earlier[-1] if earlier else None
        counted = steps if anchor is not None else steps[1:]
        span = steps[-1].t - (anchor if anchor is not None else steps[0]).t if steps else 0.0
        samples = [s.samples for s in counted if not math.isnan(s.samples)]
        copy_bytes = sum(s.copy_bytes for s in counted)
        copy_s = sum(s.copy_s for s in counted if not math.isnan(s.copy_s))
        sample = self._last_sample.get(slot)
        last = steps[-1] if steps else (earlier[-1] if earlier else None)
        return LiveFigures(
            slot=slot,
            steps=count,
            iter_per_s=rate,
            samples_per_s=sum(samples) / span if span > 0 and samples else math.nan,
            copy_bandwidth=copy_bytes / copy_s if copy_s > 0 else math.nan,
            copy_bytes_per_s=copy_bytes / span if span > 0 and copy_s > 0 else math.nan,
            cpu_pct=sample.cpu_pct if sample else math.nan,
            rss_mib=sample.rss_mib if sample else math.nan,
            gpu_mem_mib=sample.gpu_mem_mib if sample else math.nan,
            gpu_sm_util=sample.gpu_sm_util if sample else math.nan,
            warmup=last is not None
            and last.warmup,  # the job's last step, in the window or before it
        )
