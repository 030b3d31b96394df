"""``--beside PID``: a process gpumon did not start, watched as job B (never signalled, never owned).

``check_target`` refuses, before anything is created, a PID that does not exist, belongs to
another user, or whose process tree holds gpumon (gpumon itself or one of its ancestors: a shell,
init). ``SoloHistory`` says when enough of the process's steps alone
are known for the launched job to start (the probe's history ring usually holds them already).
"""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass

import psutil

from gpumon.core.probing.probe import ENV_AUTOPROBE
from gpumon.core.records.model import ProcessSample, SourceStatus, StepBatch, WorkloadState
from gpumon.core.records.enums import JobState
from gpumon.core.records.rates import MIN_EXCLUSIVE_S, MIN_EXCLUSIVE_STEPS
from gpumon.core.records.slots import Slot

SLOT: Slot = "B"
# The process is sampled alone (NVML, /proc) at least this long before job A starts, whatever its history.
MIN_ALONE_S = 2.0
DEFAULT_LEAD_S = 10.0
MIN_SOLO_STEPS = 20
SPEC_CHARS = 60
# A job whose steps gpumon cannot see: its rate is this, never a guess (compare, the live line).
UNKNOWN_RATE = "unknown (no probe)"


@dataclass(frozen=True)
class BesideTarget:
    """A running process of this user that gpumon watches without owning it."""

    pid: int
    argv: tuple[str, ...]
    name: str
    user: str
    create_time: float
    wrapped: bool = (
        False  # started by `gpumon wrap`: its probe opens its rendezvous at its first step
    )

    @property
    def command(self) -> str:
        return shlex.join(self.argv) if self.argv else self.name

    @property
    def spec(self) -> str:
        """Its name as a job, on one line: ``pid 4242: python train.py`` (the program without its directory)."""
        short = (os.path.basename(self.argv[0]), *self.argv[1:]) if self.argv else (self.name,)
        flat = " ".join(shlex.join(short).split())
        return (
            f"pid {self.pid}: {flat if len(flat) <= SPEC_CHARS else flat[: SPEC_CHARS - 1] + '…'}"
        )

    def to_json(self, probe: bool | None = None) -> dict:
        """What run.json records of it: attached, not owned; ``probe``: whether its steps are read (None: not yet known)."""
        found = {
            "pid": self.pid,
            "user": self.user,
            "command": self.command,
            "owned": False,
            "attached": True,
        }
        return found if probe is None else {**found, "probe": probe}

    def alive(self) -> bool:
        """Still the same process (not exited, not a zombie, its PID not reused)."""
        try:
            proc = psutil.Process(self.pid)
            return proc.create_time() == self.create_time and proc.status() != psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False


def check_target(text: str | int) -> BesideTarget:
    """The process ``--beside`` names, or ValueError with the one line that says why not."""
    try:
        pid = int(text)
    except (TypeError, ValueError):
        raise ValueError(f"--beside {text!r} is not a process id") from None
    if pid <= 0:
        raise ValueError(f"--beside {pid} is not a process id")
    if pid == os.getpid():
        raise ValueError(f"--beside {pid} is gpumon itself")
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            if proc.status() == psutil.STATUS_ZOMBIE:
                raise psutil.NoSuchProcess(pid)
            uid = proc.uids().real
            create_time = proc.create_time()
            name = proc.name()
            try:
                argv = tuple(proc.cmdline())
            except psutil.AccessDenied:
                argv = ()
            try:
                user = proc.username()
            except (KeyError, psutil.AccessDenied):
                user = str(uid)
            try:
                wrapped = proc.environ().get(ENV_AUTOPROBE) == "1"
            except (psutil.AccessDenied, OSError):
                wrapped = False
    except psutil.NoSuchProcess:
        raise ValueError(f"--beside {pid}: no such process") from None
    except psutil.AccessDenied:
        raise ValueError(
            f"--beside {pid} belongs to another user (gpumon watches only your own processes)"
        ) from None
    if uid != os.getuid():
        raise ValueError(
            f"--beside {pid} belongs to {user}, not to you (gpumon watches only your own processes)"
        )
    if pid in {ancestor.pid for ancestor in psutil.Process().parents()}:
        raise ValueError(
            f"--beside {pid} ({name}) is an ancestor of gpumon: its process tree holds gpumon and its "
            "jobs, whose use would be counted as its own; name the training process itself"
        )
    return BesideTarget(pid, argv, name, user, create_time, wrapped)


class SoloHistory:
    """The steps of the attached process known so far (its history ring, then live): first and last post-warm-up."""

    TAKES = (StepBatch,)  # what ``handle`` reads (Bus.subscribe)

    def __init__(self, slot: str = SLOT) -> None:
        self.slot = slot
        self.first: float | None = None
        self.last: float | None = None
        self.steps = 0
        self.probed = False  # a step of it came (warm-up included): it has a probe

    def handle(self, item: object) -> None:
        if isinstance(item, StepBatch) and item.slot == self.slot:
            self.probed = True
            for step in item.steps:
                if not step.warmup:
                    if self.first is None:
                        self.first = step.t
                    self.last = step.t
                    self.steps += 1

    def span(self) -> float:
        return 0.0 if self.first is None or self.last is None else self.last - self.first

    def enough(self, alone_s: float, lead_s: float) -> bool:
        """Job A may start: the process was watched alone ``MIN_ALONE_S`` and its solo steps span ``lead_s``
        (``MIN_SOLO_STEPS`` at least), or it was watched alone ``lead_s`` and either shows no step (no probe) or
        has taken the fewest solo steps its exclusive rate needs (a slow job: without them the live line and
        compare would have no rate alone for it, and no verdict)."""
        if alone_s < min(MIN_ALONE_S, lead_s):
            return False
        if self.span() >= lead_s and self.steps >= MIN_SOLO_STEPS:
            return True
        if alone_s < lead_s:
            return False
        return not self.probed or (
            self.steps > MIN_EXCLUSIVE_STEPS and self.span() >= MIN_EXCLUSIVE_S
        )


@dataclass(frozen=True)
class KnownUse:
    """What is known of a job without a probe: its SM % and GPU memory alone and beside the other job (NaN: none)."""

    sm_alone: float
    sm_shared: float
    mem_alone_mib: float
    mem_shared_mib: float
    nvml_off: str = (
        ""  # why NVML was not read ("unavailable: disabled (--no-nvml)"), "" when it was
    )
    sampled: bool = True  # False while no process sample of it has come (live, in its first second)

    def phrase(self, other: str) -> str:
        """``SM 30 % alone → 15 % beside fcn (-50 %), GPU memory 2.0 GiB → 2.0 GiB``; what NVML did not give is left out."""
        parts = []
        if not (math.isnan(self.sm_alone) and math.isnan(self.sm_shared)):
            change = ""
            if self.sm_alone > 0 and not math.isnan(self.sm_shared):
                change = f" ({(self.sm_shared / self.sm_alone - 1) * 100:+.0f} %)"
            parts.append(
                f"SM {_figure(self.sm_alone, '%')} alone → {_figure(self.sm_shared, '%')} beside {other}{change}"
            )
        if not (math.isnan(self.mem_alone_mib) and math.isnan(self.mem_shared_mib)):
            alone, shared = (
                _figure(v / 1024, "GiB", 1) for v in (self.mem_alone_mib, self.mem_shared_mib)
            )
            parts.append(f"GPU memory {alone} → {shared}")
        if parts:
            return ", ".join(parts)
        if self.nvml_off:
            return f"no GPU figures for it (NVML {self.nvml_off})"
        if not self.sampled:
            return "no GPU figures for it yet (no process sample so far)"
        return "no GPU figures for it (NVML gave none)"

    def to_dict(self) -> dict:
        return {
            k: None if math.isnan(v) else v
            for k, v in (
                ("sm_pct_alone", self.sm_alone),
                ("sm_pct_shared", self.sm_shared),
                ("gpu_mem_mib_alone", self.mem_alone_mib),
                ("gpu_mem_mib_shared", self.mem_shared_mib),
            )
        }


def _figure(value: float, unit: str, digits: int = 0) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f} {unit}"


class LiveKnownUse:
    """The live counterpart of ``KnownUse`` for the attached job: its SM % and GPU memory before the other job
    started (mean), and now (the last sample). "Started" is the other job's ``starting`` state, published before
    its process exists: a sample taken while it is being launched already shows it beside this one."""

    TAKES = (ProcessSample, WorkloadState, SourceStatus)  # what ``handle`` reads (Bus.subscribe)

    def __init__(self, slot: str = SLOT) -> None:
        self.slot = slot
        self.other_started = False
        self.nvml_off = ""
        self.sampled = False
        self._alone: list[tuple[float, float]] = []
        self._now: tuple[float, float] = (math.nan, math.nan)

    def handle(self, item: object) -> None:
        if isinstance(item, ProcessSample) and item.slot == self.slot:
            self.sampled = True
            self._now = (item.gpu_sm_util, item.gpu_mem_mib)
            if not self.other_started:
                self._alone.append(self._now)
        elif (
            isinstance(item, WorkloadState)
            and item.slot != self.slot
            and item.state in (JobState.STARTING, JobState.RUNNING)
        ):
            self.other_started = True
        elif isinstance(item, SourceStatus) and item.name == "nvml":
            self.nvml_off = "" if item.available else item.reason

    def known(self) -> KnownUse:
        def mean(i: int) -> float:
            values = [v[i] for v in self._alone if not math.isnan(v[i])]
            return sum(values) / len(values) if values else math.nan

        return KnownUse(mean(0), self._now[0], mean(1), self._now[1], self.nvml_off, self.sampled)
