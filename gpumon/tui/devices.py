"""The monitor's GPU and host side, fed by the bus: the jobs' GPU, the host, the box's other GPUs, the process
table, and the device panel each refresh draws. No Textual here."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from gpumon.core.interference.attribution import link_capacity
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import (
    DeviceSample,
    GpuOthers,
    GpuOverview,
    GpuSummary,
    HostSample,
    SourceStatus,
)
from gpumon.core.store.others import meaningful
from gpumon.tui.series import BinnedSeries, nice_ceiling
from gpumon.tui.view import DeviceView, ProcessRow, Series, WorkloadView

NAN = math.nan
DEFAULT_LINK_BPS = 15.75e9
OTHERS_STALE_S = (
    3.0  # a list of other GPU processes older than this is no longer shown (NVML went away)
)
DEVICE_GRAPHS = (
    "gpu_util",
    "mem_util",
    "mem_used_mib",
    "pcie_rx_bps",
    "pcie_tx_bps",
    "power_w",
    "temp_c",
)
# What the overview reads of a GPU that is not the jobs' (no PCIe: it is read on the jobs' GPU only).
PEER_GRAPHS = ("gpu_util", "mem_util", "mem_used_mib", "power_w", "temp_c")


def link_bps(gpu: GpuInfo | None) -> float:
    """The PCIe link's one-way capacity in bytes/s: run.json's ``pcie_max_bps``, else its gen x width; NaN if unknown."""
    gpu = gpu or GpuInfo()
    return link_capacity(gpu.pcie_max_bps, None, gpu.pcie_gen, gpu.pcie_width).capacity_bps


def gpm_fields(gpu: GpuInfo | None) -> tuple[str, ...]:
    """The DeviceSample fields GPM reports on this GPU (run.json ``gpm_metrics``; none in older runs)."""
    return gpu.gpm_metrics if gpu is not None else ()


class Devices:
    """The GPUs and the host as the bus reports them, and their histories; ``shown_gpu`` picks the device panel's
    GPU (None: the jobs')."""

    def __init__(self, bin_s: float, history: int, jobs_user: str | None) -> None:
        self.bin_s = bin_s
        self.history = history
        self.jobs_user = jobs_user
        self.nvml = SourceStatus("nvml", False, "unavailable: not started yet")
        self.gpu: GpuInfo | None = None
        self.device: DeviceSample | None = None
        self.host: HostSample | None = None
        self.others: GpuOthers | None = None
        self.overview: GpuOverview | None = (
            None  # every GPU of a box with several (the sampler's, every second)
        )
        self.shown_gpu: int | None = (
            None  # the GPU index the device panel shows; None: the jobs' GPU
        )
        self._peer_series: dict[int, dict[str, BinnedSeries]] = {}
        self._device_series = {name: BinnedSeries(bin_s, history) for name in DEVICE_GRAPHS}
        self._host_cpu = BinnedSeries(bin_s, history)
        self._host_mem = BinnedSeries(bin_s, history)

    # -- bus side -------------------------------------------------------------

    def handle(self, item: object) -> None:
        """File a device, host, NVML status, other processes or overview item; ignore the rest."""
        if isinstance(item, DeviceSample):
            self._on_device(item)
        elif isinstance(item, HostSample):
            self._on_host(item)
        elif isinstance(item, SourceStatus) and item.name == "nvml":
            self.nvml = item
        elif isinstance(item, GpuOthers):
            self.others = item
        elif isinstance(item, GpuOverview):
            self._on_overview(item)

    def _on_device(self, sample: DeviceSample) -> None:
        self.device = sample
        for name, series in self._device_series.items():
            series.add(sample.t, getattr(sample, name))

    def _on_overview(self, overview: GpuOverview) -> None:
        """Keep the latest overview, and the history of the GPUs that are not the jobs' (theirs is the device's)."""
        self.overview = overview
        for gpu in overview.gpus:
            if gpu.jobs or gpu.sample is None:
                continue
            series = self._peer_series.get(gpu.index)
            if series is None:
                series = self._peer_series[gpu.index] = {
                    name: BinnedSeries(self.bin_s, self.history) for name in PEER_GRAPHS
                }
            for name, history in series.items():
                history.add(gpu.sample.t, getattr(gpu.sample, name))

    def _on_host(self, sample: HostSample) -> None:
        self.host = sample
        self._host_cpu.add(sample.t, sample.cpu_pct)
        self._host_mem.add(sample.t, sample.mem_used_mib)

    def next_gpu(self) -> int | None:
        """Show the next GPU of the box in the device panel (after the last, the first); its index, None with one GPU."""
        gpus = self.overview.gpus if self.overview is not None else ()
        if len(gpus) < 2:
            return None
        indices = [gpu.index for gpu in gpus]
        current = (
            self.shown_gpu if self.shown_gpu in indices else next(g.index for g in gpus if g.jobs)
        )
        self.shown_gpu = indices[(indices.index(current) + 1) % len(indices)]
        return self.shown_gpu

    # -- refresh side ---------------------------------------------------------

    def view(self, now: float, n: int, workloads: tuple[WorkloadView, ...]) -> dict[str, Any]:
        """The View's device side: the device panel, the GPU overview, the shown GPU and the process table."""
        gpus = self._gpus(now)
        jobs = next((g for g in gpus if g.jobs), None)
        shown = next((g for g in gpus if g.index == self.shown_gpu and not g.jobs), None)
        rows = self._process_rows(now, workloads)
        if (
            shown is not None
        ):  # the table lists the jobs' GPU's processes: not shown under another GPU's panel
            rows["processes"] = ()
        return dict(
            device=self._device_view(now, n, jobs)
            if shown is None
            else self._peer_view(shown, jobs, now, n),
            gpus=gpus,
            shown_gpu=(shown or jobs).index if jobs is not None else None,
            **rows,
        )

    def _gpus(self, now: float) -> tuple[GpuSummary, ...]:
        """The overview lines: every GPU of a box with several, while NVML answers (none with one GPU).

        The jobs' GPU's line shows the newest device sample, the device panel's (the overview's is up to 1 s older).
        """
        overview = self.overview
        if (
            overview is None
            or now - overview.t > OTHERS_STALE_S
            or not any(g.jobs for g in overview.gpus)
        ):
            return ()
        device = self.device
        newer = device is not None and all(
            device.t > g.sample.t for g in overview.gpus if g.jobs and g.sample
        )
        return tuple(
            dataclasses.replace(g, sample=device) if g.jobs and newer else g for g in overview.gpus
        )

    def _process_rows(self, now: float, workloads: tuple[WorkloadView, ...]) -> dict[str, Any]:
        """The process table: our running jobs (A, B), then every other process NVML lists, by GPU memory."""
        if not self.nvml.available:
            return {}
        ours = [
            ProcessRow(
                w.slot,
                w.pid,
                self.jobs_user,
                w.figures.gpu_mem_mib,
                w.figures.gpu_sm_util,
                w.figures.cpu_pct,
                w.figures.rss_mib,
                w.elapsed_s,
                w.spec,
                w.figures.iter_per_s,
            )
            for w in workloads
            if w.active and w.pid is not None and w.figures is not None
        ]
        seen = self.others
        others = seen.processes if seen is not None and now - seen.t <= OTHERS_STALE_S else ()
        rows = ours + [
            ProcessRow(
                "",
                o.pid,
                o.user,
                o.gpu_mem_mib,
                o.sm_pct,
                o.cpu_pct,
                o.rss_mib,
                o.elapsed_s,
                o.command,
            )
            for o in others
        ]
        busy = sum(1 for o in others if meaningful(o.sm_pct, o.gpu_mem_mib))
        return {"processes": tuple(rows), "others_on_gpu": busy}

    @staticmethod
    def _graphs(
        series: dict[str, BinnedSeries],
        sample: DeviceSample | None,
        top_link: float,
        now: float,
        n: int,
    ) -> dict[str, Series]:
        """A GPU's graphs on their fixed scales: percentages and temperature 0-100, memory 0-total, PCIe 0-link."""
        total = sample.mem_total_mib if sample is not None and sample.mem_total_mib > 0 else NAN
        tops = {
            "gpu_util": 100.0,
            "mem_util": 100.0,
            "mem_used_mib": total
            if not math.isnan(total)
            else nice_ceiling(series["mem_used_mib"].peak),
            "pcie_rx_bps": top_link,
            "pcie_tx_bps": top_link,
            "power_w": nice_ceiling(max(100.0, series["power_w"].peak)),
            "temp_c": 100.0,
        }
        return {
            name: Series(history.values(now, n), tops[name]) for name, history in series.items()
        }

    def _peer_view(
        self, gpu: GpuSummary, jobs: GpuSummary | None, now: float, n: int
    ) -> DeviceView:
        """The device panel of a GPU that is not the jobs': the overview's readings of it, every second."""
        series = self._peer_series.get(gpu.index)
        graphs = self._graphs(series, gpu.sample, NAN, now, n) if series is not None else {}
        count = gpu.processes
        listed = (
            "processes: unknown"
            if count is None
            else f"{count} process{'es' if count != 1 else ''}"
        )
        where = f"jobs' GPU {jobs.index}" if jobs is not None else "jobs' GPU"
        note = (
            f"{listed} · read every second; PCIe, GPM, per-process: {where} only"
            if gpu.sample is not None
            else "lost: NVML no longer answers for this GPU"
        )
        title = f"GPU {gpu.index} · {gpu.name or 'GPU'} · not the jobs' GPU"
        return DeviceView(True, "", title, gpu.sample, self.host, graphs, note=note)

    def _device_view(self, now: float, n: int, jobs: GpuSummary | None = None) -> DeviceView:
        """The jobs' GPU (``jobs``: its overview line, on a box with several), else the host without NVML."""
        graphs: dict[str, Series] = {}
        if self.nvml.available:
            sample = self.device
            link = link_bps(self.gpu)
            graphs = self._graphs(
                self._device_series, sample, link if link > 0 else DEFAULT_LINK_BPS, now, n
            )
            name = (self.gpu.name if self.gpu is not None else None) or "GPU"
            if jobs is not None:
                name = f"GPU {jobs.index} · {name} · the jobs' GPU"
            link_pct = (
                (100 * sample.pcie_rx_bps / link, 100 * sample.pcie_tx_bps / link)
                if sample is not None
                else (NAN, NAN)
            )
            return DeviceView(
                True,
                self.nvml.reason,
                name,
                sample,
                self.host,
                graphs,
                gpm_fields(self.gpu),
                *link_pct,
            )
        else:
            host = self.host
            graphs["cpu_pct"] = Series(self._host_cpu.values(now, n), 100.0, "%")
            total = host.mem_total_mib if host is not None else nice_ceiling(self._host_mem.peak)
            graphs["mem_used_mib"] = Series(self._host_mem.values(now, n), total)
            name = "host"
        return DeviceView(
            self.nvml.available, self.nvml.reason, name, self.device, self.host, graphs
        )
