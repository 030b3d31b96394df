"""run.json as a typed record: ``RunMeta`` and one ``WorkloadRecord`` per job (format: docs/trace.md).

The recorder builds and updates a ``RunMeta`` and writes ``to_json()``; the reader (``trace.load_run``) checks the
file with ``from_json`` and every consumer reads the fields, so a mistyped name fails loudly instead of reading
None. ``from_json`` reads every run gpumon has written: keys added later (``capture_start_t``, ``share``,
``runner``, ``baselines``, ``notices``...) take the value that meant the same before they existed. Free-form
descriptions (``host``, ``gpu``, ``versions``, a job's ``meta``) stay dictionaries: what they hold depends on the
driver and the workload, and nothing here interprets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gpumon.core.records import jsonfields as jf
from gpumon.core.records.decode import Refused, read_json
from gpumon.core.records.enums import ENDED, JobState, RunStatus
from gpumon.core.records.machine import GpuInfo, HostInfo
from gpumon.core.records.model import Notice, SourceStatus
from gpumon.core.records.share import ShareMode
from gpumon.core.store.runner import RunnerInfo
from gpumon.core.store.summary import RunSummaryRecord

SCHEMA_VERSION = 1
MAX_BYTES = (
    4 << 20
)  # run.json is read up to this size (one of gpumon's is under 100 KiB: 100 notices, tails)
MAX_WORKLOADS = 64
MAX_NOTICES_READ = 10_000
_DAY_S = 86_400.0
_SECONDS = jf.optional(jf.numbers(-1e3 * _DAY_S, 1e3 * _DAY_S))  # run time: 1,000 days either way
_opt_text = jf.optional(jf.text)
R = TypeVar("R")


def _argv(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise Refused(f"{where} is not a list")
    return [str(a) for a in value]


ATTACHED_KEYS = (
    "pid",
    "user",
    "command",
    "owned",
    "attached",
    "probe",
)  # what run.json keeps of an attached process


class _Spec:
    """What a job's entry says of its spec."""

    spec: str | None

    @property
    def spec_or_unknown(self) -> str:
        return self.spec if self.spec is not None else "?"


@dataclass
class WorkloadRecord(_Spec):
    """One job of a run: what was planned in its slot and what became of it (run.json ``workloads[i]``).

    None is "not recorded": a planned job has no ``pid`` until it runs, one that never started has a
    ``reason`` and no ``start_t``. An attached process (``--beside``) also has ``user``, ``command``,
    ``owned`` (false), ``attached`` (true) and ``probe`` (whether its steps were read). Each field's
    metadata is its run.json key and check (``jsonfields``): the one place it is read and written.
    """

    slot: str = jf.slot(jf.text, key="process", default="?")
    spec: str | None = jf.slot(_opt_text)
    kind: str | None = jf.slot(_opt_text)
    argv: list[str] | None = jf.slot(_argv)
    pid: int | None = jf.slot(jf.optional(jf.integers(0, 1 << 32)))
    user: str | None = jf.slot(_opt_text)
    command: str | None = jf.slot(_opt_text)
    owned: bool | None = jf.slot(jf.optional(jf.flag))
    attached: bool | None = jf.slot(jf.optional(jf.flag))
    probe: bool | None = jf.slot(jf.optional(jf.flag))
    start_t: float | None = jf.slot(_SECONDS)
    stop_t: float | None = jf.slot(_SECONDS, null=True)
    exit_status: int | None = jf.slot(jf.optional(jf.integers(-255, 255)), null=True)
    state: JobState | None = jf.slot(jf.optional(jf.member(JobState)))
    reason: str | None = jf.slot(_opt_text)  # why it never started (state "not started")
    meta: dict[str, Any] | None = jf.slot(
        jf.optional(jf.free)
    )  # what the job said about itself (probe.meta: model, device, batch...)
    tail: str | None = jf.slot(_opt_text)  # its last output lines, once ended

    @property
    def failed(self) -> bool:
        """It could not start, or it ended on its own with a non-zero status (gpumon did not stop it)."""
        return self.state == JobState.FAILED or (
            self.state == JobState.EXITED and self.exit_status not in (0, None)
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
        out = jf.encode(self)
        if not (self.pid is not None or self.state == JobState.RUNNING or self.state in ENDED):
            for key in ("stop_t", "exit_status"):
                if out.get(key) is None:
                    out.pop(key, None)
        return out

    @classmethod
    def from_json(cls, entry: object, where: str = "workloads[?].") -> "WorkloadRecord":
        """An entry of run.json's ``workloads``; Refused saying which key is wrong and why."""
        return jf.decode(cls, entry, where)


@dataclass(frozen=True)
class CaptureFailure:
    """run.json's ``capture_error``: when (seconds into the capture) and why the capture stopped early."""

    t: float | None = jf.slot(_SECONDS, null=True)
    reason: str | None = jf.slot(_opt_text, null=True)

    def to_json(self) -> dict[str, Any]:
        return jf.encode(self)


def _nvml(value: Any, where: str) -> SourceStatus:
    if value is None:  # written as null by no gpumon, read as "not read"
        return SourceStatus("nvml", False, "")
    entry = jf.decode(_NvmlEntry, value, where + ".")
    return SourceStatus("nvml", entry.available, entry.reason)


@dataclass(frozen=True)
class _NvmlEntry:
    """run.json's ``nvml``: whether NVML was read, and if not why."""

    available: bool = jf.slot(jf.flag, default=False)
    reason: str = jf.slot(jf.text, default="")


def _nvml_json(status: SourceStatus) -> dict[str, Any]:
    return {"available": status.available, "reason": status.reason}


def _notices(value: Any, where: str) -> list[Notice]:
    """run.json's notices (t, process, text, kind): up to MAX_NOTICES_READ (a hundred or so: read field by field
    here rather than through a record each, a third of the decoding time of a run.json that holds them)."""
    if not isinstance(value, list):
        raise Refused(f"{where} is not a list")
    if len(value) > MAX_NOTICES_READ:
        raise Refused(f"{where} holds more than {MAX_NOTICES_READ} entries")
    out = []
    for i, entry in enumerate(value):
        at = f"{where}[{i}]."
        if not isinstance(entry, dict):
            raise Refused(f"{at.rstrip('.')} is not an object")
        t = entry.get("t", 0.0)
        out.append(
            Notice(
                _NOTICE_T(t, at + "t"),
                _text_or(entry, "text", "", at),
                _opt_text(entry.get("process"), at + "process"),
                _text_or(entry, "kind", "", at),
            )
        )
    return out


_NOTICE_T = jf.numbers(-1e3 * _DAY_S, 1e3 * _DAY_S)


def _text_or(entry: dict[str, Any], key: str, default: str, where: str) -> str:
    return jf.text(entry[key], where + key) if key in entry else default


def _notice_json(n: Notice) -> dict[str, Any]:
    return {
        "t": round(n.t, 3),
        "process": n.slot,
        "text": n.text,
        **({"kind": n.kind} if n.kind else {}),
    }


def _workloads(record: type[R]) -> jf.Check:
    """run.json's ``workloads``, each entry read as ``record``: at most MAX_WORKLOADS, no two of the same process."""

    def check(value: Any, where: str) -> list[R]:
        if not isinstance(value, list):
            raise Refused("no workloads list")
        if len(value) > MAX_WORKLOADS:
            raise Refused(f"more than {MAX_WORKLOADS} workloads")
        records = [jf.decode(record, w, f"workloads[{i}].") for i, w in enumerate(value)]
        slots = [w.slot for w in records]  # type: ignore[attr-defined]
        if len(set(slots)) != len(slots):
            raise Refused("two workloads with the same process")
        return records

    return check


def _share(value: Any, where: str) -> ShareMode:
    return ShareMode.from_json(value)


def _runner(value: Any, where: str) -> RunnerInfo | None:
    return RunnerInfo.from_json(value)


def _baselines(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise Refused(f"{where} is not an object of run directories")
    return {str(slot): run for slot, run in value.items()}


@dataclass
class RunMeta:
    """run.json: the run's description, its jobs, and its status (``RunStatus``: recording, complete, failed,
    truncated). Each field's metadata is its key and its check (``jsonfields``): the one place it is read and
    written; ``from_json`` refuses (ValueError, one line) what no gpumon wrote."""

    label: str | None = jf.slot(_opt_text)
    mode: str | None = jf.slot(_opt_text)
    status: RunStatus | None = jf.slot(jf.optional(jf.member(RunStatus)))
    started_at: str | None = jf.slot(_opt_text)
    t0_monotonic_ns: int | None = jf.slot(jf.optional(jf.integers(0, (1 << 63) - 1)), null=True)
    duration_s: float | None = jf.slot(jf.optional(jf.numbers(0.0, 1e3 * _DAY_S)), null=True)
    interval_ms: float | None = jf.slot(jf.optional(jf.numbers(0.0, 1e7)), null=True)
    device: str | None = jf.slot(_opt_text, null=True)
    host: HostInfo | None = jf.slot(jf.optional(jf.record(HostInfo)), null=True)
    gpu: GpuInfo | None = jf.slot(jf.optional(jf.record(GpuInfo)), null=True)
    nvml: SourceStatus = jf.slot(
        _nvml, factory=lambda: SourceStatus("nvml", False, ""), out=_nvml_json
    )
    versions: dict[str, Any] | None = jf.slot(jf.optional(jf.free), null=True)
    stagger_s: float | None = jf.slot(jf.optional(jf.numbers(0.0, 1e3 * _DAY_S)), null=True)
    workloads: list[WorkloadRecord] = jf.slot(_workloads(WorkloadRecord), factory=list)
    # run time at which this capture began (runs before it: at the session's start)
    capture_start_t: float = jf.slot(jf.numbers(0.0, 1e3 * _DAY_S), default=0.0)
    share: ShareMode = jf.slot(_share, factory=ShareMode)
    # the process that writes (wrote) the run; None before runners were named
    runner: RunnerInfo | None = jf.slot(_runner)
    baselines: dict[str, str] = jf.slot(
        jf.optional(_baselines), factory=dict, omit_empty=True
    )  # --baseline runs, slot -> run directory
    notices: list[Notice] = jf.slot(
        jf.optional(_notices),
        factory=list,
        omit_empty=True,
        out=lambda ns: [_notice_json(n) for n in ns],
    )
    capture_error: CaptureFailure | None = jf.slot(jf.optional(jf.record(CaptureFailure)))
    # written when the run finalises (core/store/summary.py)
    summary: RunSummaryRecord | None = jf.slot(lambda v, where: RunSummaryRecord.from_json(v))
    # --label given (runs before this field: as given); False: made from the jobs' names, so a name that is both a
    # given label and an automatic one picks the given one (runstore.resolve_run)
    label_given: bool = jf.slot(jf.flag, default=True, omit=lambda given: given is True)

    def workload(self, slot: str) -> WorkloadRecord | None:
        return next((w for w in self.workloads if w.slot == slot), None)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA_VERSION, **jf.encode(self)}

    @classmethod
    def from_json(cls, data: object) -> "RunMeta":
        """A run.json's contents; ValueError (``Refused``) saying what is wrong with them."""
        meta = _decoded(cls, data)
        if meta.baselines is None:
            meta.baselines = {}
        if meta.notices is None:
            meta.notices = []
        return meta

    @classmethod
    def read(cls, path: Path | str) -> "RunMeta":
        """run.json at ``path``: read through no symbolic link, at most MAX_BYTES, nested at most 32 deep, every
        number finite (``decode.read_json``); OSError as ``open`` raises it, ValueError for its content."""
        return cls.from_json(_contents(path))


def _contents(path: Path | str) -> Any:
    """The JSON values of the run.json at ``path`` (``RunMeta.read``'s refusals)."""
    try:
        return read_json(path, max_bytes=MAX_BYTES, walk=False)  # every field checks its own
    except Refused as exc:
        raise Refused(f"corrupt ({exc})") from None


def _decoded(cls: type[R], data: object) -> R:
    """``cls`` (RunMeta, RunHead) from a run.json's contents; Refused saying what is wrong with them."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
        raise Refused(f"not a gpumon run of schema {SCHEMA_VERSION}")
    if "workloads" not in data:
        raise Refused("corrupt (no workloads list)")
    try:
        return jf.decode(cls, data)
    except Refused as exc:
        raise Refused(f"corrupt ({exc})") from None


@dataclass
class WorkloadHead(_Spec):
    """What ``gpumon runs`` shows of a job (``RunHead``): WorkloadRecord's fields ``process``, ``spec`` and ``meta``
    (what the job trained on), each read by WorkloadRecord's own check."""

    slot: str = jf.same(WorkloadRecord, "slot")
    spec: str | None = jf.same(WorkloadRecord, "spec")
    meta: dict[str, Any] | None = jf.same(WorkloadRecord, "meta")


@dataclass
class RunHead:
    """What a row of ``gpumon runs`` shows of a run.json: RunMeta's fields of that name, each read by RunMeta's own
    check (``jf.same``) and nothing else built (a listing reads thousands). A key it does not read is to it as an
    unknown key is to RunMeta; the file's own checks (size, plain file, no link, finite numbers, JSON's depth) and
    every check of a key it reads are RunMeta's: a run.json RunMeta reads gives the same values here, and one this
    refuses RunMeta refuses too."""

    label: str | None = jf.same(RunMeta, "label")
    mode: str | None = jf.same(RunMeta, "mode")
    status: RunStatus | None = jf.same(RunMeta, "status")
    duration_s: float | None = jf.same(RunMeta, "duration_s")
    device: str | None = jf.same(RunMeta, "device")
    workloads: list[WorkloadHead] = jf.slot(_workloads(WorkloadHead), factory=list)
    share: ShareMode = jf.same(RunMeta, "share")
    runner: RunnerInfo | None = jf.same(RunMeta, "runner")
    summary: RunSummaryRecord | None = jf.same(RunMeta, "summary")

    @classmethod
    def read(cls, path: Path | str) -> "RunHead":
        """The row's fields of the run.json at ``path`` (``RunMeta.read``'s checks and refusals)."""
        return _decoded(cls, _contents(path))
