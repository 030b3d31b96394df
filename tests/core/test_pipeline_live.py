"""LiveStats through its public interface, fed deterministic steps (busy time equal to wall time)."""

from __future__ import annotations

import math

import pytest

from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import ProcessSample, StepEvent


def _feed(live: LiveStats, process: str, n: int, period: float, t0: float = 0.0, copy: int = 0) -> float:
    t = t0
    for i in range(n):
        t = t0 + (i + 1) * period
        live.handle(StepEvent(process, 1, i, t, period, samples=8.0, warmup=i < 2, copy_bytes=copy, copy_s=period / 10 if copy else math.nan))
    return t


def test_rates_of_a_steady_job_within_the_window():
    live = LiveStats(window_s=2.0)
    end = _feed(live, "A", 300, 0.01)
    f = live.figures("A", end)
    assert f.steps == 300
    assert f.iter_per_s == pytest.approx(100.0, rel=0.01)
    assert f.samples_per_s == pytest.approx(800.0, rel=0.01)
    assert not f.warmup


def test_each_process_has_its_own_figures_and_copy_bandwidth():
    live = LiveStats(window_s=2.0)
    end = _feed(live, "A", 100, 0.01, copy=1000)
    _feed(live, "B", 50, 0.02)
    a, b = live.figures("A", end), live.figures("B", end)
    assert a.iter_per_s == pytest.approx(100.0, rel=0.01) and b.iter_per_s == pytest.approx(50.0, rel=0.02)
    assert a.copy_bandwidth == pytest.approx(1000 / 0.001)
    assert math.isnan(b.copy_bandwidth)


def test_old_steps_leave_the_window_and_unknown_is_nan():
    live = LiveStats(window_s=1.0)
    end = _feed(live, "A", 100, 0.01)
    assert live.figures("A", end + 5.0).iter_per_s == 0.0, "a job that stopped stepping shows 0, not its old rate"
    assert math.isnan(live.figures("B", end).iter_per_s)


def test_process_samples_and_reset():
    live = LiveStats()
    end = _feed(live, "A", 10, 0.01)
    live.handle(ProcessSample(end, "A", 1, cpu_pct=150.0, rss_mib=42.0, threads=3))
    f = live.figures("A", end)
    assert (f.cpu_pct, f.rss_mib, f.warmup) == (150.0, 42.0, False)
    live.reset("A")
    g = live.figures("A", end)
    assert g.steps == 0 and math.isnan(g.cpu_pct) and math.isnan(g.iter_per_s)


def test_warm_up_is_reported_while_the_last_step_is_a_warm_up_step():
    live = LiveStats()
    live.handle(StepEvent("A", 1, 0, 0.01, 0.01, warmup=True))
    assert live.figures("A", 0.02).warmup


def test_steps_wait_for_the_next_question_and_never_pile_up():
    """A step costs the publisher an append; figures take them in, in order; with nobody asking, ABSORB_AT at most wait."""
    from gpumon.core.interference.live import ABSORB_AT
    from gpumon.core.records.model import WorkloadState

    live = LiveStats(window_s=2.0)
    end = _feed(live, "A", 3 * ABSORB_AT + 7, 0.001)
    assert len(live._pending) < ABSORB_AT, "the publisher took them in itself"
    assert live.figures("A", end).steps == 3 * ABSORB_AT + 7 and not live._pending
    for i in range(300):  # together, in time order: A at 50 steps/s, B at 100
        t = end + (i + 1) * 0.01
        if i % 2:
            live.handle(StepEvent("A", 1, 3 * ABSORB_AT + 7 + i // 2, t, 0.02))
        live.handle(StepEvent("B", 2, i, t, 0.01, warmup=i < 2))
    live.handle(WorkloadState("B", "exited", end + 3.0, exit_status=0))  # its last steps, still waiting, count
    _feed(live, "A", 100, 0.001, t0=end + 3.0)  # after B left: not in the overlap
    rates = live.overlap(["A", "B"]).rates
    assert rates["B"] == pytest.approx(100.0, rel=0.02) and rates["A"] == pytest.approx(50.0, rel=0.05)
    with pytest.raises(RuntimeError, match="no shared rates"):
        LiveStats(shared=False).overlap(["A"])


def test_one_computation_per_bus_says_which_jobs_run_and_publishes_each_answer():
    from gpumon.core.interference.live import LiveNow
    from gpumon.core.records.bus import Bus
    from gpumon.core.records.model import WorkloadState

    bus = Bus()
    live = LiveStats(window_s=2.0, bus=bus)
    published: list[LiveNow] = []
    bus.subscribe(published.append, LiveNow)
    for slot in ("A", "B"):
        bus.publish(WorkloadState(slot, "starting", 0.0))
        bus.publish(WorkloadState(slot, "running", 0.0, pid=1))
    assert live.running() == ("A", "B")
    for i in range(300):  # A at 100 it/s, B at 50 it/s, together from the start
        bus.publish(StepEvent("A", 1, i, (i + 1) * 0.01, 0.01, warmup=i < 2))
        if i % 2:
            bus.publish(StepEvent("B", 2, i // 2, (i + 1) * 0.01, 0.02, warmup=i < 4))
    now = live.now(3.0)
    assert published == [now] and now.running == ("A", "B")
    assert now.figures["A"].steps == 300 and now.shared["A"] == pytest.approx(100.0, rel=0.02)
    assert now.shared["B"] == pytest.approx(50.0, rel=0.05)
    bus.publish(WorkloadState("B", "exited", 3.0, pid=2, exit_status=0))
    after = live.now(3.1)
    assert after.running == ("A",) and after.shared["B"] == now.shared["B"], "the overlap's figures stay as it ended"
    bus.publish(WorkloadState("B", "starting", 4.0))  # a new job in B: its history starts again
    assert live.figures("B", 4.0).steps == 0 and live.running() == ("A", "B")
