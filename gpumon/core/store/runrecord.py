"""A run directory as its run.json describes it (``RunRecord``), and the row ``gpumon runs`` shows of it.

What needs run.json alone: its one reading (``read_meta``: ``RunMeta.read``, the ``TraceError`` that says what is
wrong; ``read_head``: only the fields a row shows, ``RunHead``, through the same checks), what the run's description
reads as (label, mode, share, device), and a finished run's row from the summary its recorder wrote. ``trace.Run`` is a ``RunRecord`` that also reads the tables; this module imports none of what
reading them needs, so listing runs does not pay for it (``core/store/listing.py``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumon.core.records.enums import RunStatus
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import SourceStatus
from gpumon.core.records.share import shown_share
from gpumon.core.store.runmeta import RunHead, RunMeta, WorkloadRecord
from gpumon.core.store.runner import RunnerInfo, run_status
from gpumon.core.store.summary import RunSummaryRecord
from gpumon.errors import UsageError


class TraceError(UsageError):
    """A run directory that is missing, unreadable or corrupt."""


def read_meta(root: Path) -> RunMeta:
    """The run.json of the run directory ``root``, checked (``RunMeta.read``); TraceError saying what is wrong."""
    return _read(RunMeta, root)


def read_head(root: Path) -> RunHead:
    """What a row of ``gpumon runs`` shows of the run.json of ``root`` (``RunHead.read``: ``read_meta``'s checks of
    those fields, and nothing else built); TraceError saying what is wrong."""
    return _read(RunHead, root)


def _read(kind: type[RunMeta] | type[RunHead], root: Path) -> Any:
    try:
        return kind.read(
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
        return _label(self.path, self.meta)

    @property
    def mode(self) -> str:
        return _mode(self.meta)

    @property
    def trained_on(self) -> str:
        """``cpu`` or ``cuda[:N]``: what the workloads said they trained on, else run.json's device ("?" if neither)."""
        return _trained_on(self.meta)

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


def recorded_summary(meta: RunMeta | RunHead) -> RunSummaryRecord | None:
    """The summary run.json holds where it stands for the run (a finished run's); None: the run's steps say
    (``trace.summary_of``: a run still recording, or one recorded before summaries)."""
    return meta.summary if meta.status != RunStatus.RECORDING else None


def _label(path: Path, meta: RunMeta | RunHead) -> str:
    return meta.label if meta.label is not None else path.name


def _mode(meta: RunMeta | RunHead) -> str:
    return meta.mode if meta.mode is not None else "?"


def _trained_on(meta: RunMeta | RunHead) -> str:
    for w in meta.workloads:
        if isinstance(w.meta, dict) and w.meta.get("device") not in (None, "", "auto"):
            return str(w.meta["device"])
    return meta.device or "?"


def summary_row(run: RunRecord, summary: RunSummaryRecord) -> RunSummary:
    """``gpumon runs``' row of ``run``, with each job's exclusive rate and steps from ``summary``."""
    return head_row(run.path, run.meta, summary)


def head_row(path: Path, meta: RunMeta | RunHead, summary: RunSummaryRecord) -> RunSummary:
    """``gpumon runs``' row of the run at ``path`` described by ``meta`` (all of run.json, or a row's fields of it),
    with each job's exclusive rate and steps from ``summary``."""
    return RunSummary(
        name=path.name,
        label=_label(path, meta),
        mode=_mode(meta),
        share=meta.share.describe(),
        status=run_status(meta.status, meta.runner, path),
        workloads=" + ".join(f"{w.slot}={w.spec_or_unknown}" for w in meta.workloads),
        duration_s=meta.duration_s or math.nan,
        rates=summary.rates,
        runner=meta.runner,
        device=_trained_on(meta),
        steps=summary.steps,
    )
