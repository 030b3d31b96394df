"""Run directory writer: append-only CSV tables flushed every half second, run.json kept current."""

from __future__ import annotations

import csv
import json
import math
import os
import queue
import re
import threading
import time
from pathlib import Path
from typing import IO, Any

from gpumon.core.model import (
    DEVICE_COLUMNS,
    HOST_COLUMNS,
    PROCESS_COLUMNS,
    STEP_COLUMNS,
    DeviceSample,
    HostSample,
    LogLine,
    ProcessSample,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
    row,
)
from gpumon.core.trace import SCHEMA_VERSION
from gpumon.errors import UsageError

FLUSH_INTERVAL_S = 0.5
TABLES = (
    (StepEvent, "steps", STEP_COLUMNS),
    (DeviceSample, "device", DEVICE_COLUMNS),
    (ProcessSample, "processes", PROCESS_COLUMNS),
    (HostSample, "host", HOST_COLUMNS),
)


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return value


def safe_label(label: str) -> str:
    """A label usable in a directory name."""
    cleaned = re.sub(r"[^A-Za-z0-9._+-]+", "-", label).strip("-.")
    return cleaned[:80] or "run"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, allow_nan=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def create_run_dir(runs_dir: Path, label: str, started: time.struct_time) -> Path:
    """A new ``<runs>/<YYYYmmdd-HHMMSS>-<label>/`` (suffixed ``-2``, ``-3``... if taken)."""
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create runs directory {runs_dir}: {exc.strerror}") from None
    base = f"{time.strftime('%Y%m%d-%H%M%S', started)}-{safe_label(label)}"
    for n in range(1, 1000):
        path = runs_dir / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot create run directory {path}: {exc.strerror}") from None
        (path / "logs").mkdir()
        return path
    raise UsageError(f"too many runs named {base} in {runs_dir}")


class Recorder:
    """Subscribes to the bus and writes one run directory; ``close`` finalises run.json."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.meta = meta
        self.meta.setdefault("workloads", [])
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._files: dict[str, IO[str]] = {}
        self._writers: dict[str, Any] = {}
        self._logs: dict[str, IO[str]] = {}
        self._stop = threading.Event()
        self._meta_dirty = True
        for _, table, columns in TABLES:
            f = open(path / f"{table}.csv", "w", encoding="utf-8", newline="")
            self._files[table] = f
            self._writers[table] = csv.writer(f, lineterminator="\n")
            self._writers[table].writerow(columns)
        self._flush()
        self._thread = threading.Thread(target=self._run, name="gpumon-recorder", daemon=True)
        self._thread.start()

    def handle(self, item: object) -> None:
        """Bus subscriber: only queues (the writer thread does the I/O)."""
        self._queue.put(item)

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL_S):
            self._drain()
            self._flush()

    def _drain(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            self._write(item)

    def _write(self, item: object) -> None:
        for cls, table, columns in TABLES:
            if type(item) is cls:
                self._writers[table].writerow([_cell(v) for v in row(item, columns)])
                return
        if isinstance(item, LogLine):
            self._log(item.process).write(item.text + "\n")
        elif isinstance(item, WorkloadState):
            self._on_state(item)
        elif isinstance(item, WorkloadMeta):
            entry = self._workload(item.process)
            entry["meta"] = item.info
            if item.info.get("torch"):
                self.meta.setdefault("versions", {})["torch"] = item.info["torch"]
            self._meta_dirty = True

    def _log(self, process: str) -> IO[str]:
        if process not in self._logs:
            self._logs[process] = open(self.path / "logs" / f"{process}.out", "a", encoding="utf-8")
        return self._logs[process]

    def _workload(self, process: str) -> dict[str, Any]:
        for entry in self.meta["workloads"]:
            if entry["process"] == process:
                return entry
        entry = {"process": process}
        self.meta["workloads"].append(entry)
        return entry

    def _on_state(self, state: WorkloadState) -> None:
        entry = self._workload(state.process)
        if state.state == "running":
            entry.update(pid=state.pid, start_t=state.t, stop_t=None, exit_status=None, state="running")
        elif state.state in ("exited", "stopped", "failed"):
            entry.update(stop_t=state.t, exit_status=state.exit_status, tail=state.tail, state=state.state)
        self._meta_dirty = True

    def _flush(self) -> None:
        for f in (*self._files.values(), *self._logs.values()):
            f.flush()
        if self._meta_dirty:
            self._meta_dirty = False
            write_json_atomic(self.path / "run.json", self.meta)

    def close(self, duration_s: float) -> Path:
        """Write everything queued, mark the run complete, close the files."""
        self._stop.set()
        self._thread.join()
        self._drain()
        processes = {w["process"] for w in self.meta["workloads"] if w.get("pid")}
        self.meta["mode"] = "shared" if len(processes) > 1 else "exclusive"
        self.meta["status"] = "complete"
        self.meta["duration_s"] = round(duration_s, 3)
        self._meta_dirty = True
        self._flush()
        for f in (*self._files.values(), *self._logs.values()):
            f.close()
        return self.path


def initial_meta(
    *,
    label: str,
    mode: str,
    clock_t0_ns: int,
    started_at: str,
    interval_ms: int,
    device: str,
    stagger_s: float,
    host: dict[str, Any],
    gpu: dict[str, Any] | None,
    nvml: dict[str, Any],
    versions: dict[str, Any],
    workloads: list[dict[str, Any]],
) -> dict[str, Any]:
    """The run.json written when a capture starts (status "recording")."""
    return {
        "schema": SCHEMA_VERSION,
        "label": label,
        "mode": mode,
        "status": "recording",
        "started_at": started_at,
        "t0_monotonic_ns": clock_t0_ns,
        "duration_s": None,
        "interval_ms": interval_ms,
        "device": device,
        "host": host,
        "gpu": gpu,
        "nvml": nvml,
        "versions": versions,
        "stagger_s": stagger_s,
        "workloads": workloads,
    }
