"""Live per-workload figures over a sliding window of step events (for status lines and panels).

Rates follow ``gpumon.core.rates``: wall-clock slopes, never steps over busy time.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from gpumon.core.model import ENDED_STATES, ProcessSample, StepEvent, WorkloadState
from gpumon.core.rates import OverlapRates, Point, live_rate

WINDOW_S = 2.0
ENDED = ENDED_STATES


@dataclass(frozen=True)
class LiveFigures:
    """What a workload is doing now; NaN where nothing was measured."""

    process: str
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


def _point(step: StepEvent) -> Point:
    return Point(step.t, step.step)


class LiveStats:
    """Keeps the last ``window_s`` of steps per workload (and the step before them); safe to feed from the bus thread."""

    TAKES = (StepEvent, ProcessSample, WorkloadState)  # what ``handle`` reads (Bus.subscribe)

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._steps: dict[str, deque[StepEvent]] = {}
        self._anchor: dict[str, StepEvent] = {}
        self._counts: dict[str, int] = {}
        self._last_sample: dict[str, ProcessSample] = {}
        self._overlap = OverlapRates()
        self._lock = threading.Lock()

    def handle(self, item: object) -> None:
        if isinstance(item, StepEvent):
            with self._lock:
                self._steps.setdefault(item.process, deque()).append(item)
                self._counts[item.process] = item.step + 1
                self._overlap.add(item.process, _point(item), item.warmup)
        elif isinstance(item, ProcessSample):
            self._last_sample[item.process] = item
        elif isinstance(item, WorkloadState) and item.state in ENDED:
            with self._lock:
                self._overlap.close(item.process)

    def reset(self, process: str) -> None:
        """Forget a slot's history (a new workload was launched in it)."""
        with self._lock:
            self._steps.pop(process, None)
            self._anchor.pop(process, None)
            self._counts.pop(process, None)
            self._last_sample.pop(process, None)
            self._overlap.forget(process)

    def shared_rates(self, processes: Iterable[str]) -> dict[str, float]:
        """Each job's rate over the overlap window so far (``gpumon.core.rates.OverlapRates``)."""
        with self._lock:
            return self._overlap.rates(processes)

    def figures(self, process: str, now: float) -> LiveFigures:
        with self._lock:
            window = self._steps.setdefault(process, deque())
            while window and window[0].t < now - self.window_s:
                self._anchor[process] = window.popleft()
            steps = list(window)
            anchor = self._anchor.get(process)
            count = self._counts.get(process, 0)
        rate = live_rate(_point(anchor) if anchor is not None else None, [_point(s) for s in steps], count > 0)
        counted = steps if anchor is not None else steps[1:]
        span = steps[-1].t - (anchor if anchor is not None else steps[0]).t if steps else 0.0
        samples = [s.samples for s in counted if not math.isnan(s.samples)]
        copy_bytes = sum(s.copy_bytes for s in counted)
        copy_s = sum(s.copy_s for s in counted if not math.isnan(s.copy_s))
        sample = self._last_sample.get(process)
        return LiveFigures(
            process=process,
            steps=count,
            iter_per_s=rate,
            samples_per_s=sum(samples) / span if span > 0 and samples else math.nan,
            copy_bandwidth=copy_bytes / copy_s if copy_s > 0 else math.nan,
            copy_bytes_per_s=copy_bytes / span if span > 0 and copy_s > 0 else math.nan,
            cpu_pct=sample.cpu_pct if sample else math.nan,
            rss_mib=sample.rss_mib if sample else math.nan,
            gpu_mem_mib=sample.gpu_mem_mib if sample else math.nan,
            gpu_sm_util=sample.gpu_sm_util if sample else math.nan,
            warmup=bool(steps) and steps[-1].warmup,
        )
