"""The box's other GPUs, for the overview: each read with the µs-cheap calls and its two process lists.

Never PCIe, GPM or per-process utilisation: those are the jobs' GPU's alone. Each GPU has its own query, so
its errors (a lost GPU) stay its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from gpumon.core.records.model import DeviceSample, GpuSummary
from gpumon.core.sources.nvmldevice import device_fields
from gpumon.core.sources.nvmlprocs import listed
from gpumon.core.sources.nvmlquery import NA, Calls, Device, Query, text


@dataclass
class Peer:
    """Another GPU of the box."""

    index: int
    dev: Device
    name: str | None
    uuid: str | None

    def summary(self, t: float) -> GpuSummary:
        """Its figures now (~80 µs on the H100); no sample once lost."""
        q = self.dev.q
        if q.lost:
            return GpuSummary(self.index, self.name, self.uuid, None, None)
        fields = device_fields(self.dev)
        found = listed(q, self.dev.calls.processes, self.dev.handle)
        if q.lost:
            return GpuSummary(self.index, self.name, self.uuid, None, None)
        count = None if found is None else len(found)
        return GpuSummary(self.index, self.name, self.uuid, DeviceSample(t=t, **fields), count)


def open_peers(nv: ModuleType, calls: Calls, count: int, ours: int | None) -> list[Peer]:
    """The box's GPUs other than ``ours``, each with its own query; a GPU that does not answer is left out."""
    if count < 2 or ours is None:
        return []
    peers = []
    for index in range(count):
        if index == ours:
            continue
        q = Query(nv, where=f"GPU {index}: ")
        handle = q("handle", nv.nvmlDeviceGetHandleByIndex, index)
        if handle is NA:
            continue
        name = text(q("name", nv.nvmlDeviceGetName, handle))
        uuid = text(q("uuid", nv.nvmlDeviceGetUUID, handle))
        peers.append(Peer(index, Device(nv, q, handle, calls), name, uuid))
    return peers
