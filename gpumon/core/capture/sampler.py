"""The sampling thread: one job per tick over the host and NVML sources, next tick after the last."""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Callable, Iterable, Mapping

from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.records.model import THREAD_DIED, GpuOthers, GpuOverview, Notice
from gpumon.core.records.slots import Slot
from gpumon.core.store.others import meaningful
from gpumon.core.sources.host import HostSource
from gpumon.core.sources.nvml import NvmlSource, pid_namespace_hint

log = logging.getLogger(__name__)

NAMESPACE_GRACE_S = 10.0
# /proc CPU times tick at 10 ms (USER_HZ 100): a 100 ms window would quantise CPU% to 10 % (this one: to 1 %), and
# the /proc reads are most of the sampler's own cost beside NVML. Processes and host are sampled at most this often:
# the screen draws them once a second (0.5 s cost the runner 0.1 % of a core more: observer_cost, docs/tui.md).
PROCESS_PERIOD_S = 1.0
# The sampler sleeps with time.sleep, in slices of at most this: a stop is seen within one slice, and a wake-up
# costs ~45 µs of CPU instead of Event.wait's ~75 (2-core VM, both cores busy). At least the chosen intervals up to
# 200 ms (``auto_interval_ms``), so that each of their ticks is one wake-up, not two.
STOP_SLICE_S = 0.25
# Every this many process ticks (5 s) the jobs' trees are read through every thread's children file; between, through
# each process's main thread only (HostSource.tree_pids): 34 files a GPU job instead of one, ~0.3 % of a core.
FULL_TREE_EVERY = 5
# The sampling interval when --interval is not given (``auto_interval_ms``), from what a tick can read that is new:
# PCIe bytes from the byte counters are new every tick (a copy's burst seen at this resolution) ...
COUNTER_INTERVAL_MS = 100
# ... but where GPM (or the throughput call) gives them once a second, only utilisation and the SM clock are new
# between the once-a-second reads, and the H100's driver updates utilisation every 200 ms (its captures at 100 ms held
# every value for an even number of samples: docs/nvml.md), so a faster tick records each value twice ...
UTILISATION_INTERVAL_MS = 200
# ... and without NVML a tick reads nothing but the processes and host, once a second.
NO_NVML_INTERVAL_MS = round(PROCESS_PERIOD_S * 1000)


def auto_interval_ms(nvml: NvmlSource | None) -> int:
    """The sampling interval of a session whose ``--interval`` was not given (``nvml``: the opened source where it is
    available, else None)."""
    if nvml is None:
        return NO_NVML_INTERVAL_MS
    return COUNTER_INTERVAL_MS if nvml.pcie_each_tick else UTILISATION_INTERVAL_MS


class Sampler(threading.Thread):
    """Publishes a DeviceSample (NVML) every interval, HostSample and ProcessSamples every second at most.

    Between ticks it reads NVML's wrapping PCIe counters as often as the link's speed requires
    (``NvmlSource.pcie_poll_period_s``; never on GPM or 64-bit counters).

    A slow tick is never queued behind: the next one is scheduled from when the
    last finished, so ticks merge instead of piling up (Dolphie's pattern).
    """

    def __init__(
        self,
        bus: Bus,
        clock: RunClock,
        host: HostSource,
        nvml: NvmlSource | None,
        interval_s: float,
        workload_pids: Callable[[], Mapping[Slot, int]],
        expect_gpu_processes: bool = False,
        overview: bool = False,
    ) -> None:
        """``overview``: on a box with several GPUs, publish a GpuOverview of them all every process tick (the TUI's)."""
        super().__init__(name="gpumon-sampler", daemon=True)
        self.bus = bus
        self.clock = clock
        self.host = host
        self.nvml = nvml
        self.interval_s = interval_s
        self.workload_pids = workload_pids
        self.ticks = 0
        self.failed_ticks = 0  # ticks that raised (the first of each kind said in a notice)
        self._said: set[type] = set()
        self.failure: str | None = None  # why this thread died, if it did (the run is then failed)
        self.process_every = max(1, math.ceil(PROCESS_PERIOD_S / interval_s - 1e-9))
        self._stop_event = threading.Event()
        self._nvml_was_available = nvml is not None and nvml.status.available
        self.expect_gpu_processes = expect_gpu_processes
        self.overview = overview
        self._foreign_warned = False
        self._announced: set[int] = set()
        self._ever_ours: set[int] = set()
        self._next_poll = 0.0

    def claim(self, pid: int) -> None:
        """Count ``pid`` as a job's from now on, before its slot knows it (a ``--beside`` process about to be
        attached: connecting to its probe and reading its history takes time a process tick may fall into), so it
        is never listed among the other GPU processes."""
        self._ever_ours.add(pid)

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        """Sample until stopped: a failed tick is counted (a notice for the first of each kind), the next one
        taken; a failure of the loop itself ends the thread with a THREAD_DIED notice (the run ends failed)."""
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - never silently
            log.exception("sampler failed")
            self.failure = f"{type(exc).__name__}: {exc}"
            text = f"the sampler stopped ({self.failure}): no samples from now on"
            self.bus.publish(Notice(self.clock.now(), text, None, THREAD_DIED))

    def _loop(self) -> None:
        while not self._stop_event.is_set():
            started = self.clock.now()
            try:
                self.tick()
            except Exception as exc:
                log.exception("sampling tick failed")
                self.failed_ticks += 1
                if type(exc) not in self._said:
                    self._said.add(type(exc))
                    text = f"a sampling tick failed ({type(exc).__name__}); see the log"
                    self.bus.publish(Notice(self.clock.now(), text))
            self.ticks += 1
            self._wait_until(started + self.interval_s)

    def _wait_until(self, next_tick: float) -> None:
        """Sleep until ``next_tick``, polling NVML's wrapping PCIe counters on their own cadence meanwhile."""
        while not self._stop_event.is_set():
            nvml = self.nvml if self.nvml is not None and self.nvml.status.available else None
            period = nvml.pcie_poll_period_s if nvml is not None else None
            now = self.clock.now()
            if nvml is None or period is None:
                self._sleep(next_tick - now)
                return
            if self._next_poll < now - period:  # woke late: poll now, then on cadence again
                self._next_poll = now
            if self._next_poll >= next_tick:
                self._sleep(next_tick - now)
                return
            if self._sleep(self._next_poll - now):
                return
            nvml.poll_pcie(self.clock.now())
            self._next_poll += period

    def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` in slices of at most ``STOP_SLICE_S``; True once stopped."""
        end = time.monotonic() + seconds
        while not self._stop_event.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, STOP_SLICE_S))
        return True

    def tick(self) -> None:
        """NVML device metrics every tick; processes and host every ``process_every`` ticks."""
        t = self.clock.now()
        nvml = self.nvml if self.nvml is not None and self.nvml.status.available else None
        nvml_up = nvml is not None
        device = None
        if nvml is not None:
            device = nvml.sample(t)
            if device is not None:
                self.bus.publish(device)
        if self.ticks % self.process_every == 0:
            every_thread = self.ticks // self.process_every % FULL_TREE_EVERY == 0
            trees = {
                slot: self.host.tree_pids(pid, every_thread)
                for slot, pid in self.workload_pids().items()
            }
            all_pids = [p for pids in trees.values() for p in pids]
            every = nvml.gpu_process_metrics(t) if nvml_up and nvml is not None else {}
            # stamped as read, not as the tick began: on a busy box this thread may be held between the two, and a
            # job started meanwhile already shows in these figures (the other job's "alone" ends at that start)
            t = self.clock.now()
            ours = set(all_pids)
            gpu_procs = {pid: m for pid, m in every.items() if pid in ours}
            if nvml_up:
                self._check_foreign(all_pids, every.keys())
                # gpumon's own descendants too (a job just launched is ours before its slot knows its PID),
                # and every PID that was ever ours (a job exiting is still listed by NVML for a moment)
                self._ever_ours |= ours
                if every.keys() - self._ever_ours:
                    self._ever_ours |= set(self.host.tree_pids(os.getpid()))
                others = {pid: m for pid, m in every.items() if pid not in self._ever_ours}
                seen = GpuOthers(t, self.host.sample_others(t, others))
                self.bus.publish(seen)
                if ours:
                    self._announce_others(seen)
                if (
                    self.overview and nvml is not None
                ):  # every GPU's cheap figures, at this cadence only
                    gpus = nvml.overview(t, device, len(every))
                    if gpus:
                        self.bus.publish(GpuOverview(t, gpus))
            self.bus.publish(self.host.sample_host(t))
            for sample in self.host.sample_processes(t, trees, gpu_procs):
                self.bus.publish(sample)
        if nvml is not None and self._nvml_was_available and not nvml.status.available:
            self._nvml_was_available = False
            self.bus.publish(nvml.status)

    def _announce_others(self, seen: GpuOthers) -> None:
        """A Notice, once per process, when one that is not our job uses the GPU while our jobs run."""
        for other in seen.processes:
            if other.pid in self._announced or not meaningful(other.sm_pct, other.gpu_mem_mib):
                continue
            self._announced.add(other.pid)
            who = f"pid {other.pid} ({other.user or 'unknown user'}, {other.command or 'unknown command'})"
            use = ", ".join(
                [f"SM {other.sm_pct:.0f} %"] * (not math.isnan(other.sm_pct))
                + [f"{other.gpu_mem_mib / 1024:.1f} GiB"] * (not math.isnan(other.gpu_mem_mib))
            )
            self.bus.publish(
                Notice(
                    seen.t,
                    f"another process is on the GPU: {who}, {use}; this capture is not alone",
                )
            )

    def _check_foreign(self, our_pids: list[int], gpu_pids: Iterable[int]) -> None:
        """Warn once when, after a grace period, NVML lists processes but never ours (PID namespace)."""
        if (
            self._foreign_warned
            or not self.expect_gpu_processes
            or not our_pids
            or self.nvml is None
        ):
            return
        if self.ticks * self.interval_s < NAMESPACE_GRACE_S:
            return
        hint = pid_namespace_hint(our_pids, gpu_pids)
        if hint:
            self._foreign_warned = True
            self.bus.publish(Notice(self.clock.now(), hint))
