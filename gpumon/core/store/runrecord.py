"""A run directory as its run.json describes it (``RunRecord``), and the row ``gpumon runs`` shows of it.

What needs run.json alone: its one reading (``read_meta``: ``RunMeta.read``, the ``TraceError`` that says what is
wrong), what the run's description reads as (label, mode, share, device), and a finished run's row from the summary
its recorder wrote. ``trace.Run`` is a ``RunRecord`` that also reads the tables; this module imports none of what
reading them needs, so listing runs does not pay for it (``core/store/listing.py``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from gpumon.core.records.enums import RunStatus
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import SourceStatus
from gpumon.core.records.share import shown_share
from gpumon.core.store.runmeta import RunMeta, WorkloadRecord
from gpumon.core.store.runner import RunnerInfo, run_status
from gpumon.core.store.summary import RunSummaryRecord
from gpumon.errors import UsageError


class TraceError(UsageError):
    """A run directory that is missing, unreadable or corrupt."""


def read_meta(root: Path) -> RunMeta:
    """The run.json of the run directory ``root``, checked (``RunMeta.read``); TraceError saying what is wrong."""
    try:
        return RunMeta.read(
            os.path.join(root, "run.json")
        )  # a str: a Path's join cost a twentieth of a read
    except OSError as exc:  # asked only now: ``gpumon runs`` opens thousands that are there
        if not root.is_dir():
            raise TraceError(f"{root}: no such run directory") from None
        if isinstance(exc, FileNotFoundError):
            raise TraceError(f"{root}: not a gpumon run (no run.json)") from None
        raise TraceError(f"cannot read {root / 'run.json'}: {exc.strerror}") from None
    except ValueError as exc:  # decode.Refused: what is wrong with its content
        raise TraceError(f"{root / 'run.json'}: {exc}") from None


@dataclass(frozen=True)
class RunRecord:
    """A run directory and its run.json: what the run's description reads as (``trace.Run`` adds its tables)."""

    path: Path
    meta: RunMeta

    @property
    def label(self) -> str:
        return self.meta.label if self.meta.label is not None else self.path.name

    @property
    def mode(self) -> str:
        return self.meta.mode if self.meta.mode is not None else "?"

    @property
    def trained_on(self) -> str:
        """``cpu`` or ``cuda[:N]``: what the workloads said they trained on, else run.json's device ("?" if neither)."""
        for w in self.meta.workloads:
            if isinstance(w.meta, dict) and w.meta.get("device") not in (None, "", "auto"):
                return str(w.meta["device"])
        return self.meta.device or "?"

    @property
    def share(self) -> str:
        """How the jobs shared the GPU: ``timeslice`` (also for runs recorded before modes), ``mps``..."""
        return self.meta.share.describe()

    @property
    def workloads(self) -> list[WorkloadRecord]:
        return list(self.meta.workloads)

    @property
    def gpu(self) -> GpuInfo | None:
        """run.json's ``gpu`` (None without NVML)."""
        return self.meta.gpu

    @property
    def specs(self) -> dict[str, str]:
        """The spec of each recorded workload by slot."""
        return {w.slot: w.spec_or_unknown for w in self.meta.workloads}

    @property
    def nvml_status(self) -> SourceStatus:
        """Whether NVML was read during the run, and why not, as the live session published it."""
        return self.meta.nvml


@dataclass(frozen=True)
class DamagedRun:
    """A directory of the runs directory with a run.json that does not read as a run (corrupt, truncated, empty)."""

    path: Path
    problem: str

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class RunSummary:
    """What ``gpumon runs`` prints for one run."""

    name: str
    label: str
    mode: str
    share: str
    status: str
    workloads: str
    duration_s: float
    rates: dict[str, float]
    runner: RunnerInfo | None = None  # who writes (wrote) it; shown with a running run
    steps: dict[str, int] = field(default_factory=dict)  # each job's step rows
    device: str = (
        "?"  # what the jobs trained on (Run.trained_on): on the CPU the share reads "cpu cores"
    )

    @property
    def shown_share(self) -> str:
        return shown_share(self.share, self.device)


def recorded_summary(meta: RunMeta) -> RunSummaryRecord | None:
    """The summary run.json holds where it stands for the run (a finished run's); None: the run's steps say
    (``trace.summary_of``: a run still recording, or one recorded before summaries)."""
    return meta.summary if meta.status != RunStatus.RECORDING else None


def summary_row(run: RunRecord, summary: RunSummaryRecord) -> RunSummary:
    """``gpumon runs``' row of ``run``, with each job's exclusive rate and steps from ``summary``."""
    meta = run.meta
    return RunSummary(
        name=run.path.name,
        label=run.label,
        mode=run.mode,
        share=run.share,
        status=run_status(meta.status, meta.runner, run.path),
        workloads=" + ".join(f"{w.slot}={w.spec_or_unknown}" for w in meta.workloads),
        duration_s=meta.duration_s or math.nan,
        rates=summary.rates,
        runner=meta.runner,
        device=run.trained_on,
        steps=summary.steps,
    )
