"""PCIe bytes of the jobs' GPU, one reader per method: GPM, the wrap-safe byte counters, the throughput call.

``choose_pcie`` is the one place that decides: GPM where it delivers PCIe, else the counters, else the 20 ms
throughput call. A reader whose method fails for good answers None, and the source chooses again. GPM's
metrics (PCIe and SM activity) and the throughput call are read once a second: each GPM reading is the
average since the previous one, so nothing is lost between; the counters are read on the cadence their
wrap demands (sources/pcie.py). Details: docs/nvml.md.
"""

from __future__ import annotations

import math
import os
import time
from typing import Protocol

from gpumon.core.records.model import GPM_COLUMNS, NAN
from gpumon.core.sources.gpm import Gpm
from gpumon.core.sources.nvmlquery import (
    NA,
    NOT_SUPPORTED,
    Cadence,
    Device,
    LOG,
    field_number,
    number,
)
from gpumon.core.sources.pcie import COUNTER_BITS, WrapCounters, poll_period_s

FI_PCIE_COUNT_TX_BYTES, FI_PCIE_COUNT_RX_BYTES = 197, 198
PCIE_UTIL_TX_BYTES, PCIE_UTIL_RX_BYTES = 0, 1
PCIE_FIELDS = ("pcie_rx_bps", "pcie_tx_bps")
# GPM samples (~400 µs each on a busy H100) and the throughput call (~815 µs each) are read this often (run-time
# seconds); ticks between carry the last reading.
GPM_PERIOD_S = 1.0
THROUGHPUT_PERIOD_S = 1.0
# Set (to anything but "" or "0") to ignore GPM: PCIe bytes from the wrap-safe counters, no GPM columns, as on a
# GPU without GPM (how benchmarks/gpu_validation.py checks the counter path on a Hopper GPU).
NO_GPM_ENV = "GPUMON_NO_GPM"


class GpmReader:
    """GPM's metrics of the jobs' GPU, read once a second: each the average since the previous reading."""

    def __init__(self, gpm: Gpm) -> None:
        self.gpm = gpm
        self._cadence = Cadence(GPM_PERIOD_S)
        self.columns = dict.fromkeys(GPM_COLUMNS, NAN)  # the DeviceSample's GPM fields, last read
        self.pcie = (NAN, NAN)  # (RX, TX) bytes/s, last read

    @classmethod
    def open(cls, dev: Device) -> tuple[GpmReader | None, str]:
        """GPM where the GPU has it, is not split by MIG (device-level samples only) and GPUMON_NO_GPM is unset;
        else None and why not."""
        switch = os.environ.get(NO_GPM_ENV, "")
        if switch not in ("", "0"):
            return None, f"GPM switched off ({NO_GPM_ENV}={switch})"
        mig = dev.q("mig_mode", dev.nv.nvmlDeviceGetMigMode, dev.handle)
        if mig is not NA and mig[0] == 1:
            return None, "MIG is enabled (GPM device samples do not cover MIG instances)"
        gpm = Gpm(dev.nv, dev.handle)
        reason = gpm.open(0.0)
        if reason is not None:
            LOG.info("nvml: %s", reason)
            return None, reason
        return cls(gpm), ""

    def fields(self) -> list[str]:
        """The DeviceSample fields GPM delivers now ([] once it failed)."""
        return [] if self.gpm.failed else list(self.gpm.fields)

    def delivers_pcie(self) -> bool:
        """Whether GPM reads both PCIe directions now (asked every tick: nothing allocated)."""
        gpm = self.gpm
        return not gpm.failed and all(field in gpm.fields for field in PCIE_FIELDS)

    @property
    def next_read_t(self) -> float:
        """The run time from which ``read`` reads GPM again."""
        return self._cadence.next_t

    def read(self, t: float) -> None:
        """Take a reading at run time ``t`` when its second has come (NaN where GPM has none)."""
        if self._cadence.due(t):
            got = self.gpm.read(t)
            self.columns = {f: got.get(f, NAN) for f in GPM_COLUMNS}
            self.pcie = (got.get("pcie_rx_bps", NAN), got.get("pcie_tx_bps", NAN))


class PcieReader(Protocol):
    method: str

    @property
    def poll_period_s(self) -> float | None:
        """How often ``poll`` must be called between ticks, else None."""

    @property
    def counter_bits(self) -> int | None: ...

    def rates(self, t: float) -> tuple[float, float] | None:
        """(RX, TX) bytes/s at run time ``t``; None once this method has failed for good."""

    @property
    def next_read_t(self) -> float:
        """The run time from which ``rates`` reads NVML again (before it, it gives the last reading)."""

    def poll(self, t: float) -> None: ...


class GpmPcie:
    """PCIe bytes from GPM's reading (``GpmReader.read``, made first each tick)."""

    method = "gpm"
    poll_period_s = None
    counter_bits = None

    def __init__(self, gpm: GpmReader) -> None:
        self.gpm = gpm

    def rates(self, t: float) -> tuple[float, float] | None:
        return self.gpm.pcie if self.gpm.delivers_pcie() else None

    next_read_t = math.inf  # GPM is read by its ``GpmReader`` (``GpmReader.next_read_t``)

    def poll(self, t: float) -> None:
        """GPM needs no polling."""


class CounterPcie:
    """PCIe bytes from NVML's byte counters (fields 197/198), made wrap-safe."""

    method = "counters"

    def __init__(self, dev: Device, capacity_bps: float) -> None:
        self.dev = dev
        self.capacity_bps = capacity_bps
        self.counters: WrapCounters | None = None
        self._read_t = -math.inf

    @property
    def poll_period_s(self) -> float | None:
        counters = self.counters
        return None if counters is None else poll_period_s(counters.bits, counters.capacity_bps)

    @property
    def counter_bits(self) -> int | None:
        return None if self.counters is None else self.counters.bits

    def read(self, t: float = -math.inf) -> bool:
        """Read both byte counters by their valueType into the wrap-safe totals; False if they fail."""
        q, nv = self.dev.q, self.dev.nv
        values = q(
            "pcie_counters",
            nv.nvmlDeviceGetFieldValues,
            self.dev.handle,
            [FI_PCIE_COUNT_RX_BYTES, FI_PCIE_COUNT_TX_BYTES],
        )
        if values is NA:
            return False
        for value in values:
            if value.nvmlReturn != nv.NVML_SUCCESS:
                q.fail("pcie_counters", value.nvmlReturn)
                return False
        bits = COUNTER_BITS.get(values[0].valueType)
        if bits is None or COUNTER_BITS.get(values[1].valueType) != bits:
            q.fail("pcie_counters", NOT_SUPPORTED)
            return False
        if self.counters is None or self.counters.bits != bits:
            self.counters = WrapCounters(bits, self.capacity_bps)
        stamp = values[0].timestamp or time.time_ns() // 1000
        self.counters.add(int(stamp), int(field_number(values[0])), int(field_number(values[1])))
        self._read_t = t
        return True

    def poll(self, t: float) -> None:
        """Read between ticks (run time ``t``) so no gap hides a wrap."""
        self.read(t)

    next_read_t = -math.inf  # the counters' rates are new every tick

    def rates(self, t: float) -> tuple[float, float] | None:
        period = self.poll_period_s
        # Between ticks the sampler polls; read here only when that poll is overdue.
        if period is None or t - self._read_t >= period:
            self.read(t)
        if "pcie_counters" in self.dev.q.unsupported or self.counters is None:
            return None
        return self.counters.rates()


class ThroughputPcie:
    """PCIe bytes from nvmlDeviceGetPcieThroughput (a 20 ms window, KB/s), read once a second."""

    method = "throughput"
    poll_period_s = None
    counter_bits = None

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self._cadence = Cadence(THROUGHPUT_PERIOD_S)
        self._values = (NAN, NAN)

    def rates(self, t: float) -> tuple[float, float] | None:
        q, fn = self.dev.q, self.dev.nv.nvmlDeviceGetPcieThroughput
        if self._cadence.due(t):
            rx = q("pcie_throughput", fn, self.dev.handle, PCIE_UTIL_RX_BYTES)
            tx = q("pcie_throughput", fn, self.dev.handle, PCIE_UTIL_TX_BYTES)
            self._values = (number(rx, 1024.0), number(tx, 1024.0))
        return None if "pcie_throughput" in q.unsupported else self._values

    @property
    def next_read_t(self) -> float:
        return self._cadence.next_t

    def poll(self, t: float) -> None:
        """The throughput call needs no polling."""


def choose_pcie(dev: Device, gpm: GpmReader | None, capacity_bps: float) -> PcieReader | None:
    """The one place that decides how PCIe bytes are read: GPM, else counters, else throughput, else None."""
    if gpm is not None and gpm.delivers_pcie():
        return GpmPcie(gpm)
    counters = CounterPcie(dev, capacity_bps)
    if counters.read():
        return counters
    probe = dev.q(
        "pcie_throughput", dev.nv.nvmlDeviceGetPcieThroughput, dev.handle, PCIE_UTIL_RX_BYTES
    )
    return None if probe is NA else ThroughputPcie(dev)
