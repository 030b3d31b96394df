"""PCIe byte counters that wrap: link capacity, how often to read them, exact 64-bit totals.

On the H100's driver (580.x) fields 197/198 come back as 32-bit values (valueType 1) that
wrap every ~71 ms at ~60 GB/s and advance in ~20.7 ms steps. A difference between two
readings is unambiguous only while the counted bytes between their timestamps stay below
2**bits; the bytes NVML counts can never exceed the link's capacity, so reading at least
every ``poll_period_s(bits, capacity)`` keeps every gap below one wrap. Details: docs/nvml.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NAN = math.nan
# Payload bytes/s per lane after line encoding, PCIe Gen1..Gen6.
LANE_BPS = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}
# Link assumed when NVML cannot say (its counters are read as if it were this fast).
FALLBACK_GEN, FALLBACK_WIDTH = 5, 16
# The counters and their timestamps advance in steps this long (20.7 ms measured on the H100).
COUNTER_STEP_S = 0.021
# NVML counts link bytes (protocol overhead included); allow this much above the nominal capacity.
CAPACITY_MARGIN = 1.05
# Read at this fraction of the longest safe gap, so a late wake-up still leaves room.
POLL_FRACTION = 0.75
# Width of a counter by nvmlFieldValue_t.valueType (1 uint, 2 ulong, 3 ull, 6 ushort); others are not counters.
COUNTER_BITS = {1: 32, 2: 64, 3: 64, 6: 16}


def link_capacity_bps(gen: int | None, width: int | None) -> float | None:
    """Bytes/s a PCIe link of this generation and width can carry, or None when unknown."""
    if not gen or not width or gen not in LANE_BPS:
        return None
    return LANE_BPS[gen] * width


def poll_period_s(bits: int, capacity_bps: float) -> float | None:
    """How often to read a ``bits``-wide counter so that no gap holds a whole wrap; None: never wraps."""
    if bits >= 64:
        return None
    wrap_s = 2**bits / (capacity_bps * CAPACITY_MARGIN)
    return max(0.0, wrap_s - COUNTER_STEP_S) * POLL_FRACTION


@dataclass
class WrapCounters:
    """RX and TX byte counters read together, accumulated into exact totals across wraps.

    ``add`` every reading (timestamp µs, raw RX, raw TX); ``rates`` at each tick gives bytes/s
    since the previous tick over the counters' own timestamps, or NaN when that span holds a gap
    long enough to hide a whole wrap (the bytes of that gap are unknowable, not guessed).
    """

    bits: int
    capacity_bps: float
    _last: tuple[int, int, int] | None = None
    _rx: int = 0
    _tx: int = 0
    _mark: tuple[int, int, int] | None = None
    _broken: bool = False

    @property
    def max_gap_us(self) -> float:
        """Longest span between two readings whose difference is unambiguous."""
        if self.bits >= 64:
            return math.inf
        return 2**self.bits / (self.capacity_bps * CAPACITY_MARGIN) * 1e6

    def add(self, stamp_us: int, rx: int, tx: int) -> None:
        """Take one reading into the totals."""
        last, self._last = self._last, (stamp_us, rx, tx)
        if last is None:
            return
        gap = stamp_us - last[0]
        if gap == 0:
            self._last = last
            return
        modulus = 2**self.bits
        went_back = self.bits >= 64 and (rx < last[1] or tx < last[2])
        if gap < 0 or went_back or gap >= self.max_gap_us:
            self._broken = True
            return
        self._rx += (rx - last[1]) % modulus
        self._tx += (tx - last[2]) % modulus

    def rates(self) -> tuple[float, float]:
        """(RX, TX) bytes/s since the previous call; NaN first, across a broken gap, or with no new step."""
        if self._last is None:
            return NAN, NAN
        now = (self._last[0], self._rx, self._tx)
        mark = self._mark
        if mark is None or self._broken:
            self._mark, self._broken = now, False
            return NAN, NAN
        if now[0] <= mark[0]:
            return NAN, NAN
        seconds = (now[0] - mark[0]) / 1e6
        self._mark = now
        return (now[1] - mark[1]) / seconds, (now[2] - mark[2]) / seconds
