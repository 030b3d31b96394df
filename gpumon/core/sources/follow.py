"""Follow source: a run directory that another gpumon is writing, published onto a Bus as it grows.

``gpumon attach`` shows a detached run with the live monitor's own panels: this source reads what
the runner has written so far (the history, at once) and then, every ``POLL_S``, only the bytes
appended since (complete lines; a torn last line waits for its newline), and re-reads run.json when
it changes (workload states and meta, notices). The runner flushes its tables every second, so the
viewer is at most about a second and a quarter behind what the runner knows. When run.json says the
run is over, or its runner is gone (``interrupted``), the rest is read and the source stops: the
screen keeps the final picture. Nothing here writes to the run directory or signals the runner.
"""

from __future__ import annotations

import csv
import io
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from gpumon.core.records.bus import Bus
from gpumon.core.records.plainfile import open_plain
from gpumon.core.records.model import (
    DeviceSample,
    HostSample,
    LogLine,
    Notice,
    ProcessSample,
    StepEvent,
    on_bus,
)
from gpumon.core.store.runner import INTERRUPTED, RUNNING, run_status
from gpumon.core.sources.replay import of_a_job, others_by_tick, record, workload_events
from gpumon.core.store.trace import TABLES, TraceError, load_live, load_run

POLL_S = 0.25
RECORD_TABLES: tuple[tuple[str, type], ...] = (
    ("steps", StepEvent),
    ("device", DeviceSample),
    ("processes", ProcessSample),
    ("host", HostSample),
)


class Tail:
    """The complete lines appended to one file since the last read (the first read: all of them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            with open_plain(self.path) as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise TraceError(f"cannot read {self.path}: {exc.strerror}") from None
        self.offset += len(data)
        data = self._partial + data
        end = data.rfind(b"\n")
        self._partial = data[end + 1 :]
        return data[: end + 1].decode("utf-8", errors="replace").splitlines() if end >= 0 else []


class TableTail(Tail):
    """A CSV table's new rows as dicts (the header checked once, rows of the wrong width skipped)."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        super().__init__(path)
        self.columns = columns
        self._header_seen = False

    def rows(self) -> list[dict[str, str]]:
        lines = self.lines()
        if lines and not self._header_seen:
            if lines[0].split(",") != list(self.columns):
                raise TraceError(f"{self.path}: corrupt header (expected {','.join(self.columns)})")
            self._header_seen = True
            lines = lines[1:]
        width = len(self.columns)
        return [
            dict(zip(self.columns, row))
            for row in csv.reader(io.StringIO("\n".join(lines)))
            if len(row) == width
        ]


class FollowSource:
    """Publishes a run that is being written onto ``bus``: everything so far, then what comes, until it ends."""

    def __init__(self, run_path: str | os.PathLike[str], bus: Bus, poll_s: float = POLL_S) -> None:
        self.run, self.status = load_live(run_path)
        self.runner = self.run.meta.runner  # who writes it (None for runs recorded before runners)
        self.bus = bus
        self.poll_s = poll_s
        self._tables = {
            name: TableTail(self.run.path / f"{name}.csv", TABLES[name])
            for name, _ in RECORD_TABLES
        }
        self._others = TableTail(self.run.path / "gpu_others.csv", TABLES["gpu_others"])
        self._others_held: list[
            dict[str, str]
        ] = []  # the newest tick's rows: more of them may still come
        self._logs: dict[str, Tail] = {}
        self._meta_key: tuple[int, int, int] | None = (
            None  # run.json's inode, size, mtime when last read
        )
        self._published: set[tuple[Any, ...]] = set()
        self._started: set[str] = set()  # the slots whose first state has been published
        self._early: list[
            tuple[float, int, Any]
        ] = []  # a job's rows read before run.json said it started
        self._notices = 0
        self._last_t = -math.inf
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ended(self) -> bool:
        """The run is over (complete, stopped, truncated or interrupted) and everything it wrote was read."""
        return self._ended.is_set()

    def now(self) -> float:
        """The run's time: the runner's clock (CLOCK_MONOTONIC since its t0) while it runs, its end after."""
        t0 = self.run.meta.t0_monotonic_ns
        if self.ended or t0 is None:
            return self.end_t()
        return max(self._last_t, (time.monotonic_ns() - t0) / 1e9)

    def end_t(self) -> float:
        """Where the run ended: capture start + duration when run.json has one, else the last record."""
        duration = self.run.meta.duration_s
        if duration is not None:
            return max(self._last_t, self.run.meta.capture_start_t + duration)
        return self._last_t if math.isfinite(self._last_t) else 0.0

    def poll(self) -> int:
        """Publish, on this thread, everything written since the last poll; returns how many records."""
        with self._lock:
            if self.ended:
                return 0
            first = self._meta_key is None
            over = (
                self._read_meta()
            )  # before the tables: a run that just ended has written all of them
            if first:
                self.bus.publish(self.run.nvml_status)
            timed = sorted(
                self._meta_events() + self._in_order(self._table_records(final=over), over),
                key=lambda e: (e[0], e[1]),
            )
            for _, _, item in timed:
                self.bus.publish(on_bus(item))
            if timed:
                self._last_t = max(self._last_t, timed[-1][0])
            published = len(timed) + self._publish_logs()
            if over:
                self._ended.set()
            return published

    def start(self) -> None:
        """Poll on a thread every ``poll_s`` until the run ends or ``stop()``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpumon-follow", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def _run(self) -> None:
        while not self._stop.is_set() and not self.ended:
            try:
                self.poll()
            except TraceError as exc:
                self.bus.publish(Notice(self.now(), f"cannot follow the run: {exc}"))
                self._ended.set()
                return
            self._stop.wait(self.poll_s)

    # -- run.json ---------------------------------------------------------------

    def _read_meta(self) -> bool:
        """Re-read run.json if it changed; True once the run is over (its status, or its runner is gone)."""
        path = self.run.path / "run.json"
        try:
            st = path.stat()
        except OSError as exc:
            raise TraceError(f"cannot read {path}: {exc.strerror}") from None
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != self._meta_key:
            self.run = load_run(self.run.path)
            self._meta_key = key
        self.status = run_status(self.run.meta.status, self.run.meta.runner, self.run.path)
        if (
            self.status == INTERRUPTED
        ):  # or it finalised run.json and exited since it was read: read it again
            self.run, self.status = load_live(self.run.path)
        return self.status != RUNNING

    def _meta_events(self) -> list[tuple[float, int, Any]]:
        """Workload states and meta, and notices, that run.json has and this source has not published yet."""
        out = []
        for entry in self.run.workloads:
            for t, order, item in workload_events(entry):
                key = (getattr(item, "slot", ""), t, order, getattr(item, "state", ""))
                if key not in self._published:
                    self._published.add(key)
                    out.append((t, order, item))
                    self._started.add(entry.slot)
        notices = self.run.meta.notices
        out += [(notice.t, 5, notice) for notice in notices[self._notices :]]
        self._notices = len(notices)
        return out

    def _in_order(
        self, records: list[tuple[float, int, Any]], final: bool
    ) -> list[tuple[float, int, Any]]:
        """``records`` less a job's rows that came before run.json said the job started (the runner flushes its
        tables, then run.json: a poll between the two reads the rows first), kept for the poll that reads its
        state; all of them once the run is over."""
        ready: list[tuple[float, int, Any]] = []
        waiting, self._early = self._early + records, []
        for timed in waiting:
            slot = getattr(timed[2], "slot", None)
            (self._early if slot and slot not in self._started and not final else ready).append(
                timed
            )
        return ready

    # -- tables and logs ----------------------------------------------------------

    def _table_records(self, final: bool) -> list[tuple[float, int, Any]]:
        """The tables' new rows as records; the newest tick of gpu_others.csv waits for the next (unless ``final``)."""
        items: list[Any] = []
        for name, cls in RECORD_TABLES:
            where = self._tables[name].path
            items += [record(cls, row, where) for row in self._tables[name].rows() if of_a_job(row)]
        rows = self._others_held + self._others.rows()
        last_t = rows[-1]["t"] if rows else None
        self._others_held = [] if final else [r for r in rows if r["t"] == last_t]
        ready = rows if final else [r for r in rows if r["t"] != last_t]
        items += others_by_tick(ready, self._others.path)
        return [(item.t, 5, item) for item in items]

    def _publish_logs(self) -> int:
        published = 0
        for entry in self.run.workloads:
            slot = entry.slot
            tail = self._logs.setdefault(slot, Tail(self.run.path / "logs" / f"{slot}.out"))
            for line in tail.lines():
                self.bus.publish(
                    LogLine(slot, self._last_t if math.isfinite(self._last_t) else 0.0, line)
                )
                published += 1
        return published
