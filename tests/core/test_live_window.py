"""The live rate LiveStats gives (core/interference/live.py) is live_rate's over every step of the window and the few
before it, though only the window's last MIN_LIVE_STEPS + 1 steps are handed to it (property-tested over step
streams of any pace, and any time of asking)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import StepBatch, StepEvent
from gpumon.core.records.rates import LIVE_WINDOW_S, MIN_LIVE_STEPS, Point, live_rate

GAPS = st.lists(st.floats(0.0005, 3.0), min_size=0, max_size=300)


def expected(times: list[float], now: float) -> float:
    """live_rate over every step: the window's, and the MIN_LIVE_STEPS + 1 before it."""
    points = [Point(t, n) for n, t in enumerate(times)]
    window = [p for p in points if p.t >= now - LIVE_WINDOW_S]
    before = [p for p in points if p.t < now - LIVE_WINDOW_S][-(MIN_LIVE_STEPS + 1) :]
    return live_rate(before, window, now)


@settings(max_examples=200, deadline=None)
@given(gaps=GAPS, lates=st.lists(st.floats(0.0, 10.0), min_size=1, max_size=4))
def test_the_live_rate_is_live_rates_over_the_whole_window(
    gaps: list[float], lates: list[float]
) -> None:
    times = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    stats = LiveStats()
    for n, t in enumerate(times):
        stats.handle(StepBatch.of(StepEvent("A", 1, n, t, 0.01)))
    now = times[-1] if times else 0.0
    for (
        late
    ) in lates:  # asked again and again, later each time (the window moves on, steps leave it)
        now += late
        got, want = stats.figures("A", now).iter_per_s, expected(times, now)
        assert got == want or (math.isnan(got) and math.isnan(want))
