"""The sampling thread: one job per tick over the host and NVML sources, next tick after the last."""

from __future__ import annotations

import logging
import threading
from typing import Callable, Mapping

from gpumon.core.bus import Bus
from gpumon.core.clock import RunClock
from gpumon.core.model import Notice
from gpumon.core.sources.host import HostSource
from gpumon.core.sources.nvml import NvmlSource, pid_namespace_hint

log = logging.getLogger(__name__)

NAMESPACE_GRACE_S = 10.0


class Sampler(threading.Thread):
    """Publishes a HostSample, ProcessSamples and (with NVML) a DeviceSample every interval.

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
        workload_pids: Callable[[], Mapping[str, int]],
        expect_gpu_processes: bool = False,
    ) -> None:
        super().__init__(name="gpumon-sampler", daemon=True)
        self.bus = bus
        self.clock = clock
        self.host = host
        self.nvml = nvml
        self.interval_s = interval_s
        self.workload_pids = workload_pids
        self.ticks = 0
        self._stop_event = threading.Event()
        self._nvml_was_available = nvml is not None and nvml.status.available
        self.expect_gpu_processes = expect_gpu_processes
        self._foreign_warned = False

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            started = self.clock.now()
            try:
                self.tick()
            except Exception:
                log.exception("sampling tick failed")
                self.bus.publish(Notice(self.clock.now(), "a sampling tick failed; see the log"))
            self.ticks += 1
            self._stop_event.wait(max(0.0, self.interval_s - (self.clock.now() - started)))

    def tick(self) -> None:
        t = self.clock.now()
        trees = {process: self.host.tree_pids(pid) for process, pid in self.workload_pids().items()}
        gpu_procs = {}
        nvml = self.nvml
        if nvml is not None and nvml.status.available:
            device = nvml.sample(t)
            if device is not None:
                self.bus.publish(device)
            all_pids = [p for pids in trees.values() for p in pids]
            gpu_procs = nvml.process_metrics(all_pids)
            self._check_foreign(all_pids)
        if nvml is not None and self._nvml_was_available and not nvml.status.available:
            self._nvml_was_available = False
            self.bus.publish(nvml.status)
        self.bus.publish(self.host.sample_host(t))
        for sample in self.host.sample_processes(t, trees, gpu_procs):
            self.bus.publish(sample)

    def _check_foreign(self, our_pids: list[int]) -> None:
        """Warn once when, after a grace period, NVML lists processes but never ours (PID namespace)."""
        if self._foreign_warned or not self.expect_gpu_processes or not our_pids or self.nvml is None:
            return
        if self.ticks * self.interval_s < NAMESPACE_GRACE_S:
            return
        hint = pid_namespace_hint(our_pids, self.nvml.all_gpu_pids())
        if hint:
            self._foreign_warned = True
            self.bus.publish(Notice(self.clock.now(), hint))
