"""LiveStats through its public interface, fed deterministic steps (busy time equal to wall time)."""

from __future__ import annotations

import math

import pytest

from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import ProcessSample, StepBatch, StepEvent


def _feed(
    live: LiveStats, process: str, n: int, period: float, t0: float = 0.0, copy: int = 0
) -> float:
    t = t0
    for i in range(n):
        t = t0 + (i + 1) * period
        live.handle(
            StepBatch.of(
                StepEvent(
                    process,
                    1,
                    i,
                    t,
                    period,
                    samples=8.0,
                    warmup=i < 2,
                    copy_bytes=copy,
                    copy_s=period / 10 if copy else math.nan,
                )
            )
        )
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
    assert a.iter_per_s == pytest.approx(100.0, rel=0.01) and b.iter_per_s == pytest.approx(
        50.0, rel=0.02
    )
    assert a.copy_bandwidth == pytest.approx(1000 / 0.001)
    assert math.isnan(b.copy_bandwidth)


def test_old_steps_leave_the_window_and_unknown_is_nan():
    live = LiveStats(window_s=1.0)
    end = _feed(live, "A", 100, 0.01)
    stopped = live.figures("A", end + 5.0).iter_per_s
    assert 0 < stopped < 1.0, "a job that stopped stepping decays towards 0, not its old rate"
    assert live.figures("A", end + 50.0).iter_per_s < stopped
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
    live.handle(StepBatch.of(StepEvent("A", 1, 0, 0.01, 0.01, warmup=True)))
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
            live.handle(StepBatch.of(StepEvent("A", 1, 3 * ABSORB_AT + 7 + i // 2, t, 0.02)))
        live.handle(StepBatch.of(StepEvent("B", 2, i, t, 0.01, warmup=i < 2)))
    live.handle(
        WorkloadState("B", "exited", end + 3.0, exit_status=0)
    )  # its last steps, still waiting, count
    _feed(live, "A", 100, 0.001, t0=end + 3.0)  # after B left: not in the overlap
    rates = live.overlap(["A", "B"]).rates
    assert rates["B"] == pytest.approx(100.0, rel=0.02) and rates["A"] == pytest.approx(
        50.0, rel=0.05
    )
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
        bus.publish(StepBatch.of(StepEvent("A", 1, i, (i + 1) * 0.01, 0.01, warmup=i < 2)))
        if i % 2:
            bus.publish(StepBatch.of(StepEvent("B", 2, i // 2, (i + 1) * 0.01, 0.02, warmup=i < 4)))
    now = live.now(3.0)
    assert published == [now] and now.running == ("A", "B")
    assert now.figures["A"].steps == 300 and now.shared["A"] == pytest.approx(100.0, rel=0.02)
    assert now.shared["B"] == pytest.approx(50.0, rel=0.05)
    bus.publish(WorkloadState("B", "exited", 3.0, pid=2, exit_status=0))
    after = live.now(3.1)
    assert after.running == ("A",) and after.shared["B"] == now.shared["B"], (
        "the overlap's figures stay as it ended"
    )
    bus.publish(WorkloadState("B", "starting", 4.0))  # a new job in B: its history starts again
    assert live.figures("B", 4.0).steps == 0 and live.running() == ("A", "B")


def _steps(
    live: LiveStats, slot: str, first: int, t0: float, rate: float, n: int, warmup: int = 0
) -> float:
    """``n`` steps of ``slot`` numbered from ``first``, one every 1/``rate`` s after ``t0`` (the first ``warmup`` of
    them warm-up); the last step's time."""
    t = t0
    for i in range(n):
        t = t0 + (i + 1) / rate
        live.handle(StepBatch.of(StepEvent(slot, 1, first + i, t, 1 / rate, warmup=i < warmup)))
    return t


def test_a_jobs_exclusive_phase_is_its_rate_while_no_other_job_ran():
    """A alone: 5 warm-up steps, then 80 steps at 40 it/s (steps 5..84 at 1.15-3.125 s: 79 intervals over 1.975 s = 40 it/s);
    B starts at 3.2 s and everything after is sharing. The phase ends at B's start, its step count interpolated there
    between step 84 (3.125 s) and step 85 (3.3 s, the first beside B) as gpumon compare cuts it: 84 + 0.075/0.175 =
    84.43 steps, (84.43 - 5) / (3.2 - 1.15 s) = 38.75 it/s. B, never alone while A ran, has its phase once A exited."""
    from gpumon.core.records.model import WorkloadState

    live = LiveStats()
    live.handle(WorkloadState("A", "starting", 0.0))
    live.handle(WorkloadState("A", "running", 0.0))
    end = _steps(live, "A", 0, 1.0, 40.0, 85, warmup=5)
    assert live.now(end).exclusive["A"] == pytest.approx(79 / (end - (1.0 + 6 / 40.0)))
    assert live.now(end).exclusive["A"] == pytest.approx(40.0)
    live.handle(WorkloadState("B", "starting", 3.2))
    _steps(live, "A", 85, 3.2, 10.0, 30)  # a quarter of the rate beside B: never its rate alone
    end = _steps(live, "B", 0, 3.2, 25.0, 20)
    now = live.now(end)
    assert now.exclusive["A"] == pytest.approx((84 + 0.075 / 0.175 - 5) / 2.05) and math.isnan(
        now.exclusive["B"]
    )
    live.handle(WorkloadState("A", "exited", end, exit_status=0))
    end = _steps(live, "B", 20, end, 20.0, 9)  # 9 steps alone: 8 intervals, fewer than 10 steps
    assert math.isnan(live.now(end).exclusive["B"])
    end = _steps(live, "B", 29, end, 20.0, 20)  # steps 20..48 alone: 28 intervals over 1.4 s
    assert live.now(end).exclusive["B"] == pytest.approx(20.0)
    live.handle(
        WorkloadState("A", "starting", end)
    )  # a new job in slot A: the old one's phase is not its
    assert "A" not in live.now(end).exclusive


def test_a_short_exclusive_phase_is_no_rate():
    """Ten steps in under a second, or nine over more than one, are too few to be a job's rate alone."""
    fast, slow = LiveStats(), LiveStats()
    _steps(fast, "A", 0, 0.0, 40.0, 12)  # 11 intervals over 0.275 s
    _steps(slow, "A", 0, 0.0, 5.0, 10)  # 9 intervals over 1.8 s
    assert math.isnan(fast.now(1.0).exclusive["A"]) and math.isnan(slow.now(3.0).exclusive["A"])
    _steps(slow, "A", 10, 2.0, 5.0, 1)  # an eleventh step: 10 intervals over 2.0 s
    assert slow.now(3.0).exclusive["A"] == pytest.approx(5.0)


def test_a_step_is_judged_by_when_it_was_taken_not_when_it_arrived():
    """A probe's steps can reach the bus after the other job's start: those taken before it are still the job's
    rate alone (as compare cuts the phase at the other's start), those after it sharing."""
    from gpumon.core.records.model import WorkloadState

    live = LiveStats()
    live.handle(WorkloadState("A", "running", 0.0))
    _steps(live, "A", 0, 0.0, 20.0, 20)  # 0.05-1.0 s, taken in before B starts
    live.handle(WorkloadState("B", "starting", 2.0))
    _steps(live, "A", 20, 1.0, 20.0, 20)  # 1.05-2.0 s, arriving after B's start: still alone
    _steps(live, "A", 40, 2.0, 5.0, 10)  # 2.2-4.0 s: beside B
    assert live.now(4.0).exclusive["A"] == pytest.approx(20.0)
