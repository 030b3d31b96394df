"""A job watched without a probe (``--beside`` a process that has none): which one, and what is known of it.

Its iteration rate is unknown, never guessed; what the run does show is its SM % and GPU memory
(NVML, processes.csv) alone, before the other job started, and beside it.
"""

from __future__ import annotations

import math
from typing import Sequence

from gpumon.core.jobs.beside import KnownUse
from gpumon.core.interference.evidence import window_values
from gpumon.core.store.trace import Run


def blind_slots(run: Run) -> frozenset[str]:
    """The slots of the jobs attached without a probe (their steps unseen): none, one, or both."""
    return frozenset(
        entry.slot for entry in run.workloads if entry.attached and entry.probe is False
    )


def known_use(
    run: Run, slot: str, alone: tuple[float, float], shared: tuple[float, float]
) -> KnownUse:
    """The job's mean SM % and GPU memory over its ``alone`` window and its ``shared`` window (run seconds)."""

    def mean(column: str, window: tuple[float, float]) -> float:
        values = window_values(run, "processes", column, window[0], window[1], slot)
        return float(values.mean()) if len(values) else math.nan

    nvml = run.nvml_status
    return KnownUse(
        mean("gpu_sm_util", alone),
        mean("gpu_sm_util", shared),
        mean("gpu_mem_mib", alone),
        mean("gpu_mem_mib", shared),
        "" if nvml.available else nvml.reason,
    )


def merged(known: Sequence[KnownUse]) -> KnownUse:
    """Several runs' figures as one: the mean of each field over the runs that have it."""

    def mean(values: list[float]) -> float:
        kept = [v for v in values if not math.isnan(v)]
        return sum(kept) / len(kept) if kept else math.nan

    return KnownUse(
        sm_alone=mean([k.sm_alone for k in known]),
        sm_shared=mean([k.sm_shared for k in known]),
        mem_alone_mib=mean([k.mem_alone_mib for k in known]),
        mem_shared_mib=mean([k.mem_shared_mib for k in known]),
        nvml_off=next((k.nvml_off for k in known if k.nvml_off), ""),
    )
