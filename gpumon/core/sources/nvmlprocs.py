"""Every process on the jobs' GPU: its GPU memory (the process lists) and SM share (per-process utilisation).

Per-process utilisation is a buffer of driver samples: it is read once a second with the last-seen timestamp, so
nothing is lost, and each PID's share is the mean of its samples, all clamped together to the device's GPU
utilisation over the same ticks (docs/nvml.md).
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Callable

from gpumon.core.records.model import NAN, GpuProcessMetrics
from gpumon.core.sources.nvmlquery import NA, NOT_FOUND, Cadence, Device, Query, mib

# Per-process utilisation is read this often (run-time seconds); it costs ~2,300 µs per call on the H100.
PROCESS_UTIL_PERIOD_S = 1.0
# The SM shares of every process on the device (ours and the others) at one instant may exceed
# the device's GPU util by this much (points) before they are all scaled down to it (NVML's per-process and device
# samples are taken apart).
SM_SUM_TOLERANCE_PCT = 5.0
# Device GPU-util readings kept for that comparison (the ticks since the last per-process read).
DEVICE_UTIL_KEPT = 600


def listed(
    q: Query, fns: dict[str, tuple[Callable, ...]], handle: object
) -> dict[int, float] | None:
    """PID → used GPU memory (MiB, NaN if N/A) over the compute and graphics lists; None when neither answers."""
    found: dict[int, float] = {}
    answered = False
    for kind, key in (("Compute", "compute_processes"), ("Graphics", "graphics_processes")):
        procs = q(key, fns[kind], handle)
        if procs is NA:
            continue
        answered = True
        for p in procs:
            used = mib(p.usedGpuMemory)
            if math.isnan(found.get(p.pid, NAN)):
                found[p.pid] = used
            elif not math.isnan(used):
                found[p.pid] = max(found[p.pid], used)
    return found if answered else None


def clamp_to_device(sm: dict[int, float], device_util: float) -> dict[int, float]:
    """Per-process SM %, scaled down together to ``device_util`` when their sum exceeds it by > tolerance."""
    total = sum(v for v in sm.values() if not math.isnan(v))
    if math.isnan(device_util) or total <= device_util + SM_SUM_TOLERANCE_PCT:
        return dict(sm)
    scale = device_util / total
    return {pid: value * scale for pid, value in sm.items()}


class ProcessReader:
    """GPU memory and SM share of every process on the jobs' GPU."""

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self._last_seen_us = time.time_ns() // 1000 - int(PROCESS_UTIL_PERIOD_S * 1e6)
        # 0.9: the sampler's 1 s process ticks drift by milliseconds; a read is due every tick
        self._cadence = Cadence(PROCESS_UTIL_PERIOD_S, slack=0.9)
        self._device_util: deque[float] = deque(maxlen=DEVICE_UTIL_KEPT)
        self._sm_util: dict[int, float] = {}

    def probe(self) -> None:
        """Query the lists and the utilisation once, so that what is unsupported is known before sampling."""
        q, h = self.dev.q, self.dev.handle
        q("compute_processes", self.dev.calls.processes["Compute"], h)
        q("process_utilization", self.dev.calls.process_utilization, h, self._last_seen_us)

    def note_device_util(self, gpu_util: float) -> None:
        """A tick's device GPU utilisation, for the clamp of the next per-process read."""
        if not math.isnan(gpu_util):
            self._device_util.append(gpu_util)

    def running(self) -> dict[int, float]:
        """PID → used GPU memory (MiB, NaN if N/A) over the compute and graphics lists."""
        return listed(self.dev.q, self.dev.calls.processes, self.dev.handle) or {}

    def metrics(self, t: float | None) -> dict[int, GpuProcessMetrics]:
        """GPU memory and SM use of every process NVML lists (or took a utilisation sample of).

        SM use is read at most every PROCESS_UTIL_PERIOD_S of run time ``t`` (always when t is None), and at once
        when a process appears that the last read did not cover (its share is not known yet).
        """
        running = self.running()
        if "process_utilization" not in self.dev.q.unsupported:
            newcomer = bool(running.keys() - self._sm_util.keys())
            if self._cadence.due(t, force=newcomer):
                self._update_sm_util(running)
        if self.dev.q.lost:
            return {}
        sampled = {pid for pid, sm in self._sm_util.items() if not math.isnan(sm)}
        return {
            pid: GpuProcessMetrics(pid, running.get(pid, NAN), self._sm_util.get(pid, NAN))
            for pid in running.keys() | sampled
        }

    def _update_sm_util(self, running: dict[int, float]) -> None:
        """Every utilisation sample since the last one seen: each PID's mean, all clamped together to the device."""
        q, h = self.dev.q, self.dev.handle
        samples = q(
            "process_utilization", self.dev.calls.process_utilization, h, self._last_seen_us
        )
        if samples is NA:
            no_new = q.last_error == NOT_FOUND
            quiet_us = time.time_ns() // 1000 - self._last_seen_us
            if not (no_new and quiet_us < 2 * PROCESS_UTIL_PERIOD_S * 1e6):
                # Nothing new for two periods: no process was on the SMs (or the call failed).
                self._sm_util = {pid: 0.0 for pid in running} if no_new else {}
            return
        per_pid: dict[int, list[float]] = {}
        for s in samples:
            self._last_seen_us = max(self._last_seen_us, s.timeStamp)
            # above 100 %: an invalid sample (NaN unless the PID has valid ones)
            per_pid.setdefault(s.pid, []).extend([float(s.smUtil)] if s.smUtil <= 100 else [])
        means = {pid: sum(v) / len(v) if v else NAN for pid, v in per_pid.items()}
        # A process the driver took no sample of was not on the SMs in that window (0 %, nvitop's convention).
        means.update({pid: 0.0 for pid in running if pid not in means})
        device = list(self._device_util)
        self._device_util.clear()
        if not device:
            util = q("utilization", self.dev.calls.utilization, h)
            device = [] if util is NA else [float(util[0])]
        self._sm_util = clamp_to_device(means, sum(device) / len(device) if device else NAN)
