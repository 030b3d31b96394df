"""Replay source: a run directory published onto a Bus in time order, as if it were live.

The same consumers that watch a live session (the TUI panels, LiveStats) then
show a recorded run. ``seek(t)`` publishes everything up to ``t`` on the
caller's thread (deterministic, for tests and snapshots); ``play()`` publishes
the rest on a thread at ``speed`` times real time (``math.inf``: as fast as
possible). Log lines carry no time in the trace, so they are published with
their workload's end. Replay only moves forward.
"""

from __future__ import annotations

import heapq
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from gpumon.core.records.bus import Bus
from gpumon.core.records.plainfile import read_plain
from gpumon.core.records.model import (
    DeviceSample,
    GpuOthers,
    HostSample,
    LogLine,
    SLOT_COLUMN,
    OtherGpuProcess,
    ProcessSample,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
    field_of,
    on_bus,
)
from gpumon.core.store.runmeta import WorkloadRecord
from gpumon.core.sources.stepgroups import StepGroups
from gpumon.core.store import tablecheck
from gpumon.core.store.trace import Run, TraceError, load_run

AS_FAST_AS_POSSIBLE = math.inf
MIN_WAIT_S = 0.005
MAX_WAIT_S = 0.25
INT_FIELDS = frozenset({"pid", "step", "copy_bytes", "threads"})


def _value(name: str, text: str) -> Any:
    if name == SLOT_COLUMN:
        return text
    if name == "per_core":
        return tuple(float(v) for v in text.split())
    if name == "warmup":
        return text == "1"
    if name in INT_FIELDS:
        return int(text) if text else 0
    return float(text) if text else math.nan


def of_a_job(row: dict[str, str]) -> bool:
    """Whether a table row is a job's (a steps or processes row naming another job is no job's: left out, as the
    trace reader leaves it out, so a replay never shows a third job)."""
    return "process" not in row or tablecheck.is_job(row["process"])


def record(cls: type, row: dict[str, str], where: Path) -> Any:
    """One CSV row (column → text) of ``where`` as its record (a StepEvent, DeviceSample…)."""
    try:
        return cls(**{field_of(k): _value(k, v) for k, v in row.items()})
    except (TypeError, ValueError):
        raise TraceError(f"{where}: corrupt row {row}") from None


def _records(run: Run, table: str, cls: type) -> list[Any]:
    return [record(cls, row, run.path / f"{table}.csv") for row in run.rows(table) if of_a_job(row)]


def _log_lines(run: Run, slot: str) -> list[str]:
    path = run.path / "logs" / f"{slot}.out"
    try:
        return read_plain(path).decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror}") from None


def others_by_tick(rows: Iterable[dict[str, str]], where: Path) -> list[GpuOthers]:
    """gpu_others.csv rows as one GpuOthers per process tick (the rows of one tick share its ``t``)."""
    by_t: dict[float, list[OtherGpuProcess]] = {}
    for row in rows:
        try:
            fields: dict[str, Any] = {
                k: (v or None) if k in ("user", "command") else _value(k, v) for k, v in row.items()
            }
            by_t.setdefault(fields["t"], []).append(OtherGpuProcess(**fields))
        except (TypeError, ValueError):
            raise TraceError(f"{where}: corrupt row {row}") from None
    return [GpuOthers(t, tuple(procs)) for t, procs in by_t.items()]


def _others(run: Run) -> list[GpuOthers]:
    """gpu_others.csv as one GpuOthers per process tick that listed any (none for runs recorded before it)."""
    if not (run.path / "gpu_others.csv").exists():
        return []
    return others_by_tick(run.rows("gpu_others"), run.path / "gpu_others.csv")


@dataclass(frozen=True)
class _Timed:
    t: float
    order: int
    item: object


def workload_events(entry: WorkloadRecord) -> list[tuple[float, int, object]]:
    """What run.json says of one workload as (t, order, record): its start, meta and (once ended) its end.

    An attached process (``--beside``) is taken as the live run took it: running, attached, never "starting" (a
    start would forget the steps of its probe's history, which come before it).
    """
    slot, start, pid = entry.slot, entry.start_t, entry.pid
    if start is None:
        return []
    attached = entry.attachment()
    out: list[tuple[float, int, object]] = [
        (start, 1, WorkloadState(slot, "running", start, pid=pid, attached=attached))
    ]
    if attached is None:
        out.insert(0, (start, 0, WorkloadState(slot, "starting", start)))
    if entry.meta is not None:
        out.append((start, 2, WorkloadMeta(slot, pid or 0, entry.meta)))
    if entry.stop_t is not None:
        state = entry.state or ("exited" if entry.exit_status is not None else "stopped")
        ended = WorkloadState(
            slot, state, entry.stop_t, pid=pid, exit_status=entry.exit_status, tail=entry.tail or ""
        )
        out.append((entry.stop_t, 4, ended))
    return out


def _workload_records(run: Run, end_t: float) -> list[_Timed]:
    """State changes, meta and (at the end) the logs of each workload in run.json."""
    out: list[_Timed] = []
    for entry in run.workloads:
        events = workload_events(entry)
        if not events:
            continue
        stop_t = entry.stop_t if entry.stop_t is not None else end_t
        out += [_Timed(t, order, item) for t, order, item in events]
        out += [
            _Timed(stop_t, 3, LogLine(entry.slot, stop_t, line))
            for line in _log_lines(run, entry.slot)
        ]
    return out


def _before(other: _Timed, step: _Timed) -> bool:
    """Whether a record not a step comes before a step read by row group (at one time and order, steps first)."""
    return (other.t, other.order) < (step.t, step.order)


class ReplaySource:
    """Publishes a recorded run's samples and events onto ``bus``, in time order."""

    def __init__(self, run_path: str | os.PathLike[str], bus: Bus, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError(f"replay speed must be positive, got {speed}")
        self.run = load_run(run_path)
        self.bus = bus
        self.speed = speed
        self._rest: list[_Timed] | None = None  # all but the steps read by row group, in time order
        self._steps: StepGroups | None = None
        self._bounds: tuple[float, float] | None = (
            None  # the first and last t of the steps read by row group
        )
        self._pending: list[
            tuple[float, int, int, _Timed]
        ] = []  # steps read, not yet published (a heap)
        self._seq = 0
        self._next = 0
        self._cursor = -math.inf
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._play_anchor: tuple[float, float] | None = None

    def load(self) -> None:
        """Read the small tables and run.json; the steps' columnar copy, where there is one, is read a row group
        at a time as the replay reaches it (steps.csv, without one, at once). Done on first use."""
        if self._rest is not None:
            return
        copy = self.run.columnar_file()
        steps = StepGroups(copy) if copy is not None else None
        tables = [("device", DeviceSample), ("processes", ProcessSample), ("host", HostSample)]
        if steps is None:
            tables.insert(0, ("steps", StepEvent))
        timed = [_Timed(r.t, 5, r) for table, cls in tables for r in _records(self.run, table, cls)]
        timed += [_Timed(o.t, 5, o) for o in _others(self.run)]
        bounds = steps.bounds() if steps is not None else None
        if bounds is not None and math.isinf(
            bounds[1]
        ):  # a copy without time statistics: read at once
            while steps is not None and steps.remaining:
                timed[:0] = [_Timed(r.t, 5, r) for r in steps.read_next()]
            bounds = None
        end = max([x.t for x in timed] + ([bounds[1]] if bounds else []), default=0.0)
        duration = self.run.meta.duration_s
        if duration is not None:
            end = max(end, self.run.meta.capture_start_t + duration)
        timed += _workload_records(self.run, end)
        timed.sort(key=lambda x: (x.t, x.order))
        self._steps, self._bounds = steps, bounds
        self._rest = [_Timed(-math.inf, 0, self.run.nvml_status), *timed]

    def _head(self) -> _Timed | None:
        """The next record to publish (reading the row groups of steps that may come before it), else None."""
        assert self._rest is not None
        while True:
            rest = self._rest[self._next] if self._next < len(self._rest) else None
            step = self._pending[0][3] if self._pending else None
            head = rest if step is None or (rest is not None and _before(rest, step)) else step
            if self._steps is None or not self._steps.remaining:
                return head
            if head is not None and self._steps.next_start > head.t:
                return head
            for r in self._steps.read_next():
                heapq.heappush(self._pending, (r.t, 5, self._seq, _Timed(r.t, 5, r)))
                self._seq += 1

    def _pop(self, head: _Timed) -> None:
        if self._pending and self._pending[0][3] is head:
            heapq.heappop(self._pending)
        else:
            self._next += 1

    @property
    def start_t(self) -> float:
        self.load()
        assert self._rest is not None
        firsts = [x.t for x in self._rest[1:2]] + ([self._bounds[0]] if self._bounds else [])
        return min(firsts, default=0.0)

    @property
    def end_t(self) -> float:
        self.load()
        assert self._rest is not None
        lasts = [x.t for x in self._rest[1:][-1:]] + ([self._bounds[1]] if self._bounds else [])
        return max(lasts, default=0.0)

    @property
    def finished(self) -> bool:
        self.load()
        if not self._lock.acquire(blocking=False):
            return False  # a seek is publishing (the screen asks as it repaints: it never waits for one)
        try:
            return self._head() is None
        finally:
            self._lock.release()

    def now(self) -> float:
        """The replay's run time: how far it has played."""
        with self._lock:
            if self._play_anchor is None:
                return max(self._cursor, self.start_t) if self._cursor > -math.inf else self.start_t
            wall0, t0 = self._play_anchor
            if math.isinf(self.speed):
                return self._cursor
            return min(self.end_t, t0 + (time.monotonic() - wall0) * self.speed)

    def seek(self, t: float) -> int:
        """Publish, on this thread, every record up to run time ``t``; returns how many."""
        self.load()
        published = 0
        with self._lock:
            while (head := self._head()) is not None and head.t <= t:
                self.bus.publish(on_bus(head.item))
                self._pop(head)
                published += 1
            self._cursor = max(self._cursor, t)
        return published

    def play(self) -> None:
        """Publish the rest on a thread at ``speed`` times real time."""
        self.load()
        if self._thread is not None:
            return
        start = self.now()
        with self._lock:
            self._play_anchor = (time.monotonic(), start)
        self._thread = threading.Thread(target=self._run, name="gpumon-replay", daemon=True)
        self._thread.start()

    def set_speed(self, speed: float) -> None:
        """Play on from here at ``speed`` times real time."""
        if not speed > 0:
            raise ValueError(f"replay speed must be positive, got {speed}")
        now = self.now()
        with self._lock:
            self.speed = speed
            if self._play_anchor is not None:
                self._play_anchor = (time.monotonic(), now)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def _next_t(self) -> float | None:
        with self._lock:
            head = self._head()
        return head.t if head is not None else None

    def _run(self) -> None:
        while not self._stop.is_set() and (next_t := self._next_t()) is not None:
            if math.isinf(self.speed):
                self.seek(next_t)
                continue
            wait = min(MAX_WAIT_S, (next_t - self.now()) / self.speed)
            if wait > MIN_WAIT_S and self._stop.wait(wait):
                return
            self.seek(self.now())
