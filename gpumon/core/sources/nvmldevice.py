"""One GPU's device figures: utilisation and SM clock every tick, memory, power and temperature once a second.

The slow fields change slowly (temperature, power are averaged by the driver over about a second) and a
tick that carries the last reading of them costs two NVML calls instead of five.
"""

from __future__ import annotations

from dataclasses import replace

from gpumon.core.records.model import NAN, DeviceSample
from gpumon.core.sources.nvmlquery import MIB, NA, Cadence, Device, number

# Memory, power and temperature are read this often (run-time seconds); ticks between carry the last reading.
SLOW_PERIOD_S = 1.0
SLOW_FIELDS = ("mem_used_mib", "mem_total_mib", "power_w", "temp_c")


def fast_fields(dev: Device) -> dict[str, float]:
    """Utilisation and SM clock (1-2 µs a call on the H100); NaN if N/A."""
    q, calls, h = dev.q, dev.calls, dev.handle
    util = q("utilization", calls.utilization, h)
    return {
        "gpu_util": NAN if util is NA else float(util[0]),
        "mem_util": NAN if util is NA else float(util[1]),
        "sm_clock_mhz": number(q("sm_clock", calls.sm_clock, h)),
    }


def between(dev: Device, last: DeviceSample, t: float) -> DeviceSample:
    """``last`` at run time ``t``, its utilisation and SM clock read again (``fast_fields``) and every other field
    carried: a tick between the once-a-second reads, in two NVML calls and one record (what each wake-up touches is
    most of its cost when training jobs hold both cores: ~90 µs against ~250 through the full reading, 2-core VM,
    fake NVML)."""
    return replace(last, t=t, **fast_fields(dev))


def slow_fields(dev: Device) -> dict[str, float]:
    """Memory, power and temperature (1-6 µs a call on the H100); NaN if N/A."""
    q, nv, h = dev.q, dev.nv, dev.handle
    memory = q("memory", dev.calls.memory, h)
    return {
        "mem_used_mib": NAN if memory is NA else memory.used / MIB,
        "mem_total_mib": NAN if memory is NA else memory.total / MIB,
        "power_w": number(q("power", nv.nvmlDeviceGetPowerUsage, h), 0.001),
        "temp_c": number(q("temperature", dev.calls.temperature, h, nv.NVML_TEMPERATURE_GPU)),
    }


def device_fields(dev: Device) -> dict[str, float]:
    """Every device figure, read now."""
    return {**fast_fields(dev), **slow_fields(dev)}


class DeviceReader:
    """The jobs' GPU: the fast fields every call, the slow ones when their second has come."""

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self._slow = Cadence(SLOW_PERIOD_S)
        self._slow_values = dict.fromkeys(SLOW_FIELDS, NAN)

    @property
    def next_slow_t(self) -> float:
        """The run time from which ``read`` reads the slow fields again."""
        return self._slow.next_t

    def read(self, t: float) -> dict[str, float]:
        """The device figures at run time ``t``."""
        values = fast_fields(self.dev)
        if self._slow.due(t):
            self._slow_values = slow_fields(self.dev)
        values.update(self._slow_values)
        return values

    def probe(self) -> None:
        """Query each device figure once, so that what is unsupported is known before sampling."""
        q, nv, h = self.dev.q, self.dev.nv, self.dev.handle
        q("utilization", self.dev.calls.utilization, h)
        q("power", nv.nvmlDeviceGetPowerUsage, h)
        q("temperature", self.dev.calls.temperature, h, nv.NVML_TEMPERATURE_GPU)
        q("sm_clock", self.dev.calls.sm_clock, h)
