"""The cause of each job's slowdown while both run: each baseline's evidence from its run, the shared side live.

For the live interference line (headless ``--baseline`` lines and the TUI). No
pandas, no torch; the rules are gpumon.core.interference.attribution's, the rates the
caller's (gpumon.core.records.rates).
"""

from __future__ import annotations

import math
import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from gpumon.core.interference import evidence
from gpumon.core.interference.attribution import (
    UNKNOWN,
    Attribution,
    Box,
    Job,
    Side,
    attribute_pair,
    link_capacity,
)
from gpumon.core.interference.live import LiveFigures
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import DeviceSample, HostSample, SourceStatus, WorkloadMeta
from gpumon.core.interference.sentence import JobWords, job_words, labels
from gpumon.core.store.trace import load_run

NAN = math.nan
WINDOW_S = 5.0


@dataclass(frozen=True)
class Baseline:
    """A job alone, as its ``--baseline`` run recorded it: evidence, the device it ran on, the run's name."""

    side: Side
    device: str
    run: str


def load_baseline(slot: str, path: str | Path, rate: float) -> Baseline:
    """The evidence of ``slot`` (or the run's only job) over its post-warm-up steps; its step is ``1 / rate``."""
    run = load_run(path)
    slots = sorted({w.slot for w in run.workloads})
    own = slot if slot in slots else (slots[0] if len(slots) == 1 else slot)
    steps = run.steps()  # pandas and its cache: run_side reads the same table
    times = steps.loc[(steps["process"] == own) & (steps["warmup"] != 1), "t"]
    step_s = 1 / rate if rate > 0 else NAN
    window = (
        evidence.Window(run, own, float(times.min()), float(times.max())) if len(times) else None
    )
    side = evidence.run_side(window, step_s) if window is not None else Side(step_s)
    return Baseline(side, evidence.device_of(run), run.path.name)


class DeviceWindow:
    """Means of the device and host samples of the last ``window_s`` seconds (a bus subscriber)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._device: deque[DeviceSample] = deque()
        self._host: deque[HostSample] = deque()
        self._lock = threading.Lock()

    def handle(self, item: object) -> None:
        if isinstance(item, DeviceSample):
            with self._lock:
                self._device.append(item)
                _trim(self._device, item.t - self.window_s)
        elif isinstance(item, HostSample):
            with self._lock:
                self._host.append(item)
                _trim(self._host, item.t - self.window_s)

    def means(self) -> dict[str, float]:
        """Mean of each device field (``evidence.DEVICE_FIELDS`` names) and ``host_cpu_pct``; NaN when unseen."""
        with self._lock:
            device, host = list(self._device), list(self._host)
        out = {
            name: _mean(getattr(s, column, NAN) for s in device)
            for name, column in evidence.DEVICE_FIELDS.items()
        }
        out["host_cpu_pct"] = _mean(s.cpu_pct for s in host)
        return out


def _trim(items: deque, oldest: float) -> None:
    while items and items[0].t < oldest:
        items.popleft()


def _mean(values: Any) -> float:
    known = [float(v) for v in values if v is not None and not math.isnan(v)]
    return sum(known) / len(known) if known else NAN


def shared_side(
    rate: float,
    copy_bytes_per_s: float,
    copy_bandwidth: float,
    cpu_pct: float,
    means: Mapping[str, float],
) -> Side:
    """A job's side now: its shared rate, its copies over the live window, its CPU, the device and host means."""
    step_s = 1 / rate if rate > 0 else NAN
    bytes_per_step = copy_bytes_per_s * step_s if copy_bytes_per_s >= 0 else NAN
    copy_s = (
        bytes_per_step / copy_bandwidth
        if copy_bandwidth > 0
        else (0.0 if bytes_per_step == 0 else NAN)
    )
    return Side(step_s=step_s, copy_s=copy_s, copy_bytes=bytes_per_step, cpu_pct=cpu_pct, **means)


def live_box(device: str, nvml_available: bool, gpu: GpuInfo | None) -> Box:
    """The machine now: the device the jobs said they train on, NVML, the link from NVML's device info."""
    gpu = gpu or GpuInfo()
    return Box(
        device=device,
        nvml=nvml_available,
        link=link_capacity(gpu.pcie_max_bps, None, gpu.pcie_gen, gpu.pcie_width),
        host_cpus=os.cpu_count() or 0,
        pcie_method=gpu.pcie_method,
    )


def live_causes(
    baselines: Mapping[str, Baseline],
    shared: Mapping[str, Side],
    cores: Mapping[str, frozenset[int]],
    box: Box,
) -> dict[str, Attribution]:
    """The cause per job with a baseline; a baseline from another kind of device cannot be compared."""
    jobs = [
        Job(slot, baselines[slot].side, side, cores.get(slot, frozenset()))
        for slot, side in sorted(shared.items())
        if slot in baselines
    ]
    if not jobs:
        return {}
    found = attribute_pair(jobs[0], jobs[1] if len(jobs) > 1 else None, box)
    for slot, baseline in baselines.items():
        if slot in found and baseline.device.split(":")[0] != box.device.split(":")[0]:
            found[slot] = Attribution(
                slot,
                UNKNOWN,
                {},
                NAN,
                f"cannot tell: baseline {baseline.run} ran on {baseline.device}, "
                f"this run on {box.device}",
                "",
            )
    return found


class LiveCauses:
    """What the live line needs for each job's cause: baselines' evidence, device means, who runs where.

    Subscribe ``handle`` to the bus; call ``causes`` at each refresh once both jobs have a shared rate.
    """

    TAKES = (
        DeviceSample,
        HostSample,
        WorkloadMeta,
        SourceStatus,
    )  # what ``handle`` reads (Bus.subscribe)

    def __init__(self, baselines: Mapping[str, Baseline], window_s: float = WINDOW_S) -> None:
        self.baselines = dict(baselines)
        self.window = DeviceWindow(window_s)
        self._meta: dict[str, dict[str, Any]] = {}
        self._nvml = False

    def set_baseline(self, slot: str, baseline: Baseline) -> None:
        self.baselines[slot] = baseline

    def handle(self, item: object) -> None:
        if isinstance(item, WorkloadMeta):
            self._meta[item.slot] = dict(item.info)
        elif isinstance(item, SourceStatus) and item.name == "nvml":
            self._nvml = item.available
        else:
            self.window.handle(item)

    def device(self) -> str:
        """The device the jobs said they train on (``?`` before any said)."""
        found = [str(m.get("device")) for m in self._meta.values() if m.get("device")]
        return found[0] if found else "?"

    def causes(
        self,
        shared_rates: Mapping[str, float],
        figures: Mapping[str, LiveFigures],
        gpu: GpuInfo | None,
    ) -> dict[str, Attribution]:
        """The cause per job with a baseline and a shared rate ({} without baselines)."""
        shared_rates = {slot: r for slot, r in shared_rates.items() if r > 0}
        if not self.baselines or not shared_rates:
            return {}
        means = self.window.means()
        shared = {
            slot: shared_side(
                rate,
                figures[slot].copy_bytes_per_s,
                figures[slot].copy_bandwidth,
                figures[slot].cpu_pct,
                means,
            )
            for slot, rate in shared_rates.items()
            if slot in figures
        }
        cores = {slot: evidence.cores(meta) for slot, meta in self._meta.items()}
        return live_causes(self.baselines, shared, cores, live_box(self.device(), self._nvml, gpu))


def cause_words(
    specs: Mapping[str, str], slowdown: Mapping[str, float], causes: Mapping[str, Attribution]
) -> str:
    """Each job's slowdown and cause in the verdict's words: ``fcn runs 1.7x slower, mostly waiting for the GPU``.

    Jobs without a slowdown yet (no baseline, or no shared rate) are left out.
    """
    slots = sorted(slowdown)
    shown = dict(zip(slots, labels([specs.get(s, s).split(":")[0] for s in slots], slots)))
    words = []
    for slot in slots:
        if math.isnan(slowdown[slot]):
            continue
        other = next((shown[o] for o in slots if o != slot), "")
        words.append(job_words(JobWords(shown[slot], other, slowdown[slot], causes.get(slot))))
    return "; ".join(words)
