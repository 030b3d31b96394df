"""Run directory writer: append-only CSV tables flushed every half second, run.json kept current."""

from __future__ import annotations

import csv
import errno
import functools
import io
import json
import logging
import os
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import IO, Any, Callable, Iterable

from gpumon.core.records.model import (
    DEVICE_COLUMNS,
    HOST_COLUMNS,
    OTHER_COLUMNS,
    PROCESS_COLUMNS,
    STEP_COLUMNS,
    DeviceSample,
    GpuOthers,
    HostSample,
    LogLine,
    Notice,
    ProcessSample,
    SourceStatus,
    StepBatch,
    StepEvent,
    WorkloadMeta,
    ENDED_STATES,
    THREAD_DIED,
    WorkloadState,
    field_of,
)
from gpumon.core.records.enums import JobState, RunStatus
from gpumon.core.records.machine import GpuInfo, HostInfo
from gpumon.core.store.runmeta import CaptureFailure, RunMeta, WorkloadRecord
from gpumon.core.store import columnar
from gpumon.core.store.runner import RunnerLock
from gpumon.core.store.trace import Run, steps_summary
from gpumon.errors import EnvironmentFailure
from gpumon.safewrite import (
    UnsafeDestination,
    open_new,
    refuse_foreign_link,
    replacing,
    write_bytes,
)

log = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 1.0
# Records waiting for the writer thread; beyond this the disk is not keeping up and the capture stops
# (about 20 s of a fast pair at 5,000 steps/s; a few tens of MB at most).
QUEUE_MAX = 100_000
# Kept free in the run directory so run.json can still be finalised when the disk fills up.
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 64 * 1024
TABLES = (
    (StepEvent, "steps", STEP_COLUMNS),
    (DeviceSample, "device", DEVICE_COLUMNS),
    (ProcessSample, "processes", PROCESS_COLUMNS),
    (HostSample, "host", HOST_COLUMNS),
)
# The GPU processes that were not our jobs: a GpuOthers record gives one row per process (docs/trace.md).
OTHERS_TABLE = "gpu_others"
# run.json's status of a capture that finished normally but one of whose jobs failed (``WorkloadRecord.failed``)
FAILED = RunStatus.FAILED
# Notices kept in run.json (what a viewer attached later shows, and compare can cite); the first ones.
MAX_NOTICES = 100
# What a Recorder records (a StepBatch's steps are queued one by one: ``QUEUE_MAX`` counts records).
RECORDED = (
    StepBatch,
    DeviceSample,
    ProcessSample,
    HostSample,
    GpuOthers,
    LogLine,
    WorkloadState,
    WorkloadMeta,
    Notice,
)


def _cells(values: tuple) -> list:
    """A row's CSV cells: NaN empty, booleans 0/1, a tuple (per-core CPU) one cell of space-separated
    percentages; the csv module writes floats by their repr."""
    return [
        ""
        if v != v
        else int(v)
        if v is True or v is False
        else _joined(v)
        if type(v) is tuple
        else v
        for v in values
    ]


def _joined(values: tuple) -> str:
    return " ".join(f"{v:.1f}" for v in values)


def csv_line(cells: Iterable[Any]) -> str:
    """One line of a table: ``cells`` as the csv module writes them (quoted where they must be), ending in "\n"."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(cells)
    return out.getvalue()


def _step_line(s: StepEvent) -> str:
    """A step's line of steps.csv, ``csv_line`` of its ``_cells`` written out: hundreds of steps a second, and the csv
    module takes twice as long for the same text (4.4 against 2.0 µs a step, 2-core VM)."""
    return (
        f"{_slot_field(s.slot)},{s.pid},{s.step},{'' if s.t != s.t else repr(s.t)},"
        f"{'' if s.iter_s != s.iter_s else repr(s.iter_s)},{'' if s.samples != s.samples else repr(s.samples)},"
        f"{int(s.warmup)},{s.copy_bytes},{'' if s.copy_s != s.copy_s else repr(s.copy_s)}\n"
    )


@functools.cache
def _slot_field(slot: str) -> str:
    """``slot`` as the csv module writes it in a field (quoted where it must be)."""
    return csv_line([slot, 0]).removesuffix(",0\n")  # among other fields: alone, "" is written '""'


def _row_line(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], str]:
    """A record's line of its table, from ``values``: its values in column order (one C call)."""
    return lambda record: csv_line(_cells(values(record)))


# Record type -> (table, the record's line of it).
ROWS: dict[type, tuple[str, Callable[[Any], str]]] = {
    cls: (table, _step_line if cls is StepEvent else _row_line(attrgetter(*map(field_of, columns))))
    for cls, table, columns in TABLES
}
OTHER_LINE = _row_line(attrgetter(*OTHER_COLUMNS))  # one other GPU process's line of gpu_others.csv


def safe_label(label: str) -> str:
    """A label usable in a directory name."""
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", label).strip("-.")
    return cleaned[:80] or "run"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as the JSON file ``path``, replacing it atomically (gpumon.safewrite)."""
    with replacing(path, replace=True) as f:
        json.dump(data, f, indent=2, allow_nan=False, default=str)
        f.write("\n")


def describe_write_error(exc: OSError, run_dir: Path) -> str:
    """What a failed write means to the user, in a few words ("no space left on /runs/x")."""
    if exc.errno == errno.ENOSPC:
        return f"no space left on {run_dir}"
    if exc.errno == errno.EDQUOT:
        return f"disk quota exceeded on {run_dir}"
    if exc.errno == errno.EROFS:
        return f"{run_dir} is on a read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied writing {exc.filename or run_dir}"
    if exc.errno == errno.ENOENT:
        return f"run directory {run_dir} was removed"
    return f"{exc.strerror or exc} ({exc.filename or run_dir})"


@dataclass(frozen=True)
class CaptureError:
    """Why a capture stopped before it was asked to, and whether run.json says so."""

    t: float
    path: Path
    reason: str
    finalise_error: str | None = None

    @property
    def finalised(self) -> bool:
        """run.json was rewritten with status "truncated" and the reason."""
        return self.finalise_error is None

    def line(self) -> str:
        return f"capture stopped at {self.t:.1f} s: {self.reason}"


def create_run_dir(runs_dir: Path, label: str, started: time.struct_time) -> Path:
    """A new ``<runs>/<YYYYmmdd-HHMMSS>-<label>/`` (suffixed ``-2``, ``-3``... if taken); never through another
    user's symbolic link."""
    refuse_foreign_link(runs_dir)
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot create runs directory {runs_dir}: {exc.strerror}"
        ) from None
    base = f"{time.strftime('%Y%m%d-%H%M%S', started)}-{safe_label(label)}"
    for n in range(1, 1000):
        path = runs_dir / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir(mode=0o755)
        except FileExistsError:
            continue
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot create run directory {path}: {exc.strerror}"
            ) from None
        (path / "logs").mkdir(mode=0o755)
        return path
    raise EnvironmentFailure(f"too many runs named {base} in {runs_dir}")


class Recorder:
    """Subscribes to the bus and writes one run directory; ``close`` finalises run.json.

    The queue is bounded and the first failed write (disk full, read-only, directory
    removed) ends the capture at once: run.json is finalised as "truncated" with the
    reason (space for it is reserved up front), later records are dropped, and
    ``on_error`` is called once from the writer thread.

    The recording process holds the run's ``RunnerLock`` from before run.json is first
    written until ``close`` has made it final: that, not run.json, proves who writes the run.
    """

    TAKES = RECORDED  # what ``handle`` records (Bus.subscribe)

    def __init__(
        self,
        path: Path,
        meta: RunMeta,
        on_error: Callable[[CaptureError], None] | None = None,
        queue_max: int = QUEUE_MAX,
    ) -> None:
        self.path = path
        self.meta = meta
        self.on_error = on_error
        self.error: CaptureError | None = None
        self._queue: deque[object] = (
            deque()
        )  # appended by the publishers' threads, emptied by the writer's
        self._queue_max = queue_max
        self._overflow = False
        self._files: dict[str, IO[str]] = {}
        self._logs: dict[str, IO[str]] = {}
        self._stop = threading.Event()
        self._soon = threading.Event()  # write now, not at the end of the interval (``flush_soon``)
        self._meta_dirty = True
        self._thread_died: str | None = (
            None  # a capture thread's THREAD_DIED notice: the run ends failed
        )
        self._started = time.monotonic()
        self._runner_lock: RunnerLock | None = None
        try:
            self._runner_lock = RunnerLock.take(path)
            write_bytes(path / RESERVE_FILE, bytes(RESERVE_BYTES), replace=False)
            for table, columns in (*((t, c) for _, t, c in TABLES), (OTHERS_TABLE, OTHER_COLUMNS)):
                f = open_new(path / f"{table}.csv")
                self._files[table] = f
                f.write(csv_line(columns))
            self._flush()
        except (OSError, UnsafeDestination) as exc:
            self._close_files()
            self._release_runner()
            if isinstance(exc, UnsafeDestination):
                raise
            raise EnvironmentFailure(
                f"cannot write the capture: {describe_write_error(exc, path)}"
            ) from None
        self._thread = threading.Thread(target=self._run, name="gpumon-recorder", daemon=True)
        self._thread.start()

    @property
    def failed(self) -> bool:
        return self.error is not None

    def handle(self, item: object) -> None:
        """Bus subscriber: only queues (the writer thread does the I/O); drops everything once failed."""
        if self.error is not None or self._overflow:
            return
        if len(self._queue) >= self._queue_max:
            self._overflow = True
            return
        if type(item) is StepBatch:
            self._queue.extend(item.steps)
        else:
            self._queue.append(item)

    def flush_soon(self) -> None:
        """Write what is queued now (the listener has just read its steps: a viewer sees them a second sooner); the
        timed write then waits two FLUSH_INTERVAL_S, covering a pause in the asks instead of racing them."""
        self._soon.set()

    def _run(self, asked: bool = False) -> None:
        while True:
            asked = self._soon.wait(FLUSH_INTERVAL_S * (2 if asked else 1))  # see flush_soon
            self._soon.clear()
            if self._stop.is_set() or not self._guarded(self._write_pending):
                return

    def _write_pending(self) -> None:
        if self._overflow:
            raise OSError(
                errno.ENOBUFS,
                f"the disk is not keeping up ({self._queue_max} records waiting)",
                str(self.path),
            )
        self._drain()
        self._flush()

    def _guarded(self, work: Callable[[], None]) -> bool:
        """Run ``work``; on the first failure end the capture: ``truncated`` for a write the machine refused,
        ``failed`` for a bug of the writer's own. False once failed."""
        try:
            work()
        except OSError as exc:
            self._fail(
                describe_write_error(exc, self.path)
                if exc.errno != errno.ENOBUFS
                else exc.strerror or str(exc)
            )
            return False
        except Exception as exc:  # a bug must not leave the capture "recording" forever
            log.exception("recorder failed")
            self._fail(f"internal error: {type(exc).__name__}: {exc}", RunStatus.FAILED)
            return False
        return True

    def _drain(self) -> None:
        """Write what is queued: each table's rows at once, the other records in order."""
        lines: dict[str, list[str]] = {}
        for _ in range(len(self._queue)):
            item = self._queue.popleft()
            table = ROWS.get(type(item))
            if table is not None:
                lines.setdefault(table[0], []).append(table[1](item))
            else:
                try:
                    self._write(item)
                except (
                    ValueError,
                    TypeError,
                    RecursionError,
                ) as exc:  # one bad record, not the capture
                    self._note(f"a {type(item).__name__} was not recorded: {exc}")
        for name, text in lines.items():
            self._files[name].write("".join(text))

    def _write(self, item: object) -> None:
        if isinstance(item, GpuOthers):
            self._files[OTHERS_TABLE].write("".join(map(OTHER_LINE, item.processes)))
        elif isinstance(item, LogLine):
            self._log(item.slot).write(item.text + "\n")
        elif isinstance(item, WorkloadState):
            self._on_state(item)
        elif isinstance(item, Notice):
            if item.kind == THREAD_DIED:
                self._thread_died = item.text
            if len(self.meta.notices) < MAX_NOTICES or item.kind == THREAD_DIED:
                self.meta.notices.append(item)
                self._meta_dirty = True
        elif isinstance(item, WorkloadMeta):
            json.dumps(
                item.info, allow_nan=False
            )  # ValueError/TypeError: run.json could not hold it
            self._workload(item.slot).meta = item.info
            if item.info.get("torch"):
                self.meta.versions = {**(self.meta.versions or {}), "torch": item.info["torch"]}
            self._meta_dirty = True

    def _note(self, text: str) -> None:
        """A notice of the recorder's own in run.json (the recorder publishes nothing)."""
        if len(self.meta.notices) < MAX_NOTICES:
            self.meta.notices.append(Notice(round(time.monotonic() - self._started, 3), text))
            self._meta_dirty = True

    def _log(self, slot: str) -> IO[str]:
        if slot not in self._logs:
            self._logs[slot] = open_new(self.path / "logs" / f"{slot}.out")
        return self._logs[slot]

    def _workload(self, slot: str) -> WorkloadRecord:
        entry = self.meta.workload(slot)
        if entry is None:
            entry = WorkloadRecord(slot)
            self.meta.workloads.append(entry)
        return entry

    def _on_state(self, state: WorkloadState) -> None:
        entry = self._workload(state.slot)
        if state.state == JobState.RUNNING:
            entry.pid, entry.start_t, entry.stop_t, entry.exit_status = (
                state.pid,
                state.t,
                None,
                None,
            )
            entry.state = JobState.RUNNING
            if state.job is not None:
                entry.launched(state.job)
            if state.attached is not None:
                entry.attach(state.attached)
        elif state.state in ENDED_STATES:
            entry.stop_t, entry.exit_status, entry.tail, entry.state = (
                state.t,
                state.exit_status,
                state.tail,
                JobState(state.state),
            )
        elif state.state == JobState.NOT_STARTED:
            entry.state, entry.reason = JobState.NOT_STARTED, state.tail
        self._meta_dirty = True

    def _flush(self) -> None:
        for f in (*self._files.values(), *self._logs.values()):
            f.flush()
        self._check_linked()
        if self._meta_dirty:
            self._meta_dirty = False
            write_json_atomic(self.path / "run.json", self.meta.to_json())

    def _check_linked(self) -> None:
        """Writes into a removed directory succeed on Linux; notice the removal instead."""
        steps = self._files.get("steps")
        if steps is not None and os.fstat(steps.fileno()).st_nlink == 0:
            raise FileNotFoundError(errno.ENOENT, "run directory removed", str(self.path))

    def _finish_meta(self, status: RunStatus, duration_s: float) -> None:
        self.meta.mode = "shared" if len(self.meta.workloads) > 1 else "exclusive"
        self.meta.status = status
        self.meta.duration_s = round(duration_s, 3)
        self._meta_dirty = True

    def _fail(self, reason: str, status: RunStatus = RunStatus.TRUNCATED) -> None:
        """End the capture now: drop what is queued, finalise run.json as ``status``, tell ``on_error``."""
        t = time.monotonic() - self._started
        self._close_files()
        self._drop_queue()
        self._release_reserve()
        self._finish_meta(status, t)
        self.meta.capture_error = CaptureFailure(round(t, 3), reason)
        finalise_error = None
        try:
            write_json_atomic(self.path / "run.json", self.meta.to_json())
        except OSError as exc:
            finalise_error = describe_write_error(exc, self.path)
        self.error = CaptureError(t, self.path, reason, finalise_error)
        if self.on_error is not None:
            self.on_error(self.error)

    def _drop_queue(self) -> None:
        self._queue.clear()

    def _close_files(self) -> None:
        """Close every file; a failed last flush is ignored (the capture is already lost or done)."""
        for f in (*self._files.values(), *self._logs.values()):
            try:
                f.close()
            except OSError:
                pass

    def close(self, duration_s: float) -> Path:
        """Write everything queued, mark the run complete (or keep it truncated), close the files; once (a second
        call would flush into closed files and record the run as truncated)."""
        if self._stop.is_set():
            return self.path
        self._stop.set()
        self._soon.set()
        self._thread.join()
        if self.error is None:
            self._guarded(lambda: self._complete(duration_s))
        self._release_runner()
        return self.path

    def _release_runner(self) -> None:
        """run.json is final (or was never written): this process no longer writes the run."""
        if self._runner_lock is not None:
            self._runner_lock.release()
            self._runner_lock = None

    def _complete(self, duration_s: float) -> None:
        self._drain()
        failed = self._thread_died is not None or any(w.failed for w in self.meta.workloads)
        self._finish_meta(FAILED if failed else RunStatus.COMPLETE, duration_s)
        self._flush()
        for f in (*self._files.values(), *self._logs.values()):
            f.close()
        self._release_reserve()
        self._finalise_tables()

    def _finalise_tables(self) -> None:
        """Once run.json is final: the steps' columnar copy, then run.json's summary (what ``gpumon runs`` lists).
        A kill before either loses nothing (steps.csv is the record; a reader then makes both in its own cache)."""
        try:
            columnar.write_run_copy(self.path)
            self.meta.summary = steps_summary(Run(self.path, self.meta))
            write_json_atomic(self.path / "run.json", self.meta.to_json())
        except Exception as exc:  # noqa: BLE001 - run.json is final already: no copy or summary is only slower
            log.warning("run %s: no columnar copy or summary written (%s)", self.path, exc)

    def _release_reserve(self) -> None:
        try:
            (self.path / RESERVE_FILE).unlink()
        except OSError:
            pass


def initial_meta(
    *,
    label: str,
    mode: str,
    clock_t0_ns: int,
    started_at: str,
    interval_ms: int | None,
    device: str,
    stagger_s: float,
    host: HostInfo | dict[str, Any],
    gpu: GpuInfo | dict[str, Any] | None,
    nvml: SourceStatus,
    versions: dict[str, Any],
    workloads: list[WorkloadRecord],
    label_given: bool = True,
) -> RunMeta:
    """The run.json written when a capture starts (status "recording"); ``host`` and ``gpu`` given as dicts (NVML's
    device info, a test's machine) are decoded into their records (ValueError if they are not what run.json holds)."""
    return RunMeta(
        label=label,
        mode=mode,
        status=RunStatus.RECORDING,
        started_at=started_at,
        t0_monotonic_ns=clock_t0_ns,
        duration_s=None,
        interval_ms=interval_ms,
        device=device,
        host=host if isinstance(host, HostInfo) else HostInfo.from_json(host),
        gpu=GpuInfo.from_json(gpu) if isinstance(gpu, dict) else gpu,
        nvml=nvml,
        versions=versions,
        stagger_s=stagger_s,
        workloads=workloads,
        label_given=label_given,
    )
