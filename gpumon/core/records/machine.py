"""The machine a run was recorded on, as records: ``GpuInfo`` (run.json ``gpu``) and ``HostInfo`` (``host``).

Built from NVML's and psutil's answers when a capture starts, and read back from run.json by their fields
(``jsonfields``): every reader takes attributes, none a dict by key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpumon.core.records import jsonfields as jf
from gpumon.core.records.enums import PcieMethod

_opt_text = jf.optional(jf.text)
_BPS = jf.optional(jf.numbers(0.0, 1e13))  # 10 TB/s: beyond any PCIe link
_MIB = jf.optional(jf.numbers(0.0, 1e9))  # a PiB of memory


@dataclass(frozen=True)
class GpuInfo:
    """The GPU the jobs used: identity, PCIe link and how it is read, what NVML and GPM report on it."""

    index: int | None = jf.slot(jf.optional(jf.integers(0, 1024)), null=True)
    name: str | None = jf.slot(_opt_text, null=True)
    uuid: str | None = jf.slot(_opt_text, null=True)
    driver: str | None = jf.slot(_opt_text, null=True)
    compute_mode: int | None = jf.slot(jf.optional(jf.integers(0, 16)), null=True)
    pcie_gen: int | None = jf.slot(jf.optional(jf.integers(0, 64)), null=True)
    pcie_width: int | None = jf.slot(jf.optional(jf.integers(0, 64)), null=True)
    mem_total_mib: float | None = jf.slot(_MIB, null=True)
    pcie_method: PcieMethod | None = jf.slot(jf.optional(jf.member(PcieMethod)), null=True)
    pcie_max_bps: float | None = jf.slot(_BPS, null=True)
    pcie_counter_bits: int | None = jf.slot(jf.optional(jf.integers(0, 128)), null=True)
    pcie_poll_ms: float | None = jf.slot(jf.optional(jf.numbers(0.0, 1e7)), null=True)
    gpm_metrics: tuple[str, ...] = jf.slot(jf.texts, default=())
    gpm_reason: str = jf.slot(jf.text, default="")
    unsupported: tuple[str, ...] = jf.slot(jf.texts, default=())

    def to_json(self) -> dict[str, Any]:
        return jf.encode(self)

    @classmethod
    def from_json(cls, entry: object) -> "GpuInfo":
        """Refused (``decode.Refused``) with the key and why for anything it does not take."""
        return jf.decode(cls, entry, "gpu.")

    @classmethod
    def of_device(cls, info: dict[str, Any]) -> "GpuInfo":
        """NVML's device info (``NvmlSource.device_info``) as a record: a value out of its bounds is left unknown,
        never an error (the driver is the hardware boundary, not a file someone wrote)."""
        return jf.decode_known(cls, info)


@dataclass(frozen=True)
class HostInfo:
    """The host: its name, platform, CPUs (and those the run could use) and memory."""

    hostname: str | None = jf.slot(_opt_text, null=True)
    platform: str | None = jf.slot(_opt_text, null=True)
    cpus: int | None = jf.slot(jf.optional(jf.integers(0, 1 << 20)), null=True)
    cpu_affinity: tuple[int, ...] = jf.slot(jf.ints, default=())
    mem_total_mib: float | None = jf.slot(_MIB, null=True)

    def to_json(self) -> dict[str, Any]:
        return jf.encode(self)

    @classmethod
    def from_json(cls, entry: object) -> "HostInfo":
        return jf.decode(cls, entry, "host.")
