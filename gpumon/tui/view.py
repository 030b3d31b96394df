"""What one screen refresh shows: immutable snapshots computed off the UI thread."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpumon.core.interference.attribution import Attribution
from gpumon.core.interference.live import LiveFigures
from gpumon.core.records.model import DeviceSample, GpuSummary, HostSample
from gpumon.core.records.rates import Interference

NAN = math.nan


@dataclass(frozen=True)
class Series:
    """A graph's values (oldest first, one per time bin) on a fixed scale from 0 to ``top``."""

    values: tuple[float, ...]
    top: float
    unit: str = ""


@dataclass(frozen=True)
class DeviceView:
    """The device panel: NVML figures, or the host's CPU and memory when NVML is unavailable.

    ``gpm`` names the DeviceSample fields Hopper's GPM reports (empty without GPM); ``link_*_pct``
    is PCIe RX/TX as a percentage of the link's capacity (NaN when unknown). ``note``: a GPU that is
    not the jobs' says, instead of the GPM figures, what is and is not read of it.
    """

    nvml_available: bool
    reason: str
    name: str
    sample: DeviceSample | None
    host: HostSample | None
    graphs: dict[str, Series]
    gpm: tuple[str, ...] = ()
    link_rx_pct: float = NAN
    link_tx_pct: float = NAN
    note: str = ""


@dataclass(frozen=True)
class ProcessRow:
    """One line of the process table: a GPU process, one of our jobs (``mark`` A/B) or another's (``mark`` "").

    ``user``/``command`` None and the host fields NaN: /proc cannot see it (a PID namespace).
    ``iter_rate``: its live iterations/s where something measures it (our jobs), else NaN.
    """

    mark: str
    pid: int
    user: str | None
    gpu_mem_mib: float
    sm_pct: float
    cpu_pct: float
    rss_mib: float
    elapsed_s: float
    command: str | None
    iter_rate: float = NAN


@dataclass(frozen=True)
class WorkloadView:
    """One slot's panel."""

    slot: str
    spec: str
    state: str
    healthy: bool
    pid: int | None
    figures: LiveFigures | None
    elapsed_s: float
    iter_rate: Series
    sample_rate: Series
    exclusive_rate: float
    exclusive_source: str
    last_step_t: float
    log: tuple[str, ...]
    hint: str = ""  # why a running job shows no rate (state "no steps"), with what to do
    device: str = ""  # what the job said it trains on (cpu, cuda:0; "" not said): on the CPU a copy is a memcpy
    meta: dict = field(
        default_factory=dict
    )  # what the job said of itself (counts: "optimizer steps", micro_batches)
    # the job runs now: one of the live computation's running jobs (LiveNow.running), whatever word its state shows
    # (a process watched with --beside reads "watched, not ours" and runs)
    active: bool = False

    @property
    def empty(self) -> bool:
        return self.state == "empty"


@dataclass(frozen=True)
class View:
    """Everything the monitor shows at run time ``t``."""

    t: float
    device: DeviceView
    workloads: tuple[WorkloadView, ...]
    interference: Interference | None
    notices: tuple[str, ...]
    notice_total: int = 0
    causes: dict[str, Attribution] = field(default_factory=dict)
    processes: tuple[
        ProcessRow, ...
    ] = ()  # every process on the GPU: ours first, then the others by GPU memory
    others_on_gpu: int = (
        0  # other processes using the GPU meaningfully now (core/store/others.py's rule)
    )
    predicted: str = ""  # the prediction from the --baseline runs (gpumon predict), "" without both
    jobs_device: str = (
        ""  # what the jobs said they train on ("" none said yet): on the CPU they share its cores
    )
    gpus: tuple[
        GpuSummary, ...
    ] = ()  # one overview line per GPU of a box with several; () with one
    shown_gpu: int | None = None  # the index of the GPU in the device panel (with several GPUs)

    def new_notices(self, seen: int) -> tuple[str, ...]:
        """The notices after the first ``seen`` (as many as are still kept)."""
        fresh = self.notice_total - seen
        return self.notices[-fresh:] if fresh > 0 else ()

    def workload(self, slot: str) -> WorkloadView:
        return next(w for w in self.workloads if w.slot == slot)
