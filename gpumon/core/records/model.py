"""Frozen sample and event records that flow from sources over the bus, and a ring buffer."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, Iterator, TypeVar

NAN = math.nan

STEP_COLUMNS = (
    "process",
    "pid",
    "step",
    "t",
    "iter_s",
    "samples",
    "warmup",
    "copy_bytes",
    "copy_s",
)
DEVICE_COLUMNS = (
    "t",
    "gpu_util",
    "mem_util",
    "mem_used_mib",
    "mem_total_mib",
    "pcie_rx_bps",
    "pcie_tx_bps",
    "power_w",
    "temp_c",
    "sm_clock_mhz",
    "sm_active_pct",
    "sm_occupancy_pct",
    "dram_bw_pct",
    "tensor_active_pct",
)
# Hopper's GPM columns, added after the first runs were recorded: older device.csv files lack them.
GPM_COLUMNS = DEVICE_COLUMNS[-4:]
PROCESS_COLUMNS = (
    "t",
    "process",
    "pid",
    "cpu_pct",
    "rss_mib",
    "threads",
    "gpu_mem_mib",
    "gpu_sm_util",
)
HOST_COLUMNS = (
    "t",
    "cpu_pct",
    "mem_used_mib",
    "mem_total_mib",
    "per_core",
)  # per_core: "12.5 97.0" (% each core)
# gpu_others.csv: the GPU processes that were not our jobs, one row per process per process tick.
OTHER_COLUMNS = (
    "t",
    "pid",
    "user",
    "command",
    "gpu_mem_mib",
    "sm_pct",
    "cpu_pct",
    "rss_mib",
    "elapsed_s",
)
# Every recorded steps.csv and processes.csv names a job's slot in its "process" column (old runs must still read);
# the records call it ``slot``. Every other column is its record's field of the same name.
SLOT_COLUMN = "process"


def field_of(column: str) -> str:
    """The record field a CSV column holds."""
    return "slot" if column == SLOT_COLUMN else column


@dataclass(slots=True)
class StepEvent:
    """One training step of one workload; ``t`` is seconds since the run's t0 (CLOCK_MONOTONIC).

    Read-only by convention, not frozen: hundreds are built a second (and every row of a replayed capture), and a
    frozen dataclass costs five times as much to build (0.66 against 0.13 µs on the 2-core VM)."""

    slot: str
    pid: int
    step: int
    t: float
    iter_s: float
    samples: float = NAN
    warmup: bool = False
    copy_bytes: int = 0
    copy_s: float = NAN

    @property
    def copy_bandwidth(self) -> float:
        """Bytes per second of the copy itself (NaN without a timed copy)."""
        if self.copy_bytes and self.copy_s and self.copy_s > 0:
            return self.copy_bytes / self.copy_s
        return NAN


@dataclass(slots=True)
class StepBatch:
    """Steps of one job that reach the bus together, in order: what the bus carries for steps.

    A probe message's rows are one batch (~25 steps at 250 steps/s: one publish, and each subscriber's
    work is per message, not per step); a replayed or followed step is a batch of one (``StepBatch.of``). Read-only
    by convention, not frozen, as StepEvent: a replay builds one a step."""

    slot: str
    steps: tuple[StepEvent, ...]  # never empty

    @classmethod
    def of(cls, step: StepEvent) -> "StepBatch":
        return cls(step.slot, (step,))


def on_bus(record: object) -> object:
    """What the bus carries for a record read back from a table: a step as a batch of one, the others as they are."""
    return StepBatch.of(record) if type(record) is StepEvent else record


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One NVML reading of one GPU; NaN where the driver does not report a field.

    The ``*_pct`` fields after ``sm_clock_mhz`` come from GPM (Hopper and newer) over the
    interval since the previous reading: fraction of SMs busy, warps resident vs the maximum,
    DRAM bandwidth used vs peak, tensor-core activity (a slower window: docs/nvml.md).
    """

    t: float
    gpu_util: float = NAN
    mem_util: float = NAN
    mem_used_mib: float = NAN
    mem_total_mib: float = NAN
    pcie_rx_bps: float = NAN
    pcie_tx_bps: float = NAN
    power_w: float = NAN
    temp_c: float = NAN
    sm_clock_mhz: float = NAN
    sm_active_pct: float = NAN
    sm_occupancy_pct: float = NAN
    dram_bw_pct: float = NAN
    tensor_active_pct: float = NAN


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """Resource use of one workload's process tree at one tick."""

    t: float
    slot: str
    pid: int
    cpu_pct: float
    rss_mib: float
    threads: int
    gpu_mem_mib: float = NAN
    gpu_sm_util: float = NAN


@dataclass(frozen=True, slots=True)
class HostSample:
    """Whole-host CPU and memory at one tick; ``per_core``: each core's CPU %, in core order."""

    t: float
    cpu_pct: float
    mem_used_mib: float
    mem_total_mib: float
    per_core: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuProcessMetrics:
    """What NVML knows of one PID: memory and SM utilisation (NaN when unknown)."""

    pid: int
    gpu_mem_mib: float = NAN
    gpu_sm_util: float = NAN


@dataclass(frozen=True, slots=True)
class OtherGpuProcess:
    """A process on the watched GPU that is not one of our jobs: NVML's view plus what /proc shows.

    ``user`` and ``command`` are None and the host fields NaN where /proc cannot see the PID
    (another PID namespace): listed with what is known, never guessed.
    """

    t: float
    pid: int
    gpu_mem_mib: float = NAN
    sm_pct: float = NAN
    user: str | None = None
    command: str | None = None
    cpu_pct: float = NAN
    rss_mib: float = NAN
    elapsed_s: float = NAN

    @property
    def visible(self) -> bool:
        """Whether /proc showed this PID (False: a PID namespace hides it)."""
        return self.command is not None


@dataclass(frozen=True, slots=True)
class GpuOthers:
    """Every GPU process that is not one of our jobs at one process tick (empty: the GPU is ours alone)."""

    t: float
    processes: tuple[OtherGpuProcess, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuSummary:
    """One GPU of a box with several, at one overview tick.

    ``sample`` is the jobs' GPU's DeviceSample of that tick (``jobs``), or, for another GPU, its
    utilisation, memory, power, temperature and SM clock read at the overview cadence (PCIe and GPM
    NaN: they are read on the jobs' GPU only); None once that GPU is lost. ``processes``: how many
    PIDs NVML lists on it (None when the list cannot be read).
    """

    index: int
    name: str | None
    uuid: str | None
    sample: DeviceSample | None
    processes: int | None
    jobs: bool = False


@dataclass(frozen=True, slots=True)
class GpuOverview:
    """Every GPU NVML lists, at one process tick; published only where there is more than one."""

    t: float
    gpus: tuple[GpuSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """Whether a source can deliver data, and if not, why (one line for the user)."""

    name: str
    available: bool
    reason: str = ""
    detail: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorkloadState:
    """A workload's lifecycle change: starting, running, exited (with status and stderr tail).

    A launched job is "running" with ``job`` (its spec, kind and argv, for run.json: a capture started
    before the launch knows nothing else of it). An attached process (``--beside``) is "running" with
    ``attached`` (what run.json records of it) and ends "exited" (by itself, status unknown) or "detached"
    (gpumon let go of it; it still runs).
    """

    slot: str
    state: str
    t: float
    pid: int | None = None
    exit_status: int | None = None
    tail: str = ""
    attached: dict | None = None
    job: dict | None = None


# The states a workload ends in.
ENDED_STATES = ("exited", "stopped", "failed", "detached")


T = TypeVar("T")


class RingBuffer(Generic[T]):
    """A bounded, thread-safe history of the last ``capacity`` items."""

    def __init__(self, capacity: int) -> None:
        self._items: deque[T] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def append(self, item: T) -> None:
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[T]:
        with self._lock:
            return list(self._items)

    def last(self) -> T | None:
        with self._lock:
            return self._items[-1] if self._items else None

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self.snapshot())


@dataclass(frozen=True, slots=True)
class WorkloadMeta:
    """What a workload said about itself through ``probe.meta()`` (model, device, batch...)."""

    slot: str
    pid: int
    info: dict


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a workload's merged stdout/stderr."""

    slot: str
    t: float
    text: str


# Notice.kind: a capture thread (the probe listener) died; the run ends failed with this notice's text as the reason
THREAD_DIED = "thread died"
NO_STEPS = "no steps"  # Notice.kind: a launched command uses CPU but takes no step (core/capture/nosteps.py)
NO_STEPS_WITHDRAWN = "no steps withdrawn"  # Notice.kind: steps arrived after a NO_STEPS notice


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know that is not a sample (a dropped batch, a protocol mismatch); ``kind`` names
    the notices a front end shows beyond the line itself (NO_STEPS: in the job's panel)."""

    t: float
    text: str
    slot: str | None = None
    kind: str = ""
