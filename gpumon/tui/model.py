"""The monitor's state, fed by the bus: live figures, time-binned histories, logs, exclusive rates.

``LiveModel.handle`` is a bus subscriber (quick, any thread); ``view(now)`` builds
the immutable snapshot one refresh draws, on the refresh thread. No Textual here.
"""

from __future__ import annotations

import dataclasses
import getpass
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from gpumon.core.records.enums import JobState
from gpumon.core.jobs.beside import UNKNOWN_RATE
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.slots import SLOTS
from gpumon.core.store.others import meaningful
from gpumon.core.interference.attribution import link_capacity
from gpumon.core.interference.live import RUNNING_STATES, LiveFigures, LiveStats
from gpumon.core.interference.live_cause import Baseline, LiveCauses
from gpumon.core.records.rates import interference
from gpumon.core.records.model import (
    DeviceSample,
    GpuOthers,
    GpuOverview,
    GpuSummary,
    HostSample,
    LogLine,
    NO_STEPS,
    NO_STEPS_WITHDRAWN,
    Notice,
    ProcessSample,
    RingBuffer,
    SourceStatus,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
)
from gpumon.tui.series import BinnedSeries, nice_ceiling
from gpumon.tui.view import DeviceView, ProcessRow, Series, View, WorkloadView

NAN = math.nan
BIN_S = 1.0
HISTORY_BINS = 240
LOG_LINES = 200
NOTICES = 20
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


def current_user() -> str | None:
    """Who runs gpumon (and so its jobs); None when the UID has no name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def link_bps(gpu: GpuInfo | None) -> float:
    """The PCIe link's one-way capacity in bytes/s: run.json's ``pcie_max_bps``, else its gen x width; NaN if unknown."""
    gpu = gpu or GpuInfo()
    return link_capacity(gpu.pcie_max_bps, None, gpu.pcie_gen, gpu.pcie_width).capacity_bps


def gpm_fields(gpu: GpuInfo | None) -> tuple[str, ...]:
    """The DeviceSample fields GPM reports on this GPU (run.json ``gpm_metrics``; none in older runs)."""
    return gpu.gpm_metrics if gpu is not None else ()


@dataclass
class _Slot:
    """Mutable per-slot state, written by bus threads, read by the refresh thread, both under ``LiveModel._lock``."""

    iter_rate: BinnedSeries
    sample_rate: BinnedSeries
    log: RingBuffer[str]
    spec: str = ""
    state: WorkloadState | None = None
    start_t: float = NAN
    last_step: StepEvent | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    no_steps: str = (
        ""  # the NO_STEPS notice's words: a command that works and takes no step the probe sees
    )


class LiveModel:
    """Everything the monitor needs from the bus; ``wake`` is set on every item it takes."""

    # what ``handle`` takes (Bus.subscribe): not the LiveNow records a refresh's own view() publishes, which would
    # wake the refresh thread again for nothing
    TAKES = (
        StepEvent,
        DeviceSample,
        HostSample,
        ProcessSample,
        LogLine,
        WorkloadState,
        WorkloadMeta,
        SourceStatus,
        Notice,
        GpuOthers,
        GpuOverview,
    )

    def __init__(
        self,
        bin_s: float = BIN_S,
        history: int = HISTORY_BINS,
        log_lines: int = LOG_LINES,
        jobs_user: str | None = None,
        live: LiveStats | None = None,
    ) -> None:
        """``jobs_user``: whose our jobs are in the process table (None: not known, as in a replay). ``live``: the live
        computation of the bus this model is fed from (a session's, ``Session.live``); None: the model's feed has no
        other (a replay, a followed run), so the model keeps that bus's one and feeds it itself."""
        self.jobs_user = jobs_user
        self.bin_s = bin_s
        self.history = history
        self._feeds_live = live is None
        self.live = live if live is not None else LiveStats()
        self.wake = threading.Event()
        self.nvml = SourceStatus("nvml", False, "unavailable: not started yet")
        self.gpu: GpuInfo | None = None
        self.baselines: dict[str, tuple[float, str]] = {}
        self.causes = LiveCauses({})
        self.predicted = (
            ""  # gpumon predict's answer from the two --baseline runs, shown beside the measured
        )
        self.device: DeviceSample | None = None
        self.host: HostSample | None = None
        self.notices: RingBuffer[Notice] = RingBuffer(NOTICES)
        self.notice_total = 0
        self.others: GpuOthers | None = None
        self.overview: GpuOverview | None = (
            None  # every GPU of a box with several (the sampler's, every 0.5 s)
        )
        self.shown_gpu: int | None = (
            None  # the GPU index the device panel shows; None: the jobs' GPU
        )
        self._peer_series: dict[int, dict[str, BinnedSeries]] = {}
        self._device_series = {name: BinnedSeries(bin_s, history) for name in DEVICE_GRAPHS}
        self._host_cpu = BinnedSeries(bin_s, history)
        self._host_mem = BinnedSeries(bin_s, history)
        self._log_lines = log_lines
        # A slot's state is replaced when a new job starts in it, while bus threads may still be writing the last
        # steps or lines of the one before: replacing, writing and reading all hold this lock, so a writer never
        # fills a state that has just been replaced and the refresh never sees half of one.
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {slot: self._new_slot() for slot in SLOTS}

    def _new_slot(self) -> _Slot:
        return _Slot(
            BinnedSeries(self.bin_s, self.history),
            BinnedSeries(self.bin_s, self.history),
            RingBuffer(self._log_lines),
        )

    def set_spec(self, slot: str, spec: str) -> None:
        """Name what is (about to be) running in ``slot``."""
        with self._lock:
            self._slots[slot].spec = spec

    def set_baseline(
        self, slot: str, rate: float, source: str, evidence: Baseline | None = None
    ) -> None:
        """An exclusive rate from elsewhere (a ``--baseline`` run); it wins over the exclusive phase.

        ``evidence``: what that run recorded of the job alone, for the cause of its slowdown.
        """
        self.baselines[slot] = (rate, source)
        if evidence is not None:
            self.causes.set_baseline(slot, evidence)
        self.wake.set()

    # -- bus side -------------------------------------------------------------

    def handle(self, item: object) -> None:
        """Bus subscriber: file the item, then wake the refresh thread."""
        if self._feeds_live:
            self.live.handle(item)
        self.causes.handle(item)
        if isinstance(item, StepEvent):
            self._on_step(item)
        elif isinstance(item, DeviceSample):
            self._on_device(item)
        elif isinstance(item, HostSample):
            self._on_host(item)
        elif isinstance(item, LogLine):
            with self._lock:
                if item.slot in self._slots:
                    self._slots[item.slot].log.append(item.text)
        elif isinstance(item, WorkloadState):
            self._on_state(item)
        elif isinstance(item, WorkloadMeta):
            with self._lock:
                if item.slot in self._slots:
                    self._slots[item.slot].meta = dict(item.info)
        elif isinstance(item, SourceStatus) and item.name == "nvml":
            self.nvml = item
        elif isinstance(item, Notice):
            self.notices.append(item)
            self.notice_total += 1
            if item.kind in (NO_STEPS, NO_STEPS_WITHDRAWN) and item.slot in self._slots:
                self._slots[item.slot].no_steps = item.text if item.kind == NO_STEPS else ""
        elif isinstance(item, GpuOthers):
            self.others = item
        elif isinstance(item, GpuOverview):
            self._on_overview(item)
        self.wake.set()

    def _on_step(self, step: StepEvent) -> None:
        with self._lock:
            self._file_step(step)

    def _file_step(self, step: StepEvent) -> None:
        """The step in its slot's state (the lock held)."""
        slot = self._slots.get(step.slot)
        if slot is None:
            return
        previous, slot.last_step = slot.last_step, step
        if (
            previous is not None
        ):  # the graphs' rates are wall-clock too: each step over the time since the one before
            slot.iter_rate.add(step.t, 1.0, step.t - previous.t)
            slot.sample_rate.add(step.t, step.samples, step.t - previous.t)

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
        self.wake.set()
        return self.shown_gpu

    def _on_host(self, sample: HostSample) -> None:
        self.host = sample
        self._host_cpu.add(sample.t, sample.cpu_pct)
        self._host_mem.add(sample.t, sample.mem_used_mib)

    def _on_state(self, state: WorkloadState) -> None:
        with self._lock:
            self._file_state(state)

    def _file_state(self, state: WorkloadState) -> None:
        """A job's new state; a job starting in a slot gets a fresh state there (the lock held)."""
        if state.slot not in self._slots:
            return
        if state.state == "starting":
            spec = self._slots[state.slot].spec
            self._slots[state.slot] = self._new_slot()
            self._slots[state.slot].spec = spec
        slot = self._slots[state.slot]
        if state.state == JobState.RUNNING:
            slot.start_t = state.t
        slot.state = state

    # -- refresh side ---------------------------------------------------------

    def view(self, now: float, width: int = HISTORY_BINS) -> View:
        """The snapshot one refresh draws; ``width`` bins of history per graph."""
        n = min(width, self.history)
        live = self.live.now(now)
        with self._lock:
            workloads = tuple(
                self._workload_view(
                    name,
                    slot,
                    now,
                    n,
                    live.figures.get(name),
                    name in live.running,
                    live.exclusive.get(name, NAN),
                )
                for name, slot in self._slots.items()
            )
        exclusive = {w.slot: w.exclusive_rate for w in workloads}
        # two jobs running now; or none any more, after they ran together: the run's result (a replay's end)
        ended_together = not live.running and live.overlap is not None and live.overlap.duration > 0
        overlap = live.overlap if len(live.running) > 1 or ended_together else None
        result = interference(exclusive, overlap) if overlap is not None else None
        figures = {w.slot: w.figures for w in workloads if w.figures is not None}
        causes = (
            self.causes.causes(result.shared, figures, self.gpu)
            if result is not None and not result.measuring
            else {}
        )
        gpus = self._gpus(now)
        jobs = next((g for g in gpus if g.jobs), None)
        shown = next((g for g in gpus if g.index == self.shown_gpu and not g.jobs), None)
        rows = self._process_rows(now, workloads)
        if (
            shown is not None
        ):  # the table lists the jobs' GPU's processes: not shown under another GPU's panel
            rows["processes"] = ()
        return View(
            t=now,
            device=self._device_view(now, n, jobs)
            if shown is None
            else self._peer_view(shown, jobs, now, n),
            workloads=workloads,
            interference=result,
            causes=causes,
            predicted=self.predicted,
            notices=tuple(
                n.text if not n.slot else f"{n.slot}: {n.text}" for n in self.notices.snapshot()
            ),
            notice_total=self.notice_total,
            gpus=gpus,
            shown_gpu=(shown or jobs).index if jobs is not None else None,
            jobs_device=next((w.device for w in workloads if w.device), ""),
            **rows,
        )

    def _gpus(self, now: float) -> tuple[GpuSummary, ...]:
        """The overview lines: every GPU of a box with several, while NVML answers (none with one GPU).

        The jobs' GPU's line shows the newest device sample, the device panel's (the overview's is up to 0.5 s older).
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

    def _exclusive(self, name: str, phase: float) -> tuple[float, str]:
        """A ``--baseline`` run's rate, else the job's exclusive phase so far (the live computation's), else NaN."""
        if name in self.baselines:
            return self.baselines[name]
        return (phase, "exclusive phase") if not math.isnan(phase) else (NAN, "")

    def _workload_view(
        self,
        name: str,
        slot: _Slot,
        now: float,
        n: int,
        figures: LiveFigures | None,
        running: bool,
        phase: float,
    ) -> WorkloadView:
        state = slot.state
        figures = figures if state is not None else None
        label, healthy = _state_label(state, slot.last_step)
        hint = slot.no_steps if label == "starting" else ""
        exclusive, source = self._exclusive(name, phase)
        end = state.t if state is not None and state.state not in RUNNING_STATES else now
        iter_values = slot.iter_rate.values(now, n, 0.0 if running else NAN)
        sample_values = slot.sample_rate.values(now, n)
        # the scale of what the graph shows now: a fast first step that scrolled away no longer flattens the rest
        top = nice_ceiling(max(_shown_peak(iter_values), exclusive if exclusive > 0 else 0.0))
        return WorkloadView(
            slot=name,
            spec=slot.spec,
            state=NO_STEPS if hint else label,
            healthy=healthy,
            pid=state.pid if state is not None else None,
            figures=figures,
            elapsed_s=end - slot.start_t if not math.isnan(slot.start_t) else NAN,
            iter_rate=Series(iter_values, top, "it/s"),
            sample_rate=Series(
                sample_values, nice_ceiling(_shown_peak(sample_values)), "samples/s"
            ),
            exclusive_rate=exclusive,
            exclusive_source=source,
            last_step_t=slot.last_step.t if slot.last_step is not None else NAN,
            log=tuple(slot.log.snapshot()),
            hint=hint,
            device=str(slot.meta.get("device") or ""),
            meta=dict(slot.meta),
            active=running,
        )

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
        """The device panel of a GPU that is not the jobs': the overview's readings of it, every 0.5 s."""
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
            f"{listed} · read every 0.5 s; PCIe, GPM, per-process: {where} only"
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


def _shown_peak(values: tuple[float, ...]) -> float:
    """The largest of a graph's shown values (0 when none is known)."""
    return max((v for v in values if v == v), default=0.0)


def _state_label(state: WorkloadState | None, last_step: StepEvent | None) -> tuple[str, bool]:
    """The panel's state word and whether it is good news."""
    if state is None:
        return "empty", True
    if (
        state.state == JobState.RUNNING and state.attached is not None
    ):  # --beside: not ours, never signalled
        return (
            "watched, not ours" if state.attached.get("probe") else f"watched, rate {UNKNOWN_RATE}"
        ), True
    if state.state == JobState.DETACHED:
        return "detached (still running)", True
    if state.state == JobState.STARTING or (state.state == JobState.RUNNING and last_step is None):
        return "starting", True
    if state.state == JobState.RUNNING:
        return ("warm-up" if last_step is not None and last_step.warmup else "running"), True
    if state.state == JobState.EXITED:
        return f"exited {state.exit_status}", state.exit_status == 0
    if state.state == JobState.STOPPED:
        return "stopped", True
    return state.state, False
