"""A validated plan for ``gpumon run``: which workloads, on which device, for how long.

It sits above ``gpumon.core`` because it turns built-in workload specs into
commands (``gpumon.workloads.spec``, torch-free); the core never imports the
workloads package.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpumon.core.jobs.beside import check_target
from gpumon.core.jobs.devices import check_device_present
from gpumon.core.jobs.interpreter import require_workload_python
from gpumon.core.jobs.launcher import LaunchRequest
from gpumon.core.jobs.mps import check_share
from gpumon.core.capture.sequence import RunSequence
from gpumon.core.capture.session import Session, SessionConfig
from gpumon.errors import UsageError
from gpumon.workloads.spec import DEVICE_PATTERN, parse_workload_spec, to_argv

MAX_WORKLOADS = 2


@dataclass(frozen=True)
class RunPlan:
    session: SessionConfig
    requests: tuple[LaunchRequest, ...]
    label: str
    duration_s: float | None
    stagger_s: float
    baselines: tuple[tuple[str, str], ...] = ()
    beside: LaunchRequest | None = (
        None  # --beside PID: job B, a running process watched, not launched
    )
    label_given: bool = (
        True  # --label; False: made from the jobs' names (a name picks a given label first)
    )

    @property
    def jobs(self) -> tuple[LaunchRequest, ...]:
        """Every job of the capture: the ones to launch, and the attached process."""
        return self.requests + ((self.beside,) if self.beside is not None else ())

    def sequence(self, session: Session) -> RunSequence:
        """What this plan starts in ``session``, when, or why not (one per front end: headless, the TUI)."""
        return RunSequence(
            session,
            self.requests,
            stagger_s=self.stagger_s,
            duration_s=self.duration_s,
            beside=self.beside,
        )


def check_device(device: str, use_nvml: bool = True) -> str:
    """A well-formed device that this machine has (cuda:N checked without torch: core/jobs/devices.py)."""
    if not DEVICE_PATTERN.fullmatch(device):
        raise UsageError(f"bad --device {device!r} (choose auto, cpu, cuda or cuda:N)")
    check_device_present(device, use_nvml)
    return device


def builtin_request(text: str, device: str, python: str | None = None) -> LaunchRequest:
    """A built-in workload run by ``python`` (None: $GPUMON_PYTHON, else ours), checked to have torch."""
    spec = parse_workload_spec(text)
    interpreter = require_workload_python(python)
    return LaunchRequest(
        spec=spec.text, kind="builtin", argv=tuple(to_argv(spec, device, interpreter.path))
    )


def make_plan(
    workloads: list[str],
    commands: list[str],
    *,
    session: SessionConfig,
    label: str | None,
    duration_s: float | None,
    stagger_s: float,
    beside: str | None = None,
) -> RunPlan:
    """Check every input before anything starts; raises UsageError with one clear line."""
    attached = beside_request(beside) if beside is not None else None
    check_device(session.device, session.nvml)
    if len(workloads) + len(commands) > MAX_WORKLOADS - (attached is not None):
        if attached is not None:
            raise UsageError("--beside PID is job B: give at most one workload to launch as A")
        raise UsageError(
            f"at most {MAX_WORKLOADS} workloads share the GPU; got {len(workloads) + len(commands)}"
        )
    if duration_s is not None and duration_s <= 0:
        raise UsageError(f"--duration must be positive, got {duration_s:g}")
    if stagger_s < 0:
        raise UsageError(f"--stagger must be zero or positive, got {stagger_s:g}")
    if duration_s is not None and stagger_s and duration_s <= stagger_s:
        raise UsageError(
            f"--duration ({duration_s:g} s) must be longer than --stagger ({stagger_s:g} s)"
        )
    if session.interval_ms is not None and not 10 <= session.interval_ms <= 60_000:
        raise UsageError(f"--interval must be between 10 and 60000 ms, got {session.interval_ms}")
    check_share(session.share, session.device)
    requests = [builtin_request(w, session.device, session.python) for w in workloads]
    requests += [LaunchRequest.command(c, session.python) for c in commands]
    given = bool(label)
    if not label:
        label = (
            "-".join(short_name(r) for r in [*requests, *([attached] if attached else [])])
            or "idle"
        )
    return RunPlan(
        session, tuple(requests), label, duration_s, stagger_s, beside=attached, label_given=given
    )


def beside_request(pid: str) -> LaunchRequest:
    """The running process ``--beside`` names, checked (exists, is yours, is not gpumon) before anything starts."""
    try:
        return LaunchRequest.attach(check_target(pid))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def short_name(request: LaunchRequest) -> str:
    """A request's name in a run label: the built-in workload's name, ``cmd``, or ``pid1234`` (attached)."""
    if request.beside is not None:
        return f"pid{request.beside.pid}"
    return "cmd" if request.kind == "cmd" else request.spec.split(":", 1)[0]
