"""Live per-workload figures over a sliding window of step events (for status lines and panels)."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass

from gpumon.core.model import ProcessSample, StepEvent

WINDOW_S = 2.0


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


class LiveStats:
    """Keeps the last ``window_s`` of steps per workload; safe to feed from the bus thread."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._steps: dict[str, deque[StepEvent]] = {}
        self._counts: dict[str, int] = {}
        self._last_sample: dict[str, ProcessSample] = {}
        self._lock = threading.Lock()

    def handle(self, item: object) -> None:
        if isinstance(item, StepEvent):
            with self._lock:
                self._steps.setdefault(item.process, deque()).append(item)
                self._counts[item.process] = item.step + 1
        elif isinstance(item, ProcessSample):
            self._last_sample[item.process] = item

    def reset(self, process: str) -> None:
        """Forget a slot's history (a new workload was launched in it)."""
        with self._lock:
            self._steps.pop(process, None)
            self._counts.pop(process, None)
            self._last_sample.pop(process, None)

    def figures(self, process: str, now: float) -> LiveFigures:
        with self._lock:
            window = self._steps.setdefault(process, deque())
            while window and window[0].t < now - self.window_s:
                window.popleft()
            steps = list(window)
            count = self._counts.get(process, 0)
        busy = sum(s.iter_s for s in steps)
        samples = [s.samples for s in steps if not math.isnan(s.samples)]
        copy_bytes = sum(s.copy_bytes for s in steps)
        copy_s = sum(s.copy_s for s in steps if not math.isnan(s.copy_s))
        sample = self._last_sample.get(process)
        return LiveFigures(
            process=process,
            steps=count,
            iter_per_s=len(steps) / busy if busy > 0 else (0.0 if count else math.nan),
            samples_per_s=sum(samples) / busy if busy > 0 and samples else math.nan,
            copy_bandwidth=copy_bytes / copy_s if copy_s > 0 else math.nan,
            copy_bytes_per_s=copy_bytes / busy if busy > 0 and copy_s > 0 else math.nan,
            cpu_pct=sample.cpu_pct if sample else math.nan,
            rss_mib=sample.rss_mib if sample else math.nan,
            gpu_mem_mib=sample.gpu_mem_mib if sample else math.nan,
            gpu_sm_util=sample.gpu_sm_util if sample else math.nan,
            warmup=bool(steps) and steps[-1].warmup,
        )
