"""NVML source: device and per-process GPU metrics through pynvml, tolerant of every NVML error.

PCIe bytes come from GPM where the GPU has it (sources/gpm.py), else from the byte counters
made wrap-safe (sources/pcie.py), else from the 20 ms throughput call; ``_choose_pcie`` decides.

Every NVML call goes through ``_Query``: NotSupported / FunctionNotFound / NoPermission make
that quantity N/A for good (logged once), GPU-lost marks the device lost, anything else is a
one-off N/A. ``pynvml`` is imported lazily in ``NvmlSource.open()``. Details: docs/nvml.md.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterable

from gpumon.core.records.model import (
    GPM_COLUMNS,
    NAN,
    DeviceSample,
    GpuProcessMetrics,
    GpuSummary,
    SourceStatus,
)
from gpumon.core.sources.gpm import Gpm
from gpumon.core.sources.pcie import (
    COUNTER_BITS,
    FALLBACK_GEN,
    FALLBACK_WIDTH,
    LANE_BPS,
    WrapCounters,
    link_capacity_bps,
    poll_period_s,
)

LOG = logging.getLogger(__name__)

MIB = 1024 * 1024
# NVML error codes (nvml.h); pynvml exposes the same numbers as NVML_ERROR_*.
NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, INSUFFICIENT_SIZE = 3, 4, 6, 7
DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND = 9, 12, 13
GPU_IS_LOST, RESET_REQUIRED, LIB_RM_VERSION_MISMATCH = 15, 16, 18
FI_PCIE_COUNT_TX_BYTES, FI_PCIE_COUNT_RX_BYTES = 197, 198
PCIE_UTIL_TX_BYTES, PCIE_UTIL_RX_BYTES = 0, 1

UNSUPPORTED_CODES = frozenset({NOT_SUPPORTED, FUNCTION_NOT_FOUND, NO_PERMISSION})
LOST_REASONS = {GPU_IS_LOST: "GPU lost", RESET_REQUIRED: "GPU requires a reset"}
INIT_REASONS = {
    LIBRARY_NOT_FOUND: "libnvidia-ml.so.1 not found (no NVIDIA driver installed)",
    DRIVER_NOT_LOADED: "NVIDIA driver not loaded",
    LIB_RM_VERSION_MISMATCH: "driver/library version mismatch (reboot or reload the nvidia kernel module)",
    NO_PERMISSION: "no permission to access the NVIDIA device files",
}
# Per-process utilisation is a buffer of driver samples: read it this often (run-time seconds),
# with the last-seen timestamp, and nothing is lost (it costs ~2,300 µs per call on the H100).
PROCESS_UTIL_PERIOD_S = 1.0
# The SM shares of every process on the device (ours and the others) at one instant may exceed
# the device's GPU util by this much (points) before they are all scaled down to it (NVML's per-process and device samples are taken apart).
SM_SUM_TOLERANCE_PCT = 5.0
# Device GPU-util readings kept for that comparison (the ticks since the last per-process read).
DEVICE_UTIL_KEPT = 600
# Set (to anything but "" or "0") to ignore GPM: PCIe bytes from the wrap-safe counters, no GPM columns, as on a
# GPU without GPM (how benchmarks/gpu_validation.py checks the counter path on a Hopper GPU).
NO_GPM_ENV = "GPUMON_NO_GPM"

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


class _NA:
    """The N/A marker a failed query returns."""

    def __repr__(self) -> str:
        return "NA"


NA: Any = _NA()


@dataclass
class _Query:
    """The one tolerant way to call NVML: errors become ``NA``, never exceptions."""

    nv: ModuleType
    where: str = ""  # "GPU 2: " for another GPU of the box (the overview's), in the log lines
    unsupported: dict[str, str] = field(default_factory=dict)
    lost: str | None = None
    last_error: int | None = None
    _variant: dict[str, int] = field(default_factory=dict)
    _logged: set[tuple[str, int]] = field(default_factory=set)

    def __call__(self, key: str, fn: Callable | tuple[Callable, ...], *args: Any) -> Any:
        """Call ``fn(*args)``; a tuple is newest-first versions tried on FunctionNotFound."""
        if self.lost is not None or key in self.unsupported:
            return NA
        variants = fn if isinstance(fn, tuple) else (fn,)
        index = self._variant.get(key, 0)
        while True:
            try:
                return variants[index](*args)
            except self.nv.NVMLError as err:
                if err.value == FUNCTION_NOT_FOUND and index + 1 < len(variants):
                    LOG.info(
                        "nvml: %s%s: %s missing, using an older version",
                        self.where,
                        key,
                        variants[index].__name__,
                    )
                    index += 1
                    self._variant[key] = index
                    continue
                return self.fail(key, err.value)
            except UnicodeDecodeError:
                return self.fail(key, -1)

    def fail(self, key: str, code: int) -> Any:
        """Classify an NVML error ``code`` from query ``key``; returns ``NA``."""
        self.last_error = code
        if code in LOST_REASONS:
            if self.lost is None:
                self.lost = LOST_REASONS[code]
                LOG.warning(
                    "nvml: %s%s during %s; its NVML metrics stop", self.where, self.lost, key
                )
        elif code in UNSUPPORTED_CODES:
            self.unsupported[key] = self.text(code)
            LOG.info("nvml: %s%s not available: %s", self.where, key, self.unsupported[key])
        elif code != NOT_FOUND and (key, code) not in self._logged:
            self._logged.add((key, code))
            LOG.info("nvml: %s%s failed: %s", self.where, key, self.text(code))
        return NA

    def text(self, code: int | None) -> str:
        """pynvml's wording for an NVML error code."""
        if code is None or code == -1:
            return "undecodable string" if code == -1 else "unknown error"
        return str(self.nv.NVMLError(code))


def _present(nv: ModuleType, *names: str) -> tuple[Callable, ...]:
    """The pynvml wrappers among ``names`` that this pynvml version has, in order."""
    return tuple(getattr(nv, n) for n in names if hasattr(nv, n))


def _v1_running_processes(nv: ModuleType, symbol: str) -> Callable:
    """A caller of the unversioned (v1 struct) process-list symbol, which pynvml no longer wraps."""

    class ProcessInfoV1(ctypes.Structure):
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]

    def call(handle: Any) -> list[Any]:
        fn = nv._nvmlGetFunctionPointer(symbol)
        count = ctypes.c_uint(0)
        ret = fn(handle, ctypes.byref(count), None)
        if ret == nv.NVML_SUCCESS:
            return []
        if ret != INSUFFICIENT_SIZE:
            raise nv.NVMLError(ret)
        count.value = count.value * 2 + 5
        infos = (ProcessInfoV1 * count.value)()
        nv._nvmlCheckReturn(fn(handle, ctypes.byref(count), infos))
        return [infos[i] for i in range(count.value)]

    call.__name__ = symbol
    return call


def _process_utilization(nv: ModuleType) -> Callable:
    """nvmlDeviceGetProcessUtilization in one C call, into a buffer with room to spare (grown, and the read made
    again, while the driver says it is too small). pynvml's wrapper makes two: a size query, then the read, and each
    costs the driver's full price (~1,150 µs on the H100); it also raises INSUFFICIENT_SIZE when a sampling instant
    lands between them (1 read in 50 at the H100's call costs, on the fake)."""
    room = [
        64
    ]  # samples; the driver keeps about one per process per sampling instant since ``last_seen_us``

    def call(handle: Any, last_seen_us: int) -> list[Any]:
        fn = nv._nvmlGetFunctionPointer("nvmlDeviceGetProcessUtilization")
        since = ctypes.c_ulonglong(last_seen_us)
        while True:
            count = ctypes.c_uint(room[0])
            samples = (nv.c_nvmlProcessUtilizationSample_t * room[0])()
            ret = fn(handle, samples, ctypes.byref(count), since)
            if ret != INSUFFICIENT_SIZE:
                break
            room[0] = max(room[0], count.value) * 2
        nv._nvmlCheckReturn(ret)
        room[0] = max(room[0], 2 * count.value)
        return samples[: count.value]

    call.__name__ = "nvmlDeviceGetProcessUtilization"
    return call


def _field_number(value: Any) -> int | float:
    """The number in an nvmlFieldValue_t, by its valueType (exact: integers stay integers)."""
    member = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
    return getattr(value.value, member[value.valueType])


def _mib(used_bytes: int | None) -> float:
    if used_bytes is None or used_bytes >= 0xFFFFFFFFFFFFFFFF:
        return NAN
    return used_bytes / MIB


def _number(value: Any, scale: float = 1.0) -> float:
    return NAN if value is NA else value * scale


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


@dataclass
class _Peer:
    """Another GPU of the box, read for the overview only, through its own query (its errors stay its own)."""

    index: int
    handle: Any
    q: _Query
    name: str | None
    uuid: str | None


def _listed(
    q: _Query, fns: dict[str, tuple[Callable, ...]], handle: Any
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
            mib = _mib(p.usedGpuMemory)
            if math.isnan(found.get(p.pid, NAN)):
                found[p.pid] = mib
            elif not math.isnan(mib):
                found[p.pid] = max(found[p.pid], mib)
    return found if answered else None


class NvmlSource:
    """One GPU's device metrics and our processes' GPU use, via NVML (thread-safe: one lock)."""

    name = "nvml"

    def __init__(self, gpu_index: int | str | None = None) -> None:
        self._requested = gpu_index
        self._lock = threading.Lock()
        self._nv: ModuleType | None = None
        self._q: _Query | None = None
        self._handle: Any = None
        self._initialized = False
        self._status = SourceStatus(self.name, False, "unavailable: not opened")
        self._info: dict = {}
        self.device_count = 0
        self._pcie_method: str | None = None
        self._counters: WrapCounters | None = None
        self._counters_read_t = -math.inf
        self._capacity_bps = 0.0  # set at open()
        self._gpm: Gpm | None = None
        self._gpm_reason = ""
        self._util_last_seen_us = 0
        self._util_read_t = -math.inf
        self._device_util: deque[float] = deque(maxlen=DEVICE_UTIL_KEPT)
        self._sm_util: dict[int, float] = {}
        self._process_fns: dict[str, tuple[Callable, ...]] = {}
        self._memory_fns: tuple[Callable, ...] = ()
        self._temperature_fns: tuple[Callable, ...] = ()
        self._peers: list[_Peer] = []

    @property
    def _api(self) -> ModuleType:
        """pynvml, once ``open`` has imported it (every method that reads the GPU runs after a successful open)."""
        assert self._nv is not None, "NvmlSource used before open()"
        return self._nv

    @property
    def _query(self) -> _Query:
        """The GPU's query (set with ``_api`` by ``open``)."""
        assert self._q is not None, "NvmlSource used before open()"
        return self._q

    # -- lifecycle ---------------------------------------------------------

    def open(self) -> SourceStatus:
        """Initialise NVML and cache the device handle; never raises."""
        with self._lock:
            if self._handle is None and not self._initialized:
                self._status = self._open()
            return self.status

    def _open(self) -> SourceStatus:
        try:
            import pynvml as nv
        except ImportError:
            return self._unavailable("pynvml (nvidia-ml-py) is not installed")
        self._nv, q = nv, _Query(nv)
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
        self._handle = handle
        self._bind_versions(nv)
        index = target if isinstance(target, int) else q("index", nv.nvmlDeviceGetIndex, handle)
        self._info = {
            "index": None if index is NA else index,
            "name": _text(q("name", nv.nvmlDeviceGetName, handle)),
            "uuid": _text(q("uuid", nv.nvmlDeviceGetUUID, handle)),
            "driver": _text(q("driver", nv.nvmlSystemGetDriverVersion)),
            "compute_mode": _int(q("compute_mode", nv.nvmlDeviceGetComputeMode, handle)),
        }
        self._refresh_link()
        self._capacity_bps = self._link_capacity()
        self._util_last_seen_us = time.time_ns() // 1000 - int(PROCESS_UTIL_PERIOD_S * 1e6)
        self._probe_fields()
        self._open_gpm()
        self._pcie_method = self._choose_pcie()
        if q.lost:
            return self._unavailable(q.lost)
        self._peers = self._open_peers(count)
        return SourceStatus(
            self.name, True, "", {"index": self._info["index"], "driver": self._info["driver"]}
        )

    def _open_peers(self, count: int) -> list[_Peer]:
        """The box's other GPUs (for the overview), each with its own query; a GPU that does not answer is left out."""
        ours = self._info["index"]
        if count < 2 or ours is None:
            return []
        nv, peers = self._api, []
        for index in range(count):
            if index == ours:
                continue
            q = _Query(nv, where=f"GPU {index}: ")
            handle = q("handle", nv.nvmlDeviceGetHandleByIndex, index)
            if handle is NA:
                continue
            name, uuid = (
                _text(q("name", nv.nvmlDeviceGetName, handle)),
                _text(q("uuid", nv.nvmlDeviceGetUUID, handle)),
            )
            peers.append(_Peer(index, handle, q, name, uuid))
        return peers

    def _bind_versions(self, nv: ModuleType) -> None:
        """Newest-first versions of the calls whose symbol depends on the driver's age."""
        for kind in ("Compute", "Graphics"):
            base = f"nvmlDeviceGet{kind}RunningProcesses"
            self._process_fns[kind] = (
                *_present(nv, f"{base}_v3", f"{base}_v2"),
                _v1_running_processes(nv, base),
            )
        self._process_util = _process_utilization(nv)
        memory: tuple[Callable, ...] = (nv.nvmlDeviceGetMemoryInfo,)
        if hasattr(nv, "nvmlMemory_v2"):

            def nvmlDeviceGetMemoryInfo_v2(
                handle: Any,
            ) -> Any:  # named as NVML names it: the log says which one ran
                return nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)

            memory = (nvmlDeviceGetMemoryInfo_v2, *memory)
        self._memory_fns = memory
        self._temperature_fns = _present(
            nv, "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"
        )

    def _probe_fields(self) -> None:
        """Query each metric once so that device_info()["unsupported"] is complete before sampling."""
        q, nv, h = self._query, self._api, self._handle
        q("utilization", nv.nvmlDeviceGetUtilizationRates, h)
        q("power", nv.nvmlDeviceGetPowerUsage, h)
        q("temperature", self._temperature_fns, h, nv.NVML_TEMPERATURE_GPU)
        q("sm_clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        q("compute_processes", self._process_fns["Compute"], h)
        q("process_utilization", self._process_util, h, self._util_last_seen_us)

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
                self._gpm.close()
                self._gpm = None
            if self._initialized and self._nv is not None:
                try:
                    self._nv.nvmlShutdown()
                except self._nv.NVMLError as err:
                    LOG.debug("nvml: shutdown: %s", err)
            self._initialized = False
            self._handle = None
            self._peers = []
            self._status = self._unavailable("closed")

    # -- device ------------------------------------------------------------

    def device_info(self) -> dict:
        """GPU identity and link for run.json["gpu"] (last known values once lost); {} if never opened."""
        with self._lock:
            if not self._info:
                return {}
            if self._handle is not None and not self._query.lost:
                self._refresh_link()
            period = self.pcie_poll_period_s
            return {
                **self._info,
                "pcie_method": self._pcie_method,
                "pcie_max_bps": self._capacity_bps,
                "pcie_counter_bits": self._counters.bits if self._counters is not None else None,
                "pcie_poll_ms": None if period is None else round(period * 1000, 1),
                "gpm_metrics": self._gpm_fields(),
                "gpm_reason": self._gpm.failed or "" if self._gpm is not None else self._gpm_reason,
                "unsupported": self._unsupported_fields(),
            }

    def _refresh_link(self) -> None:
        """Re-read the PCIe link (it can train down when idle) and the memory size."""
        q, nv, h = self._query, self._api, self._handle
        memory = q("memory", self._memory_fns, h)
        self._info.update(
            pcie_gen=_int(q("pcie_gen", nv.nvmlDeviceGetCurrPcieLinkGeneration, h)),
            pcie_width=_int(q("pcie_width", nv.nvmlDeviceGetCurrPcieLinkWidth, h)),
            mem_total_mib=None if memory is NA else memory.total / MIB,
        )

    def _link_capacity(self) -> float:
        """Bytes/s of the link at its best (it trains down when idle): max generation × max width."""
        q, nv, h = self._query, self._api, self._handle
        gen = _int(q("pcie_max_gen", nv.nvmlDeviceGetMaxPcieLinkGeneration, h))
        width = _int(q("pcie_max_width", nv.nvmlDeviceGetMaxPcieLinkWidth, h))
        capacity = link_capacity_bps(gen, width)
        if capacity is None:
            LOG.info(
                "nvml: maximum PCIe link unknown; assuming gen%d x%d", FALLBACK_GEN, FALLBACK_WIDTH
            )
            return LANE_BPS[FALLBACK_GEN] * FALLBACK_WIDTH
        return capacity

    def _unsupported_fields(self) -> list[str]:
        fields = {f for key in self._query.unsupported for f in KEY_FIELDS.get(key, ())}
        if self._pcie_method is None:
            fields |= {"pcie_rx_bps", "pcie_tx_bps"}
        return sorted(fields)  # GPM fields are listed by what works: device_info()["gpm_metrics"]

    def sample(self, t: float) -> DeviceSample | None:
        """One reading at run time ``t``; NaN for unsupported fields; None once unavailable."""
        with self._lock:
            if self._handle is None or not self.status.available:
                return None
            cheap = self._cheap_fields(self._query, self._handle)
            gpm = self._gpm.read(t) if self._gpm is not None else {}
            rx, tx = self._pcie(t, gpm)
            if not math.isnan(cheap["gpu_util"]):
                self._device_util.append(cheap["gpu_util"])
            sample = DeviceSample(
                t=t,
                pcie_rx_bps=rx,
                pcie_tx_bps=tx,
                **cheap,
                **{f: gpm.get(f, NAN) for f in GPM_COLUMNS},
            )
            return None if self._query.lost else sample

    def _cheap_fields(self, q: _Query, h: Any) -> dict[str, float]:
        """Utilisation, memory, power, temperature, SM clock of device ``h`` (1-6 µs a call on the H100); NaN if N/A."""
        nv = self._api
        util = q("utilization", nv.nvmlDeviceGetUtilizationRates, h)
        memory = q("memory", self._memory_fns, h)
        return {
            "gpu_util": NAN if util is NA else float(util.gpu),
            "mem_util": NAN if util is NA else float(util.memory),
            "mem_used_mib": NAN if memory is NA else memory.used / MIB,
            "mem_total_mib": NAN if memory is NA else memory.total / MIB,
            "power_w": _number(q("power", nv.nvmlDeviceGetPowerUsage, h), 0.001),
            "temp_c": _number(q("temperature", self._temperature_fns, h, nv.NVML_TEMPERATURE_GPU)),
            "sm_clock_mhz": _number(q("sm_clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)),
        }

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
            if not self._peers or self._handle is None or not self.status.available:
                return ()
            info = self._info
            ours = GpuSummary(
                info["index"], info["name"], info["uuid"], sample, processes, jobs=True
            )
            found = [ours, *(self._peer_summary(peer, t) for peer in self._peers)]
        return tuple(sorted(found, key=lambda summary: summary.index))

    def _peer_summary(self, peer: _Peer, t: float) -> GpuSummary:
        if peer.q.lost:
            return GpuSummary(peer.index, peer.name, peer.uuid, None, None)
        cheap = self._cheap_fields(peer.q, peer.handle)
        listed = _listed(peer.q, self._process_fns, peer.handle)
        if peer.q.lost:
            return GpuSummary(peer.index, peer.name, peer.uuid, None, None)
        count = None if listed is None else len(listed)
        return GpuSummary(peer.index, peer.name, peer.uuid, DeviceSample(t=t, **cheap), count)

    # -- PCIe --------------------------------------------------------------

    def _open_gpm(self) -> None:
        """Start GPM where the GPU has it, is not split by MIG (device-level samples only) and GPUMON_NO_GPM is unset."""
        switch = os.environ.get(NO_GPM_ENV, "")
        if switch not in ("", "0"):
            self._gpm_reason = f"GPM switched off ({NO_GPM_ENV}={switch})"
            return
        nv, h = self._api, self._handle
        mig = self._query("mig_mode", nv.nvmlDeviceGetMigMode, h)
        if mig is not NA and mig[0] == 1:
            self._gpm_reason = "MIG is enabled (GPM device samples do not cover MIG instances)"
            return
        gpm = Gpm(nv, h)
        reason = gpm.open(0.0)
        if reason is None:
            self._gpm = gpm
        else:
            self._gpm_reason = reason
            LOG.info("nvml: %s", reason)

    def _gpm_fields(self) -> list[str]:
        """The DeviceSample fields GPM delivers now ([] without GPM or once it failed)."""
        gpm = self._gpm
        return [] if gpm is None or gpm.failed else list(gpm.fields)

    def _choose_pcie(self) -> str | None:
        """The one place that decides how PCIe bytes are read: GPM, else counters, else throughput."""
        if {"pcie_rx_bps", "pcie_tx_bps"} <= set(self._gpm_fields()):
            return "gpm"
        self._counters = None
        if self._read_counters():
            return "counters"
        probe = self._query(
            "pcie_throughput",
            self._api.nvmlDeviceGetPcieThroughput,
            self._handle,
            PCIE_UTIL_RX_BYTES,
        )
        return None if probe is NA else "throughput"

    @property
    def pcie_poll_period_s(self) -> float | None:
        """How often the sampler must call ``poll_pcie`` between ticks (wrapping counters), else None."""
        counters = self._counters
        if self._pcie_method != "counters" or counters is None:
            return None
        return poll_period_s(counters.bits, counters.capacity_bps)

    def poll_pcie(self, t: float) -> None:
        """Read the wrapping PCIe counters between ticks (run time ``t``) so no gap hides a wrap."""
        with self._lock:
            if (
                self._handle is not None
                and self._pcie_method == "counters"
                and not self._query.lost
            ):
                self._read_counters(t)

    def _read_counters(self, t: float = -math.inf) -> bool:
        """Read both byte counters by their valueType into the wrap-safe totals; False if they fail."""
        values = self._query(
            "pcie_counters",
            self._api.nvmlDeviceGetFieldValues,
            self._handle,
            [FI_PCIE_COUNT_RX_BYTES, FI_PCIE_COUNT_TX_BYTES],
        )
        if values is NA:
            return False
        for value in values:
            if value.nvmlReturn != self._api.NVML_SUCCESS:
                self._query.fail("pcie_counters", value.nvmlReturn)
                return False
        bits = COUNTER_BITS.get(values[0].valueType)
        if bits is None or COUNTER_BITS.get(values[1].valueType) != bits:
            self._query.fail("pcie_counters", NOT_SUPPORTED)
            return False
        if self._counters is None or self._counters.bits != bits:
            self._counters = WrapCounters(bits, self._capacity_bps)
        stamp = values[0].timestamp or time.time_ns() // 1000
        self._counters.add(int(stamp), int(_field_number(values[0])), int(_field_number(values[1])))
        self._counters_read_t = t
        return True

    def _pcie(self, t: float, gpm: dict[str, float]) -> tuple[float, float]:
        """(RX, TX) bytes/s by the chosen method; a method that fails for good hands over to the next."""
        if self._pcie_method == "gpm":
            self._pcie_method = self._choose_pcie()
            if self._pcie_method == "gpm":
                return gpm.get("pcie_rx_bps", NAN), gpm.get("pcie_tx_bps", NAN)
            return NAN, NAN
        if self._pcie_method == "counters":
            period = self.pcie_poll_period_s
            # Between ticks the sampler polls; read here only when that poll is overdue.
            if period is None or t - self._counters_read_t >= period:
                self._read_counters(t)
            if "pcie_counters" not in self._query.unsupported and self._counters is not None:
                return self._counters.rates()
            self._pcie_method = self._choose_pcie()
            return NAN, NAN
        if self._pcie_method == "throughput":
            fn = self._api.nvmlDeviceGetPcieThroughput
            rx = self._query("pcie_throughput", fn, self._handle, PCIE_UTIL_RX_BYTES)
            tx = self._query("pcie_throughput", fn, self._handle, PCIE_UTIL_TX_BYTES)
            if "pcie_throughput" in self._query.unsupported:
                self._pcie_method = None
            return _number(rx, 1024.0), _number(tx, 1024.0)
        return NAN, NAN

    # -- processes ---------------------------------------------------------

    def _running(self) -> dict[int, float]:
        """PID → used GPU memory (MiB, NaN if N/A) over the compute and graphics lists of the jobs' GPU."""
        return _listed(self._query, self._process_fns, self._handle) or {}

    def _update_sm_util(self, running: dict[int, float]) -> None:
        """Every utilisation sample since the last one seen: each PID's mean, all clamped together to the device."""
        samples = self._query(
            "process_utilization", self._process_util, self._handle, self._util_last_seen_us
        )
        if samples is NA:
            no_new = self._query.last_error == NOT_FOUND
            if not (
                no_new
                and time.time_ns() // 1000 - self._util_last_seen_us
                < 2 * PROCESS_UTIL_PERIOD_S * 1e6
            ):
                # Nothing new for two periods: no process was on the SMs (or the call failed).
                self._sm_util = {pid: 0.0 for pid in running} if no_new else {}
            return
        per_pid: dict[int, list[float]] = {}
        for s in samples:
            self._util_last_seen_us = max(self._util_last_seen_us, s.timeStamp)
            # above 100 %: an invalid sample (NaN unless the PID has valid ones)
            per_pid.setdefault(s.pid, []).extend([float(s.smUtil)] if s.smUtil <= 100 else [])
        means = {pid: sum(v) / len(v) if v else NAN for pid, v in per_pid.items()}
        # A process the driver took no sample of was not on the SMs in that window (0 %, nvitop's convention).
        means.update({pid: 0.0 for pid in running if pid not in means})
        device = list(self._device_util)
        self._device_util.clear()
        if not device:
            util = self._query("utilization", self._api.nvmlDeviceGetUtilizationRates, self._handle)
            device = [] if util is NA else [float(util.gpu)]
        self._sm_util = clamp_to_device(means, sum(device) / len(device) if device else NAN)

    def gpu_process_metrics(self, t: float | None = None) -> dict[int, GpuProcessMetrics]:
        """GPU memory and SM use of every process NVML lists (or took a utilisation sample of).

        SM use is read at most every PROCESS_UTIL_PERIOD_S of run time ``t`` (always when t is None),
        for every PID at once, and clamped over all of them (docs/nvml.md).
        """
        with self._lock:
            if self._handle is None or not self.status.available:
                return {}
            running = self._running()
            util_known = "process_utilization" not in self._query.unsupported
            # 0.9: the sampler's 0.5 s process ticks drift by milliseconds; a read is due every second tick,
            # and at once when a process appears that the last read did not cover (its share is not known yet).
            newcomer = bool(running.keys() - self._sm_util.keys())
            if util_known and (
                t is None or newcomer or t - self._util_read_t >= 0.9 * PROCESS_UTIL_PERIOD_S
            ):
                self._util_read_t = -math.inf if t is None else t
                self._update_sm_util(running)
            if self._query.lost:
                return {}
            sampled = {pid for pid, sm in self._sm_util.items() if not math.isnan(sm)}
            return {
                pid: GpuProcessMetrics(pid, running.get(pid, NAN), self._sm_util.get(pid, NAN))
                for pid in running.keys() | sampled
            }

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
            if self._handle is None or not self.status.available:
                return set()
            return set(self._running())


def clamp_to_device(sm: dict[int, float], device_util: float) -> dict[int, float]:
    """Per-process SM %, scaled down together to ``device_util`` when their sum exceeds it by > tolerance."""
    total = sum(v for v in sm.values() if not math.isnan(v))
    if math.isnan(device_util) or total <= device_util + SM_SUM_TOLERANCE_PCT:
        return dict(sm)
    scale = device_util / total
    return {pid: value * scale for pid, value in sm.items()}


def _text(value: Any) -> str | None:
    return None if value is NA else str(value)


def _int(value: Any) -> int | None:
    return None if value is NA else int(value)
