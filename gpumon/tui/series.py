"""Time-binned history for the graphs: one value per bin of run time, updated in O(1) per sample."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Iterable

NAN = math.nan


@dataclass(frozen=True)
class Window:
    """The last ``values`` a series gave for one (length, missing): the window ended with bin ``last``, its newest bin
    then was ``newest``, and the bins were of generation ``generation`` (``clear`` starts a new one)."""

    generation: int
    last: int
    newest: int
    values: tuple[float, ...]


class BinnedSeries:
    """The last ``capacity`` bins of ``bin_s`` seconds; each bin's value is sum / weight.

    A mean is ``add(t, value)``; a rate is ``add(t, count, weight=busy_seconds)``.
    Safe to feed from the bus thread while another thread reads.

    Only the newest bin changes (a sample for an older one is dropped), so ``values`` shifts the window it gave last
    and reads only the bins from that window's newest on: a frame reads a bin or two of each history, not all 240
    (observer_cost: the refresh thread's view).
    """

    def __init__(self, bin_s: float, capacity: int) -> None:
        self.bin_s = bin_s
        self.capacity = capacity
        self._bins: deque[list[float]] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self.peak = 0.0
        self._generation = 0
        self._windows: dict[tuple[int, str], Window] = {}

    def add(self, t: float, value: float, weight: float = 1.0) -> None:
        self.add_all(((t, value, weight),))

    def add_all(self, samples: Iterable[tuple[float, float, float]]) -> None:
        """``add`` each (t, value, weight) in turn, under one lock (a probe message's steps: one call)."""
        bins, bin_s, floor, peak = self._bins, self.bin_s, math.floor, self.peak
        with self._lock:
            for t, value, weight in samples:
                if not weight > 0 or value != value:  # NaN weight or value: nothing measured
                    continue
                index = floor(t / bin_s)
                last = bins[-1] if bins else None
                if last is not None and last[0] == index:
                    last[1] += value
                    last[2] += weight
                elif last is None or last[0] < index:
                    last = [index, value, weight]
                    bins.append(last)
                else:
                    continue
                peak = max(peak, last[1] / last[2])
        self.peak = peak

    def clear(self) -> None:
        with self._lock:
            self._bins.clear()
            self._generation += 1
        self.peak = 0.0

    def values(self, now: float, n: int, missing: float = NAN) -> tuple[float, ...]:
        """The ``n`` bins ending with the one holding ``now``, oldest first; ``missing`` where empty."""
        last = math.floor(now / self.bin_s)
        first = last - n + 1
        key = (n, repr(missing))
        with self._lock:
            before = self._windows.get(key)
            shift = last - before.last if before is not None else -1
            if (
                before is not None
                and before.generation == self._generation
                and 0 <= shift < n <= self.capacity
            ):
                # the bins before the last window's newest are as they were: shift it, read the rest
                shown = list(before.values[shift:])
                shown.extend([missing] * shift)
                since = before.newest
            else:
                shown = [missing] * max(0, n)
                since = first
            for index, total, weight in reversed(self._bins):
                if index < first or index < since:
                    break
                if index <= last:
                    shown[int(index) - first] = total / weight
            values = tuple(shown)
            newest = int(self._bins[-1][0]) if self._bins else first
            self._windows[key] = Window(self._generation, last, newest, values)
        return values


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value`` (a stable graph top)."""
    if not value > 0 or math.isinf(value):
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        top = step * 10**exponent
        if top >= value * (1 - 1e-9):
            return top
    return 10.0 ** (exponent + 1)
