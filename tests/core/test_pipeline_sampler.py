"""The Sampler's contract with fast fake sources: a device sample each tick, host/processes every
``process_every`` ticks, a failing tick becomes a Notice, a lost NVML is said once, stop ends it."""

from __future__ import annotations

import threading
import time

from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.records.model import (
    THREAD_DIED,
    DeviceSample,
    HostSample,
    Notice,
    ProcessSample,
    SourceStatus,
)
from gpumon.core.capture.sampler import FULL_TREE_EVERY, UTILISATION_INTERVAL_MS, Sampler
from tests.helpers import wait_for


class FakeHost:
    """Same interface as HostSource; deterministic samples, one process per workload."""

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.looks: list[bool] = []  # every_thread of each tree_pids call

    def tree_pids(self, pid: int, every_thread: bool = True) -> list[int]:
        self.looks.append(every_thread)
        return [pid, pid + 1]

    def sample_host(self, t: float) -> HostSample:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("host read failed")
        return HostSample(t, cpu_pct=12.5, mem_used_mib=100.0, mem_total_mib=1000.0)

    def sample_processes(self, t, trees, gpu_procs):
        return [
            ProcessSample(t, slot, pids[0], 50.0, 10.0, len(pids))
            for slot, pids in sorted(trees.items())
        ]

    def sample_others(self, t, gpu):
        return ()


class FakeNvml:
    """Same interface as NvmlSource; goes away after ``lose_after`` samples when set."""

    def __init__(
        self, lose_after: int | None = None, pcie_poll_period_s: float | None = None
    ) -> None:
        self.samples = 0
        self.polls = 0
        self.lose_after = lose_after
        self.pcie_poll_period_s = pcie_poll_period_s
        self._status = SourceStatus("nvml", True, "fake")

    @property
    def status(self) -> SourceStatus:
        return self._status

    def sample(self, t: float) -> DeviceSample:
        self.samples += 1
        if self.lose_after is not None and self.samples >= self.lose_after:
            self._status = SourceStatus("nvml", False, "unavailable: GPU is lost")
        return DeviceSample(t, gpu_util=float(self.samples))

    def poll_pcie(self, t: float) -> None:
        self.polls += 1

    def gpu_process_metrics(self, t=None):
        return {}


class Collect:
    def __init__(self, bus: Bus) -> None:
        self.items: list[object] = []
        self.lock = threading.Lock()
        bus.subscribe(self.add)

    def add(self, item: object) -> None:
        with self.lock:
            self.items.append(item)

    def of(self, cls) -> list:
        with self.lock:
            return [i for i in self.items if isinstance(i, cls)]


def _sampler(host, nvml, interval_s=0.02, pids=lambda: {"A": 1000}):
    bus = Bus()
    items = Collect(bus)
    return Sampler(bus, RunClock.start(), host, nvml, interval_s, pids), items


def test_device_every_tick_host_and_processes_every_process_period():
    sampler, items = _sampler(FakeHost(), FakeNvml(), interval_s=0.1)
    assert sampler.process_every == 10, "processes and host once a second at --interval 100"
    for _ in range(22):
        sampler.tick()
        sampler.ticks += 1
    assert [d.gpu_util for d in items.of(DeviceSample)] == [float(i) for i in range(1, 23)]
    assert len(items.of(HostSample)) == 3, "ticks 0, 10 and 20"
    procs = items.of(ProcessSample)
    assert [(p.slot, p.pid, p.threads) for p in procs] == [("A", 1000, 2)] * 3


def test_job_trees_are_read_through_every_thread_once_every_full_tree_period():
    host = FakeHost()
    sampler, _ = _sampler(host, FakeNvml(), interval_s=0.1)
    for _ in range(sampler.process_every * FULL_TREE_EVERY * 2 + 1):
        sampler.tick()
        sampler.ticks += 1
    off = [False] * (FULL_TREE_EVERY - 1)
    assert host.looks == [True, *off, True, *off, True]


def test_the_thread_ticks_until_stopped_and_stops_promptly():
    sampler, items = _sampler(FakeHost(), FakeNvml())
    sampler.start()
    wait_for(lambda: sampler.ticks >= 10, what="ten ticks")
    sampler.stop()
    sampler.join(2.0)
    assert not sampler.is_alive()
    ticks = sampler.ticks
    times = [d.t for d in items.of(DeviceSample)]
    assert len(times) == ticks and times == sorted(times)


def test_a_tick_of_the_chosen_intervals_is_one_wake_up(monkeypatch):
    """At 200 ms (a GPM GPU's interval when none is given) the sampler sleeps once a tick, not in two slices: a
    wake-up is most of what a tick between the once-a-second reads costs (docs/nvml.md)."""
    from gpumon.core.capture import sampler as module

    sleeps: list[float] = []
    real_sleep = time.sleep

    def counted(seconds: float) -> None:
        if (
            threading.current_thread().name == "gpumon-sampler"
        ):  # time.sleep is everyone's: the test waits too
            sleeps.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(module.time, "sleep", counted)
    sampler, _ = _sampler(FakeHost(), FakeNvml(), interval_s=UTILISATION_INTERVAL_MS / 1000)
    sampler.start()
    try:
        wait_for(lambda: sampler.ticks >= 4, what="four ticks")
    finally:
        sampler.stop()
        sampler.join(2.0)
    assert len(sleeps) <= sampler.ticks + 1, sleeps


def test_a_failing_tick_publishes_a_notice_and_sampling_goes_on():
    sampler, items = _sampler(FakeHost(fail_on_call=2), FakeNvml(), interval_s=0.02)
    sampler.start()
    wait_for(lambda: len(items.of(HostSample)) >= 3, what="host samples after the failure")
    sampler.stop()
    sampler.join(2.0)
    notices = items.of(Notice)
    assert len(notices) == 1 and "sampling tick failed" in notices[0].text


def test_without_nvml_only_host_and_processes_are_published():
    sampler, items = _sampler(FakeHost(), None, interval_s=0.5)
    sampler.tick()
    assert not items.of(DeviceSample) and len(items.of(HostSample)) == 1


def test_a_lost_nvml_is_published_once():
    nvml = FakeNvml(lose_after=3)
    sampler, items = _sampler(FakeHost(), nvml)
    for _ in range(6):
        sampler.tick()
        sampler.ticks += 1
    lost = [s for s in items.of(SourceStatus) if not s.available]
    assert len(lost) == 1 and "lost" in lost[0].reason
    assert len(items.of(DeviceSample)) == 3, "no device samples once NVML is gone"


def test_wrapping_pcie_counters_are_polled_between_ticks_on_their_own_cadence():
    nvml = FakeNvml(pcie_poll_period_s=0.01)
    sampler, _ = _sampler(FakeHost(), nvml, interval_s=0.1)
    sampler.start()
    wait_for(lambda: nvml.polls >= 20, what="PCIe polls")
    sampler.stop()
    sampler.join(2.0)
    assert not sampler.is_alive()
    assert nvml.polls > sampler.ticks, "polled more often than ticked"


def test_ticks_that_keep_failing_are_counted_and_said_once():
    class Broken(FakeHost):
        def sample_host(self, t):
            raise RuntimeError("host source broke")

    sampler, items = _sampler(Broken(), FakeNvml(), interval_s=0.01)
    sampler.start()
    wait_for(lambda: sampler.failed_ticks >= 5, what="five failed ticks")
    sampler.stop()
    sampler.join(2.0)
    notices = [n.text for n in items.of(Notice)]
    assert notices == ["a sampling tick failed (RuntimeError); see the log"]
    assert sampler.failure is None, "a failing tick is not a dead thread"


def test_a_sampler_whose_loop_fails_says_so_and_the_run_is_failed():
    sampler, items = _sampler(FakeHost(), FakeNvml())

    def broken_wait(next_tick):  # the loop's own machinery fails, not one tick
        raise RuntimeError("clock broke")

    sampler._wait_until = broken_wait
    sampler.start()
    sampler.join(10)
    assert not sampler.is_alive() and sampler.failure == "RuntimeError: clock broke"
    died = [n for n in items.of(Notice) if n.kind == THREAD_DIED]
    assert len(died) == 1 and "clock broke" in died[0].text


class SlowProcessRead(FakeNvml):
    """NVML whose process list is read later than the tick began (a busy box holds the thread); notes when."""

    def __init__(self, clock: RunClock) -> None:
        super().__init__()
        self.clock = clock
        self.read_at: list[float] = []

    def gpu_process_metrics(self, t=None):
        time.sleep(0.005)
        self.read_at.append(self.clock.now())
        return {}


def test_what_the_process_tick_publishes_is_stamped_after_its_gpu_figures_were_read():
    """A job started between the tick's start and the read of the process list shows in those figures; stamped with
    the tick's start they fell before its start and counted as the other job's "alone" (test_beside, loaded)."""
    bus, clock = Bus(), RunClock.start()
    items = Collect(bus)
    nvml = SlowProcessRead(clock)
    sampler = Sampler(bus, clock, FakeHost(), nvml, 0.1, lambda: {"A": 1000})
    sampler.tick()
    (device,), (host,), (process,) = (
        items.of(k) for k in (DeviceSample, HostSample, ProcessSample)
    )
    assert device.t < nvml.read_at[0] <= process.t and nvml.read_at[0] <= host.t
