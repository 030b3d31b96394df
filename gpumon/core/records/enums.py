"""The closed vocabularies the records use: a run's status, a job's state, a share mode, a PCIe method.

Each is a ``str`` enum (``class X(str, Enum)``: Python 3.10 has no ``StrEnum``), so a member equals its text,
is written to run.json and the tables as that text, and prints as it (``__str__``); reading it back
(``X(text)``) refuses any other text with ValueError.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar


class TextEnum(str, Enum):
    """A ``str`` enum that prints, formats and reprs as its value (``StrEnum`` of Python 3.11, for 3.10 too): a
    message that quotes a status (``{status!r}``) reads as it did when statuses were text."""

    def __repr__(self) -> str:
        return repr(str(self.value))

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class RunStatus(TextEnum):
    """run.json's ``status`` (RECORDING while written), and what a still-recording run reads as (RUNNING while its
    runner is proven to hold it, else INTERRUPTED: ``core/store/runner.run_status``)."""

    RECORDING = "recording"
    COMPLETE = "complete"
    FAILED = "failed"  # the capture finished but a job it started failed, or a capture thread died
    TRUNCATED = "truncated"  # the capture could not be written to its end
    RUNNING = "running"
    INTERRUPTED = "interrupted"


class JobState(TextEnum):
    """A job's lifecycle (``WorkloadState.state``, run.json ``workloads[i].state``)."""

    STARTING = "starting"
    RUNNING = "running"
    EXITED = "exited"
    STOPPED = "stopped"
    FAILED = "failed"
    DETACHED = "detached"
    NOT_STARTED = "not started"


# The states a job ends in.
ENDED = frozenset({JobState.EXITED, JobState.STOPPED, JobState.FAILED, JobState.DETACHED})


class ShareKind(TextEnum):
    """How co-resident jobs share the GPU (``--share``'s word; run.json ``share.mode``)."""

    TIMESLICE = "timeslice"
    MPS = "mps"


class PcieMethod(TextEnum):
    """How the PCIe traffic is read (run.json ``gpu.pcie_method``; docs/nvml.md)."""

    GPM = "gpm"
    COUNTERS = "counters"
    THROUGHPUT = "throughput"


E = TypeVar("E", bound=TextEnum)


def member(kind: type[E], text: object) -> E | None:
    """``kind``'s member named by ``text``, or None for anything else (a reader's "not recorded")."""
    try:
        return kind(text)
    except ValueError:
        return None
