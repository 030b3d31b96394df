"""The one tolerant way to call NVML (``Query``: errors become ``NA``), and the driver-version-bound calls.

NotSupported / FunctionNotFound / NoPermission make a quantity N/A for good (logged once), GPU-lost marks
the device lost, anything else is a one-off N/A. Details: docs/nvml.md.
"""

from __future__ import annotations

import ctypes
import enum
import logging
import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Final

from gpumon.core.records.model import NAN

LOG = logging.getLogger(__name__)

MIB = 1024 * 1024
# NVML error codes (nvml.h); pynvml exposes the same numbers as NVML_ERROR_*.
NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, INSUFFICIENT_SIZE = 3, 4, 6, 7
DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND = 9, 12, 13
GPU_IS_LOST, RESET_REQUIRED, LIB_RM_VERSION_MISMATCH = 15, 16, 18

UNSUPPORTED_CODES = frozenset({NOT_SUPPORTED, FUNCTION_NOT_FOUND, NO_PERMISSION})
LOST_REASONS = {GPU_IS_LOST: "GPU lost", RESET_REQUIRED: "GPU requires a reset"}


class Missing(enum.Enum):
    """The N/A marker a failed query returns (an enum member: a type of its own, so ``is NA`` narrows)."""

    NA = "NA"

    def __repr__(self) -> str:
        return "NA"


NA: Final = Missing.NA


@dataclass
class Query:
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

    def fail(self, key: str, code: int) -> Missing:
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


@dataclass
class Calls:
    """Newest-first versions of the calls whose symbol depends on the driver's age, bound once per pynvml."""

    processes: dict[str, tuple[Callable, ...]]  # "Compute" / "Graphics" -> versions
    process_utilization: Callable
    memory: tuple[Callable, ...]
    temperature: tuple[Callable, ...]
    utilization: Callable  # handle -> (gpu %, memory %), every tick
    sm_clock: Callable  # handle -> MHz, every tick

    @classmethod
    def bind(cls, nv: ModuleType) -> Calls:
        processes = {}
        for kind in ("Compute", "Graphics"):
            base = f"nvmlDeviceGet{kind}RunningProcesses"
            processes[kind] = (
                *_present(nv, f"{base}_v3", f"{base}_v2"),
                _v1_running_processes(nv, base),
            )
        memory: tuple[Callable, ...] = (nv.nvmlDeviceGetMemoryInfo,)
        if hasattr(nv, "nvmlMemory_v2"):

            def nvmlDeviceGetMemoryInfo_v2(
                handle: Any,
            ) -> Any:  # named as NVML names it: the log says which ran
                return nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)

            memory = (nvmlDeviceGetMemoryInfo_v2, *memory)
        return cls(
            processes,
            process_utilization(nv),
            memory,
            _present(nv, "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
            utilization_rates(nv),
            sm_clock(nv),
        )


@dataclass
class Device:
    """One GPU as every reader sees it: pynvml, the GPU's own query, its handle and the bound calls."""

    nv: ModuleType
    q: Query
    handle: Any
    calls: Calls


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


class Utilization(ctypes.Structure):
    """nvmlUtilization_t, as a plain structure (pynvml's reads each field through Python code)."""

    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def utilization_rates(nv: ModuleType) -> Callable:
    """nvmlDeviceGetUtilizationRates as (gpu %, memory %), into one buffer kept for every call: the sampler reads it
    every tick, and pynvml's wrapper allocates a structure and reads each field through Python code. The C function
    is looked up at the first call (a missing one raises FunctionNotFound then, to the query). Calls must not overlap
    (the buffer is shared): NvmlSource makes them under its lock."""
    buffer = Utilization()
    into, success = ctypes.byref(buffer), nv.NVML_SUCCESS
    fn: Any = None

    def call(handle: Any) -> tuple[int, int]:
        nonlocal fn
        if fn is None:
            fn = nv._nvmlGetFunctionPointer("nvmlDeviceGetUtilizationRates")
        ret = fn(handle, into)
        if ret != success:
            raise nv.NVMLError(ret)
        return buffer.gpu, buffer.memory

    return call


def sm_clock(nv: ModuleType) -> Callable:
    """nvmlDeviceGetClockInfo(NVML_CLOCK_SM) in MHz, into one buffer kept for every call (as ``utilization_rates``)."""
    buffer = ctypes.c_uint(0)
    into, kind, success = ctypes.byref(buffer), nv.NVML_CLOCK_SM, nv.NVML_SUCCESS
    fn: Any = None

    def call(handle: Any) -> int:
        nonlocal fn
        if fn is None:
            fn = nv._nvmlGetFunctionPointer("nvmlDeviceGetClockInfo")
        ret = fn(handle, kind, into)
        if ret != success:
            raise nv.NVMLError(ret)
        return buffer.value

    return call


def process_utilization(nv: ModuleType) -> Callable:
    """nvmlDeviceGetProcessUtilization in one C call, into a buffer with room to spare (grown, and the read made
    again, while the driver says it is too small). pynvml's wrapper makes two: a size query, then the read, and each
    costs the driver's full price (~1,150 µs on the H100); it also raises INSUFFICIENT_SIZE when a sampling instant
    lands between them (1 read in 50 at the H100's call costs, on the fake)."""
    # samples; the driver keeps about one per process per sampling instant since ``last_seen_us``
    room = [64]

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

    return call


@dataclass
class Cadence:
    """A read due every ``period_s`` of run time (``slack``: a tick that drifts a little early still counts)."""

    period_s: float
    slack: float = 0.95
    last_t: float = -math.inf

    def due(self, t: float | None, force: bool = False) -> bool:
        """Whether a read at ``t`` is due (always when t is None or ``force``); marks it read when it is."""
        if not force and t is not None and t - self.last_t < self.slack * self.period_s:
            return False
        self.last_t = -math.inf if t is None else t
        return True

    @property
    def next_t(self) -> float:
        """The run time from which a read is due again."""
        return self.last_t + self.slack * self.period_s


def field_number(value: Any) -> int | float:
    """The number in an nvmlFieldValue_t, by its valueType (exact: integers stay integers)."""
    member = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
    return getattr(value.value, member[value.valueType])


def mib(used_bytes: int | None) -> float:
    """Bytes as MiB; NaN for NVML's "not available" value."""
    if used_bytes is None or used_bytes >= 0xFFFFFFFFFFFFFFFF:
        return NAN
    return used_bytes / MIB


def number(value: Any | Missing, scale: float = 1.0) -> float:
    """A query's result as a float, NaN for ``NA``."""
    return NAN if value is NA else value * scale


def text(value: Any | Missing) -> str | None:
    return None if value is NA else str(value)


def integer(value: Any | Missing) -> int | None:
    return None if value is NA else int(value)
