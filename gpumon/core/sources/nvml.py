"""NVML source: the jobs' GPU (its device figures, PCIe bytes, processes) and the box's other GPUs, via pynvml.

The readers each have one job: ``DeviceReader`` (sources/nvmldevice.py: utilisation and clock every tick; memory,
power, temperature once a second), one PCIe reader per method (sources/nvmlpcie.py: GPM, the wrap-safe
counters, the throughput call; ``choose_pcie`` decides and decides again when one fails), ``ProcessReader``
(sources/nvmlprocs.py) and the other GPUs' ``Peer`` (sources/nvmlpeers.py). Every NVML call goes through
``Query`` (sources/nvmlquery.py), tolerant of every NVML error. ``pynvml`` is imported lazily in
``NvmlSource.open()``. Details: docs/nvml.md.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from types import ModuleType
from typing import Callable, Iterable

from gpumon.core.records.model import (
    NAN,
    DeviceSample,
    GpuProcessMetrics,
    GpuSummary,
    SourceStatus,
)
from gpumon.core.sources.nvmldevice import DeviceReader, between
from gpumon.core.sources.nvmlpcie import GpmReader, PcieReader, choose_pcie
from gpumon.core.sources.nvmlpeers import Peer, open_peers
from gpumon.core.sources.nvmlprocs import ProcessReader
from gpumon.core.sources.nvmlquery import (
    DRIVER_NOT_LOADED,
    LIB_RM_VERSION_MISMATCH,
    LIBRARY_NOT_FOUND,
    MIB,
    NA,
    NO_PERMISSION,
    Calls,
    Device,
    Query,
    integer,
    text,
)
from gpumon.core.sources.pcie import FALLBACK_GEN, FALLBACK_WIDTH, LANE_BPS, link_capacity_bps

LOG = logging.getLogger(__name__)

INIT_REASONS = {
    LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 not found (no NVIDIA driver installed)",
    DRIVER_NOT_LOADED: "NVIDIA driver not loaded",
    LIB_RM_VERSION_MISMATCH: "driver/library version mismatch (reboot or reload the nvidia kernel module)",
    NO_PERMISSION: "no permission to access the NVIDIA device files",
}

# Which output fields each query key feeds (for device_info()["unsupported"]).
KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "utilization": ("gpu_util", "mem_util"),
    "memory": ("mem_used_mib", "mem_total_mib"),
    "power": ("power_w",),
    "temperature": ("temp_c",),
    "sm_clock": ("sm_clock_mhz",),
    "name": ("name",),
    "uuid": ("uuid",),
    "driver": ("driver",),
    "pcie_gen": ("pcie_gen",),
    "pcie_width": ("pcie_width",),
    "compute_processes": ("gpu_mem_mib",),
    "process_utilization": ("gpu_sm_util",),
}


def _resolve_gpu(requested: int | str | None) -> int | str:
    """The NVML index to watch, or a UUID: the request, else CUDA_VISIBLE_DEVICES' first entry, else 0."""
    if requested is not None:
        return requested
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.isdigit():
        return int(first)
    if first.startswith("GPU-"):
        return first
    return 0


def pid_namespace_hint(
    ours: Iterable[int], gpu_pids: Iterable[int], visible: Callable[[int], bool] | None = None
) -> str | None:
    """A hint when NVML lists GPU processes, none ours and none visible here (a PID namespace)."""
    gpu = set(gpu_pids)
    if not gpu or gpu & set(ours):
        return None
    exists = visible or (lambda pid: os.path.exists(f"/proc/{pid}"))
    if any(exists(pid) for pid in gpu):
        return None
    return (
        f"NVML lists {len(gpu)} GPU process(es) but none is visible here: gpumon runs in a "
        "separate PID namespace (a container?) and NVML reports host PIDs, so per-process GPU "
        "memory and SM use cannot be attributed; run the container with --pid=host"
    )


class NvmlSource:
    """One GPU's device metrics and our processes' GPU use, via NVML (thread-safe: one lock)."""

    name = "nvml"

    def __init__(self, gpu_index: int | str | None = None) -> None:
        self._requested = gpu_index
        self._lock = threading.Lock()
        self._nv: ModuleType | None = None
        self._q: Query | None = None
        self._dev: Device | None = None
        self._initialized = False
        self._status = SourceStatus(self.name, False, "unavailable: not opened")
        self._info: dict = {}
        self.device_count = 0
        self._capacity_bps = 0.0  # set at open()
        self._device: DeviceReader | None = None
        # the last reading, and the run time before which a reading carries all but its fast fields from it
        self._last: DeviceSample | None = None
        self._carry_until = -math.inf
        self._gpm: GpmReader | None = None
        self._gpm_reason = ""
        self._pcie: PcieReader | None = None
        self._processes: ProcessReader | None = None
        self._peers: list[Peer] = []

    # -- lifecycle ---------------------------------------------------------

    def open(self) -> SourceStatus:
        """Initialise NVML and cache the device handle; never raises."""
        with self._lock:
            if self._dev is None and not self._initialized:
                self._status = self._open()
            return self.status

    def _open(self) -> SourceStatus:
        try:
            import pynvml as nv
        except ImportError:
            return self._unavailable("pynvml (nvidia-ml-py) is not installed")
        self._nv, q = nv, Query(nv)
        self._q = q
        if q("init", nv.nvmlInitWithFlags, 0) is NA:
            code = q.last_error
            known = INIT_REASONS.get(code) if code is not None else None
            return self._unavailable(known or f"nvmlInit failed: {q.text(code)}", code)
        self._initialized = True
        count = q("device_count", nv.nvmlDeviceGetCount)
        if count is NA or count == 0:
            return self._unavailable("no NVIDIA GPU found", q.last_error)
        self.device_count = count
        target = _resolve_gpu(self._requested)
        if isinstance(target, int) and not 0 <= target < count:
            return self._unavailable(f"no GPU with index {target} ({count} found)")
        by = (
            nv.nvmlDeviceGetHandleByIndex
            if isinstance(target, int)
            else nv.nvmlDeviceGetHandleByUUID
        )
        handle = q("handle", by, target)
        if handle is NA:
            return self._unavailable(q.lost or f"no GPU {target}", q.last_error)
        dev = self._dev = Device(nv, q, handle, Calls.bind(nv))
        self._open_readers(dev, target)
        if q.lost:
            return self._unavailable(q.lost)
        self._peers = open_peers(nv, dev.calls, count, self._info["index"])
        return SourceStatus(
            self.name, True, "", {"index": self._info["index"], "driver": self._info["driver"]}
        )

    def _open_readers(self, dev: Device, target: int | str) -> None:
        """The GPU's identity and link, then each reader, each probed once so that what is unsupported is known."""
        q, nv, handle = dev.q, dev.nv, dev.handle
        index = target if isinstance(target, int) else q("index", nv.nvmlDeviceGetIndex, handle)
        self._info = {
            "index": None if index is NA else index,
            "name": text(q("name", nv.nvmlDeviceGetName, handle)),
            "uuid": text(q("uuid", nv.nvmlDeviceGetUUID, handle)),
            "driver": text(q("driver", nv.nvmlSystemGetDriverVersion)),
            "compute_mode": integer(q("compute_mode", nv.nvmlDeviceGetComputeMode, handle)),
        }
        self._refresh_link(dev)
        self._capacity_bps = self._link_capacity(dev)
        self._device = DeviceReader(dev)
        self._processes = ProcessReader(dev)
        self._device.probe()
        self._processes.probe()
        self._gpm, self._gpm_reason = GpmReader.open(dev)
        self._pcie = choose_pcie(dev, self._gpm, self._capacity_bps)

    def _unavailable(self, reason: str, code: int | None = None) -> SourceStatus:
        return SourceStatus(
            self.name, False, f"unavailable: {reason}", {"nvml_error": code} if code else {}
        )

    @property
    def status(self) -> SourceStatus:
        """Current availability; turns unavailable ("GPU lost") when the device falls off the bus."""
        if self._q is not None and self._q.lost and self._status.available:
            self._status = self._unavailable(self._q.lost)
        return self._status

    def close(self) -> None:
        with self._lock:
            if self._gpm is not None:
                self._gpm.gpm.close()
                self._gpm = None
            if self._initialized and self._nv is not None:
                try:
                    self._nv.nvmlShutdown()
                except self._nv.NVMLError as err:
                    LOG.debug("nvml: shutdown: %s", err)
            self._initialized = False
            self._dev = None
            self._peers = []
            self._status = self._unavailable("closed")

    def _live(self) -> Device | None:
        """The jobs' GPU while it can be read, else None."""
        return self._dev if self._dev is not None and self.status.available else None

    # -- device ------------------------------------------------------------

    def device_info(self) -> dict:
        """GPU identity and link for run.json["gpu"] (last known values once lost); {} if never opened."""
        with self._lock:
            if not self._info:
                return {}
            if self._dev is not None and not self._dev.q.lost:
                self._refresh_link(self._dev)
            pcie, period = self._pcie, self.pcie_poll_period_s
            gpm = self._gpm
            return {
                **self._info,
                "pcie_method": None if pcie is None else pcie.method,
                "pcie_max_bps": self._capacity_bps,
                "pcie_counter_bits": None if pcie is None else pcie.counter_bits,
                "pcie_poll_ms": None if period is None else round(period * 1000, 1),
                "gpm_metrics": [] if gpm is None else gpm.fields(),
                "gpm_reason": self._gpm_reason if gpm is None else gpm.gpm.failed or "",
                "unsupported": self._unsupported_fields(),
            }

    def _refresh_link(self, dev: Device) -> None:
        """Re-read the PCIe link (it can train down when idle) and the memory size."""
        q, nv, h = dev.q, dev.nv, dev.handle
        memory = q("memory", dev.calls.memory, h)
        self._info.update(
            pcie_gen=integer(q("pcie_gen", nv.nvmlDeviceGetCurrPcieLinkGeneration, h)),
            pcie_width=integer(q("pcie_width", nv.nvmlDeviceGetCurrPcieLinkWidth, h)),
            mem_total_mib=None if memory is NA else memory.total / MIB,
        )

    @staticmethod
    def _link_capacity(dev: Device) -> float:
        """Bytes/s of the link at its best (it trains down when idle): max generation × max width."""
        q, nv, h = dev.q, dev.nv, dev.handle
        gen = integer(q("pcie_max_gen", nv.nvmlDeviceGetMaxPcieLinkGeneration, h))
        width = integer(q("pcie_max_width", nv.nvmlDeviceGetMaxPcieLinkWidth, h))
        capacity = link_capacity_bps(gen, width)
        if capacity is None:
            LOG.info(
                "nvml: maximum PCIe link unknown; assuming gen%d x%d", FALLBACK_GEN, FALLBACK_WIDTH
            )
            return LANE_BPS[FALLBACK_GEN] * FALLBACK_WIDTH
        return capacity

    def _unsupported_fields(self) -> list[str]:
        assert self._q is not None
        fields = {f for key in self._q.unsupported for f in KEY_FIELDS.get(key, ())}
        if self._pcie is None:
            fields |= {"pcie_rx_bps", "pcie_tx_bps"}
        return sorted(fields)  # GPM fields are listed by what works: device_info()["gpm_metrics"]

    def sample(self, t: float) -> DeviceSample | None:
        """One reading at run time ``t``; NaN for unsupported fields; None once unavailable.

        A tick between the once-a-second reads (memory, power, temperature, GPM, the throughput call) re-reads only
        utilisation and the SM clock (``between``) and carries the rest from the last reading, which is what the
        full reading would have given it too; the wrapping counters' rates are new every tick (a full reading).
        """
        with self._lock:
            dev = self._live()
            device, processes = self._device, self._processes
            if dev is None or device is None or processes is None:
                return None
            last = self._last
            if last is not None and t < self._carry_until:
                sample = between(dev, last, t)
            else:
                sample = self._full_reading(dev, device, t)
                self._carry_until = self._next_full_t(device)
            processes.note_device_util(sample.gpu_util)
            if dev.q.lost:
                return None
            self._last = sample
            return sample

    def _next_full_t(self, device: DeviceReader) -> float:
        """The run time from which a reading reads more than utilisation and the SM clock again."""
        gpm, pcie = self._gpm, self._pcie
        return min(
            device.next_slow_t,
            math.inf if gpm is None else gpm.next_read_t,
            math.inf if pcie is None else pcie.next_read_t,
        )

    def _full_reading(self, dev: Device, device: DeviceReader, t: float) -> DeviceSample:
        """Every field, each slow one read when its second has come (else its last reading)."""
        fields = device.read(t)
        gpm = self._gpm
        if gpm is not None:
            gpm.read(t)
        rates = None if self._pcie is None else self._pcie.rates(t)
        if (
            rates is None
        ):  # the method failed for good (or there is none): the next takes over next tick
            if self._pcie is not None:
                self._pcie = choose_pcie(dev, self._gpm, self._capacity_bps)
            rates = (NAN, NAN)
        return DeviceSample(
            t=t,
            pcie_rx_bps=rates[0],
            pcie_tx_bps=rates[1],
            **fields,
            **(gpm.columns if gpm is not None else {}),
        )

    # -- the box's other GPUs ------------------------------------------------

    def overview(
        self, t: float, sample: DeviceSample | None, processes: int | None
    ) -> tuple[GpuSummary, ...]:
        """Every GPU of a box with several, by index; () with one.

        The jobs' GPU is ``sample`` and ``processes`` (what this tick already read, nothing re-read); each
        other GPU is read now with the µs-cheap calls and its two process lists (~80 µs on the H100),
        never PCIe, GPM or per-process utilisation. Call it at the process cadence, not every tick.
        """
        with self._lock:
            if not self._peers or self._live() is None:
                return ()
            info = self._info
            ours = GpuSummary(
                info["index"], info["name"], info["uuid"], sample, processes, jobs=True
            )
            found = [ours, *(peer.summary(t) for peer in self._peers)]
        return tuple(sorted(found, key=lambda summary: summary.index))

    # -- PCIe --------------------------------------------------------------

    @property
    def pcie_each_tick(self) -> bool:
        """Whether each reading reads PCIe bytes anew (the byte counters; GPM and the throughput call: once a second)."""
        pcie = self._pcie
        return pcie is not None and pcie.next_read_t == -math.inf

    @property
    def pcie_poll_period_s(self) -> float | None:
        """How often the sampler must call ``poll_pcie`` between ticks (wrapping counters), else None."""
        pcie = self._pcie
        return None if pcie is None else pcie.poll_period_s

    def poll_pcie(self, t: float) -> None:
        """Read the wrapping PCIe counters between ticks (run time ``t``) so no gap hides a wrap."""
        with self._lock:
            if self._dev is not None and self._pcie is not None and not self._dev.q.lost:
                self._pcie.poll(t)

    # -- processes ---------------------------------------------------------

    def gpu_process_metrics(self, t: float | None = None) -> dict[int, GpuProcessMetrics]:
        """GPU memory and SM use of every process NVML lists (or took a utilisation sample of).

        SM use is read at most every PROCESS_UTIL_PERIOD_S of run time ``t`` (always when t is None),
        for every PID at once, and clamped over all of them (docs/nvml.md).
        """
        with self._lock:
            if self._live() is None or self._processes is None:
                return {}
            return self._processes.metrics(t)

    def process_metrics(
        self, pids: Iterable[int], t: float | None = None
    ) -> dict[int, GpuProcessMetrics]:
        """GPU memory and SM use of those of ``pids`` that NVML knows; other PIDs are ignored."""
        ours = set(pids)
        if not ours:
            return {}
        return {pid: m for pid, m in self.gpu_process_metrics(t).items() if pid in ours}

    def all_gpu_pids(self) -> set[int]:
        """Every PID NVML lists on the device (compute and graphics)."""
        with self._lock:
            if self._live() is None or self._processes is None:
                return set()
            return set(self._processes.running())
