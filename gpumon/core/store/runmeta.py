"""run.json as a typed record: ``RunMeta`` and one ``WorkloadRecord`` per job (format: docs/trace.md).

The recorder builds and updates a ``RunMeta`` and writes ``to_json()``; the reader (``trace.load_run``) checks the
file with ``from_json`` and every consumer reads the fields, so a mistyped name fails loudly instead of reading
None. ``from_json`` reads every run gpumon has written: keys added later (``capture_start_t``, ``share``,
``runner``, ``baselines``, ``notices``...) take the value that meant the same before they existed. Free-form
descriptions (``host``, ``gpu``, ``versions``, a job's ``meta``) stay dictionaries: what they hold depends on the
driver and the workload, and nothing here interprets them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumon.core.records.model import ENDED_STATES, Notice, SourceStatus
from gpumon.core.records.share import ShareMode
from gpumon.core.store.runner import RunnerInfo, run_status

SCHEMA_VERSION = 1

# What the readers take from run.json, by type (a key may be absent; null is allowed where listed).
_NUMBER = (int, float)
META_TYPES: dict[str, tuple[type, ...]] = {
    "label": (str,),
    "mode": (str,),
    "status": (str,),
    "started_at": (str,),
    "device": (str, type(None)),
    "duration_s": (*_NUMBER, type(None)),
    "interval_ms": (*_NUMBER, type(None)),
    "stagger_s": (*_NUMBER, type(None)),
    "t0_monotonic_ns": (int, type(None)),
    "host": (dict, type(None)),
    "gpu": (dict, type(None)),
    "nvml": (dict, type(None)),
    "versions": (dict, type(None)),
    "runner": (dict, type(None)),
    "baselines": (dict, type(None)),
    "notices": (list, type(None)),
    "capture_start_t": (*_NUMBER, type(None)),
}
WORKLOAD_TYPES: dict[str, tuple[type, ...]] = {
    "process": (str,),
    "spec": (str,),
    "kind": (str,),
    "state": (str,),
    "tail": (str, type(None)),
    "argv": (list,),
    "pid": (int, type(None)),
    "exit_status": (int, type(None)),
    "start_t": (*_NUMBER, type(None)),
    "stop_t": (*_NUMBER, type(None)),
    "meta": (dict, type(None)),
}


def meta_problem(meta: dict[str, Any]) -> str | None:
    """What is wrong with run.json's fields, in a few words, or None."""
    workloads = meta.get("workloads")
    if not isinstance(workloads, list):
        return "no workloads list"
    for where, fields, types in [("", meta, META_TYPES)] + [
        (f"workloads[{i}].", w, WORKLOAD_TYPES) for i, w in enumerate(workloads)
    ]:
        if not isinstance(fields, dict):
            return f"{where.rstrip('.')} is not an object"
        for key, allowed in types.items():
            value = fields.get(key)
            if key in fields and (
                not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)
            ):
                return f"{where}{key} is {json.dumps(value)[:40]}"
            if isinstance(value, float) and not math.isfinite(value):
                return f"{where}{key} is not finite"
    slots = [w["process"] for w in workloads if "process" in w]
    if len(set(slots)) != len(slots):
        return "two workloads with the same process"
    return None


def _of(entry: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """``entry[key]`` when it is of ``kind`` (booleans only where ``kind`` is bool), else None."""
    value = entry.get(key)
    if isinstance(value, bool) and kind is not bool:
        return None
    return value if isinstance(value, kind) else None


ATTACHED_KEYS = (
    "pid",
    "user",
    "command",
    "owned",
    "attached",
    "probe",
)  # what run.json keeps of an attached process


@dataclass
class WorkloadRecord:
    """One job of a run: what was planned in its slot and what became of it (run.json ``workloads[i]``).

    None is "not recorded": a planned job has no ``pid`` until it runs, one that never started has a
    ``reason`` and no ``start_t``. An attached process (``--beside``) also has ``user``, ``command``,
    ``owned`` (false), ``attached`` (true) and ``probe`` (whether its steps were read).
    """

    slot: str  # run.json's "process"
    spec: str | None = None
    kind: str | None = None
    argv: list[str] | None = None
    pid: int | None = None
    user: str | None = None
    command: str | None = None
    owned: bool | None = None
    attached: bool | None = None
    probe: bool | None = None
    start_t: float | None = None
    stop_t: float | None = None
    exit_status: int | None = None
    state: str | None = None
    reason: str | None = None  # why it never started (state "not started")
    meta: dict[str, Any] | None = (
        None  # what the job said about itself (probe.meta: model, device, batch...)
    )
    tail: str | None = None  # its last output lines, once ended

    @property
    def spec_or_unknown(self) -> str:
        return self.spec if self.spec is not None else "?"

    @property
    def failed(self) -> bool:
        """It could not start, or it ended on its own with a non-zero status (gpumon did not stop it)."""
        return self.state == "failed" or (
            self.state == "exited" and self.exit_status not in (0, None)
        )

    def launched(self, job: dict[str, Any]) -> None:
        """Take what a job launched into a running capture says of itself (``WorkloadState.job``: spec, kind, argv)."""
        for key in ("spec", "kind", "argv"):
            if key in job:
                setattr(self, key, job[key])

    def attach(self, found: dict[str, Any]) -> None:
        """Take what run.json records of an attached process (``BesideTarget.to_json``: pid, user, command...)."""
        for key in ATTACHED_KEYS:
            if key in found:
                setattr(self, key, found[key])

    def attachment(self) -> dict[str, Any] | None:
        """An attached process as ``WorkloadState.attached`` carried it when it was taken (None: a launched job)."""
        if not self.attached:
            return None
        found = {key: getattr(self, key) for key in ATTACHED_KEYS}
        return {key: value for key, value in found.items() if value is not None}

    def to_json(self) -> dict[str, Any]:
        """The entry as run.json writes it: ``stop_t`` and ``exit_status`` (null while unknown) once it started."""
        out: dict[str, Any] = {"process": self.slot}
        for key in (
            "spec",
            "kind",
            "argv",
            "pid",
            "user",
            "command",
            "owned",
            "attached",
            "probe",
            "start_t",
        ):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.pid is not None or self.state == "running" or self.state in ENDED_STATES:
            out.update(stop_t=self.stop_t, exit_status=self.exit_status)
        for key in ("state", "reason", "meta", "tail"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> "WorkloadRecord":
        """An entry that ``meta_problem`` has checked (the keys it does not check: None unless of their type)."""
        argv = entry.get("argv")
        return cls(
            slot=str(entry.get("process", "?")),
            spec=entry.get("spec"),
            kind=entry.get("kind"),
            argv=[str(a) for a in argv] if isinstance(argv, list) else None,
            pid=entry.get("pid"),
            user=_of(entry, "user", str),
            command=_of(entry, "command", str),
            owned=_of(entry, "owned", bool),
            attached=_of(entry, "attached", bool),
            probe=_of(entry, "probe", bool),
            start_t=_float(entry.get("start_t")),
            stop_t=_float(entry.get("stop_t")),
            exit_status=entry.get("exit_status"),
            state=entry.get("state"),
            reason=_of(entry, "reason", str),
            meta=entry.get("meta"),
            tail=entry.get("tail"),
        )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class CaptureFailure:
    """run.json's ``capture_error``: when (seconds into the capture) and why the capture stopped early."""

    t: float | None
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "reason": self.reason}

    @classmethod
    def from_json(cls, entry: object) -> "CaptureFailure":
        if not isinstance(entry, dict):
            return cls(None, None)
        t = _of(entry, "t", _NUMBER)
        reason = entry.get("reason")
        return cls(None if t is None else float(t), None if reason is None else str(reason))


@dataclass
class RunMeta:
    """run.json: the run's description, its jobs, and its status (``recording``, ``complete``, ``truncated``)."""

    label: str | None
    mode: str | None
    status: str | None
    started_at: str | None
    t0_monotonic_ns: int | None
    duration_s: float | None
    interval_ms: float | None
    device: str | None
    host: dict[str, Any] | None
    gpu: dict[str, Any] | None
    nvml: SourceStatus
    versions: dict[str, Any] | None
    stagger_s: float | None
    workloads: list[WorkloadRecord]
    capture_start_t: float = (
        0.0  # run time at which this capture began (runs before it: at the session's start)
    )
    share: ShareMode = field(default_factory=ShareMode)
    runner: RunnerInfo | None = (
        None  # the process that writes (wrote) the run; None before runners were named
    )
    baselines: dict[str, str] = field(
        default_factory=dict
    )  # --baseline runs, slot -> run directory
    notices: list[Notice] = field(default_factory=list)
    capture_error: CaptureFailure | None = None
    # --label given (runs before this field: as given); False: made from the jobs' names, so a name that is both a
    # given label and an automatic one picks the given one (runstore.resolve_run)
    label_given: bool = True

    def workload(self, slot: str) -> WorkloadRecord | None:
        return next((w for w in self.workloads if w.slot == slot), None)

    def live_status(self, run_dir: Path) -> str:
        """``running`` or ``interrupted`` for the run in ``run_dir`` still marked ``recording`` (its runner proven or
        not: ``runner.run_status``), else its status."""
        return run_status(self.status, self.runner, run_dir)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "label": self.label,
            "mode": self.mode,
            "status": self.status,
            "started_at": self.started_at,
            "t0_monotonic_ns": self.t0_monotonic_ns,
            "duration_s": self.duration_s,
            "interval_ms": self.interval_ms,
            "device": self.device,
            "host": self.host,
            "gpu": self.gpu,
            "nvml": {"available": self.nvml.available, "reason": self.nvml.reason},
            "versions": self.versions,
            "stagger_s": self.stagger_s,
            "workloads": [w.to_json() for w in self.workloads],
            "capture_start_t": self.capture_start_t,
            "share": self.share.to_json(),
        }
        for key in ("label", "mode", "status", "started_at"):  # strings when recorded, never null
            if out[key] is None:
                del out[key]
        if self.runner is not None:
            out["runner"] = self.runner.to_json()
        if self.baselines:
            out["baselines"] = dict(self.baselines)
        if self.notices:
            out["notices"] = [
                {
                    "t": round(n.t, 3),
                    "process": n.slot,
                    "text": n.text,
                    **({"kind": n.kind} if n.kind else {}),
                }
                for n in self.notices
            ]
        if self.capture_error is not None:
            out["capture_error"] = self.capture_error.to_json()
        if not self.label_given:
            out["label_given"] = False
        return out

    @classmethod
    def from_json(cls, data: object) -> "RunMeta":
        """A run.json's contents; ValueError saying what is wrong with them."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"not a gpumon run of schema {SCHEMA_VERSION}")
        problem = meta_problem(data)
        if problem:
            raise ValueError(f"corrupt ({problem})")
        nvml = data.get("nvml") or {}
        baselines = data.get("baselines") or {}
        return cls(
            label=data.get("label"),
            mode=data.get("mode"),
            status=data.get("status"),
            started_at=data.get("started_at"),
            t0_monotonic_ns=data.get("t0_monotonic_ns"),
            duration_s=_float(data.get("duration_s")),
            interval_ms=data.get("interval_ms"),
            device=data.get("device"),
            host=data.get("host"),
            gpu=data.get("gpu"),
            nvml=SourceStatus("nvml", bool(nvml.get("available")), str(nvml.get("reason", ""))),
            versions=data.get("versions"),
            stagger_s=_float(data.get("stagger_s")),
            workloads=[WorkloadRecord.from_json(w) for w in data["workloads"]],
            capture_start_t=float(data.get("capture_start_t") or 0.0),
            share=ShareMode.from_json(data.get("share")),
            runner=RunnerInfo.from_json(data.get("runner")),
            baselines={str(slot): str(run) for slot, run in baselines.items()},
            notices=[_notice(n) for n in data.get("notices") or [] if isinstance(n, dict)],
            label_given=data.get("label_given") is not False,
            capture_error=CaptureFailure.from_json(data["capture_error"])
            if "capture_error" in data
            else None,
        )


def _notice(entry: dict[str, Any]) -> Notice:
    t = _of(entry, "t", _NUMBER)
    slot = entry.get("process")
    return Notice(
        float(t) if t is not None else 0.0,
        str(entry.get("text", "")),
        None if slot is None else str(slot),
        str(entry.get("kind") or ""),
    )
