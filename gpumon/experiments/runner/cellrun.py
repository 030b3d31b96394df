"""Runs cells one at a time with the real ``gpumon run --headless``, stops each once it has measured
enough steady state, records the outcome, and stops the sweep cleanly on a signal."""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol, TextIO

from gpumon.core.jobs.interpreter import WorkloadPython, choose, module_argv
from gpumon.core.records.enums import JobState, RunStatus, ShareKind
from gpumon.core.jobs.lifeline import die_with_parent
from gpumon.core.records.slots import SLOTS
from gpumon.core.store.runmeta import RunMeta, WorkloadRecord
from gpumon.core.store.trace import TraceError, load_run
from gpumon.experiments.runner.cells import Cell
from gpumon.experiments.runner.device import CudaStatus
from gpumon.experiments.runner.manifest import (
    FAILED,
    INTERRUPTED,
    OK,
    SKIPPED,
    CellRecord,
    Manifest,
)
from gpumon.experiments.runner.progress import Progress
from gpumon.experiments.runner.pyspy import PySpy, record_argv
from gpumon.experiments.runner.steady import StepsTail
from gpumon.safewrite import ensure_folder, open_append, open_new


class CellPool(Protocol):
    """Workers that run cells at once (experiments/rayrun.py's RayPool: one per GPU, or pinned core, of a cluster)."""

    def run(
        self,
        cells: list[Cell],
        manifest: Manifest,
        pyspy: Any,
        stop_requested: Callable[[], int | None],
        finished: Callable[[Cell, CellRecord], None],
        python: WorkloadPython,
    ) -> None: ...


POLL_S = 0.25
STATE_POLL_S = 1.0


class Ticks(Protocol):
    """What a running cell tells about itself: that it is still going (a Progress, or a Ray worker's silence)."""

    def tick(self) -> None: ...


STOP_GRACE_S = 30.0
PYSPY_EXIT_WAIT_S = 15.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GO_FILE = "go"


def operator_command(
    cell: Cell, slot: str, spec: str, scratch: Path, python: WorkloadPython
) -> str:
    """The ``--cmd`` of one profiled job, in the workloads' Python.

    ``-I`` keeps the auto-probe out (the program reports its own steps), and with it PYTHONPATH, so
    the gpumon package comes from its own directory (``module_argv``).
    """
    argv = [
        *module_argv("gpumon.experiments.study.opprofile", python.path, isolated=True),
        spec,
        "--device",
        cell.device,
        "--out",
        str(scratch / f"ops-{slot}.json"),
        "--start-when",
        str(scratch / GO_FILE),
        "--steps",
        str(cell.profile_steps),
        "--window",
        f"{cell.seconds:g}",
    ]
    return shlex.join(argv)


def cell_argv(cell: Cell, runs_dir: Path, scratch: Path, python: WorkloadPython) -> list[str]:
    """The ``gpumon run --headless`` command of a cell (this very gpumon, whatever the working directory holds)."""
    return [*module_argv("gpumon"), *cell_args(cell, runs_dir, scratch, python)]


def cell_args(cell: Cell, runs_dir: Path, scratch: Path, python: WorkloadPython) -> list[str]:
    """The arguments of a cell's ``gpumon run --headless`` (``run …``); ``--duration`` is only a cap. The workloads'
    Python, when it is not gpumon's own, is named with ``--python``: the command in cells.json and ``--dry-run`` is
    the whole command."""
    argv = ["run"]
    for slot, job in zip(SLOTS, cell.jobs):
        if cell.profile_steps is None:
            argv.append(job.spec)
        else:
            argv += ["--cmd", operator_command(cell, slot, job.spec, scratch, python)]
    argv += [
        "--headless",
        "--device",
        cell.device,
        "--duration",
        f"{cell.duration_s:g}",
        "--out",
        str(runs_dir),
        "--label",
        cell.id,
        "--interval",
        str(cell.interval_ms),
    ]
    if cell.mode == "shared" and cell.stagger:
        argv += ["--stagger", f"{cell.stagger:g}"]
    if cell.share != ShareKind.TIMESLICE:
        argv += ["--share", cell.share]
    if cell.warmup is not None:
        argv += ["--warmup", str(cell.warmup)]
    if not python.own:
        argv += ["--python", python.path]
    return argv


def failure_reason(workload: WorkloadRecord) -> str:
    """Why a workload failed, from its exit status and last output lines; OOM is named as such."""
    tail = workload.tail or ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    who = f"{workload.slot} ({workload.spec_or_unknown})"
    if "out of memory" in tail.lower():
        return f"OOM: {who}: {last}"
    return f"{who} exited with status {workload.exit_status}" + (f": {last}" if last else "")


def last_line(path: Path) -> str:
    try:
        lines = [
            line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        ]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1] if lines else ""


@dataclass
class CellRun:
    """One cell in flight: the ``gpumon run`` child, its run directory, py-spy recorders."""

    cell: Cell
    directory: Path
    pyspy: PySpy | None
    stop_requested: Callable[[], int | None]
    python: WorkloadPython
    proc: subprocess.Popen | None = None
    run_dir: Path | None = None
    tail: StepsTail | None = None
    before: set[str] = field(default_factory=set)
    recorders: dict[str, subprocess.Popen] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    stopping: bool = False
    stopping_since: float = 0.0
    steady: bool = False
    next_state_check: float = 0.0

    @property
    def slots(self) -> tuple[str, ...]:
        return SLOTS[: len(self.cell.jobs)]

    @property
    def runs_dir(self) -> Path:
        return self.directory / "runs"

    @property
    def scratch(self) -> Path:
        return self.directory / "scratch" / self.cell.id

    @property
    def log_path(self) -> Path:
        return self.directory / "logs" / f"{self.cell.id}.log"

    def execute(self, progress: Ticks) -> CellRecord:
        shutil.rmtree(self.scratch, ignore_errors=True)
        for path in (self.scratch, self.runs_dir, self.log_path.parent):
            ensure_folder(path)
        argv = cell_argv(self.cell, self.runs_dir, self.scratch, self.python)
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.before = {p.name for p in self.runs_dir.iterdir()}
        began = time.monotonic()
        self.log_path.unlink(missing_ok=True)  # the log of an earlier try of this cell
        with open_new(self.log_path) as log:
            log.write(f"$ {shlex.join(argv)}\n")
            log.flush()
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
            )
            try:
                while not self._wait(POLL_S):
                    self._watch()
                    progress.tick()
            finally:
                self._end_children(log)
        elapsed = time.monotonic() - began
        record = CellRecord(
            id=self.cell.id,
            status=OK,
            config=self.cell.config(),
            command=argv,
            log=str(self.log_path.relative_to(self.directory)),
            started_at=started_at,
            elapsed_s=round(elapsed, 2),
        )
        self._conclude(record)
        shutil.rmtree(self.scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.scratch.parent.rmdir()
        return record

    def _wait(self, timeout: float) -> bool:
        """Wait for the child; True once it has exited (killed if it outlives the stop grace)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            if self.stopping and time.monotonic() - self.stopping_since > STOP_GRACE_S:
                self.proc.kill()
            return False
        return True

    def _stop(self) -> None:
        if not self.stopping and self.proc is not None:
            self.stopping, self.stopping_since = True, time.monotonic()
            self.proc.send_signal(signal.SIGINT)

    def _watch(self) -> None:
        if self.stop_requested() is not None:
            self._stop()
            return
        if self.run_dir is None:
            self.run_dir = self._find_run_dir()
            if self.run_dir is None:
                return
            self.tail = StepsTail(self.run_dir / "steps.csv")
        assert self.tail is not None
        self.tail.poll()
        if not self.steady and self.tail.started(self.slots):
            self.steady = True
            (self.scratch / GO_FILE).touch()
            if self.pyspy is not None and self.pyspy.usable:
                self._start_recorders()
        if self.stopping:
            return
        if time.monotonic() >= self.next_state_check:
            self.next_state_check = time.monotonic() + STATE_POLL_S
            if self._failed_workloads():
                self._stop()
                return
        if self._measured_enough():
            self._stop()

    def _measured_enough(self) -> bool:
        assert self.tail is not None
        if self.cell.profile_steps is not None:
            return all((self.scratch / f"ops-{s}.json").exists() for s in self.slots)
        return self.tail.measured(self.slots) >= self.cell.seconds

    def _find_run_dir(self) -> Path | None:
        for path in sorted(self.runs_dir.iterdir()):
            if path.name in self.before:
                continue
            meta = self._meta(path)
            if meta is not None and meta.label == self.cell.id:
                return path
        return None

    @staticmethod
    def _meta(path: Path | None) -> RunMeta | None:
        """The run's run.json (None: no run yet, or not readable as one)."""
        try:
            return load_run(path).meta if path is not None else None
        except TraceError:
            return None

    def _workloads(self) -> list[WorkloadRecord]:
        meta = self._meta(self.run_dir)
        return meta.workloads if meta is not None else []

    def _capture_error(self) -> str | None:
        """Why the cell's capture stopped early (run.json status "truncated"), else None."""
        meta = self._meta(self.run_dir)
        if meta is None or meta.status != RunStatus.TRUNCATED:
            return None
        error = meta.capture_error
        return (
            error.reason if error is not None and error.reason is not None else "no reason recorded"
        )

    def _failed_workloads(self) -> list[WorkloadRecord]:
        """Workloads that could not start or exited with an error on their own (not stopped by gpumon)."""
        return [w for w in self._workloads() if w.failed]

    def _start_recorders(self) -> None:
        assert self.pyspy is not None and self.pyspy.path is not None and self.run_dir is not None
        with open_append(self.log_path) as log:
            for workload in self._workloads():
                slot, pid = workload.slot, workload.pid
                if slot in SLOTS and pid is not None and workload.state == JobState.RUNNING:
                    self.recorders[slot] = subprocess.Popen(
                        record_argv(self.pyspy.path, pid, self.run_dir / f"pyspy-{slot}.json"),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
                    )

    def _end_children(self, log: TextIO) -> None:
        """Let the py-spy recorders write their files; never leave the cell's gpumon run behind."""
        for slot, recorder in self.recorders.items():
            try:
                recorder.wait(PYSPY_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                recorder.terminate()
                recorder.wait()
                log.write(f"gpumon experiment: py-spy for {slot} did not finish; stopped it\n")
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _conclude(self, record: CellRecord) -> None:
        """Status, reason, run directory and profiles of the finished cell."""
        interrupted = self.stop_requested() is not None and not (
            self.tail is not None and self._measured_enough()
        )
        if self.run_dir is None:
            self.run_dir = self._find_run_dir()
        if self.run_dir is None:
            record.status = INTERRUPTED if interrupted else FAILED
            status = None if self.proc is None else self.proc.returncode
            record.reason = last_line(self.log_path) or f"gpumon run exited with status {status}"
            return
        record.run = str(self.run_dir.relative_to(self.directory))
        failed = self._failed_workloads()
        truncated = self._capture_error()
        if failed:
            record.status, record.reason = FAILED, "; ".join(failure_reason(w) for w in failed)
        elif truncated is not None:
            record.status, record.reason = FAILED, f"capture truncated: {truncated}"
        elif not self.stopping and self.proc is not None and self.proc.returncode not in (0, None):
            # gpumon run itself died (killed, crashed): what it recorded is not a finished measurement
            record.status = FAILED
            record.reason = (
                f"gpumon run ended with status {self.proc.returncode} before the cell was measured"
            )
        elif interrupted:
            record.status, record.reason = (
                INTERRUPTED,
                "stopped by a signal before it had measured enough",
            )
        self._collect_profiles(record)
        if record.status == OK and self.cell.profile_steps is not None:
            missing = [s for s in self.slots if f"ops-{s}" not in record.profiles]
            if missing:
                record.status = FAILED
                record.reason = (
                    f"no operator profile from {', '.join(missing)}: the job never ran past its warm-up "
                    f"{'together with the other ' if len(self.slots) > 1 else ''}within the {self.cell.duration_s:g} s cap"
                )
        measured = self.tail.measured(self.slots) if self.tail is not None else 0.0
        if record.status == OK and self.cell.profile_steps is None and measured < self.cell.seconds:
            self.notes.append(
                f"measured {measured:.1f} s of the {self.cell.seconds:g} s asked for "
                f"(the {self.cell.duration_s:g} s cap was reached; raise startup)"
            )
        record.note = "; ".join(self.notes) or None

    def _collect_profiles(self, record: CellRecord) -> None:
        """Move the operator profiles into the run directory; note py-spy recordings that are missing."""
        assert self.run_dir is not None
        for slot in self.slots:
            ops = self.scratch / f"ops-{slot}.json"
            if ops.exists():
                target = self.run_dir / ops.name
                os.replace(ops, target)  # both in the experiment's folder
                record.profiles[f"ops-{slot}"] = str(target.relative_to(self.directory))
            speedscope = self.run_dir / f"pyspy-{slot}.json"
            if speedscope.exists():
                record.profiles[f"pyspy-{slot}"] = str(speedscope.relative_to(self.directory))
            elif slot in self.recorders:
                self.notes.append(f"py-spy wrote no recording for {slot} (see {record.log})")


@dataclass
class CellScheduler:
    """Runs the cells in order, skipping those already done, recording each in the manifest."""

    manifest: Manifest
    cuda: Callable[[], CudaStatus]
    pyspy: PySpy | None = None
    retry_failed: bool = False
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    execute: Callable[[Cell, Progress], CellRecord] | None = None
    pool: CellPool | None = None
    # the workloads' Python, named to every cell (--python) and its profiling children
    python: WorkloadPython = field(default_factory=choose)
    signal_received: int | None = None

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signal_received = signum

    def run(self, cells: list[Cell]) -> int | None:
        """Run every cell not yet done; returns the signal that stopped the sweep, if any."""
        progress = Progress(len(cells), sum(measured_seconds(c) for c in cells), self.stream)
        previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
        try:
            if self.pool is not None:
                self._fan_out(cells, progress)
            else:
                for cell in cells:
                    if self.signal_received is not None:
                        break
                    if self._runnable(cell, progress):
                        progress.start(cell.id, measured_seconds(cell))
                        record = (self.execute or self._execute)(cell, progress)
                        self.manifest.put(record)
                        progress.finish(
                            record.status, record.elapsed_s, record.reason or record.note or ""
                        )
        finally:
            progress.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self.signal_received

    def _fan_out(self, cells: list[Cell], progress: Progress) -> None:
        """The cells on the Ray pool's workers at once, each recorded as it finishes."""
        assert self.pool is not None

        def finished(cell: Cell, record: CellRecord) -> None:
            self.manifest.put(record)
            progress.record(
                cell.id,
                measured_seconds(cell),
                record.status,
                record.elapsed_s,
                record.reason or record.note or "",
            )

        runnable = [cell for cell in cells if self._runnable(cell, progress)]
        self.pool.run(
            runnable, self.manifest, self.pyspy, lambda: self.signal_received, finished, self.python
        )

    def _runnable(self, cell: Cell, progress: Progress) -> bool:
        """False (and the cell reported) when it was done earlier or cannot run here."""
        done = self.manifest.completed(cell, self.retry_failed)
        if done is not None:
            progress.skip(cell.id, measured_seconds(cell), done.status, "done earlier")
            return False
        if cell.device.startswith("cuda") and not self.cuda().available:
            reason = f"needs CUDA: {self.cuda().reason}"
            self.manifest.put(
                CellRecord(id=cell.id, status=SKIPPED, config=cell.config(), reason=reason)
            )
            progress.skip(cell.id, measured_seconds(cell), SKIPPED, reason)
            return False
        return True

    def _execute(self, cell: Cell, progress: Progress) -> CellRecord:
        return CellRun(
            cell, self.manifest.directory, self.pyspy, lambda: self.signal_received, self.python
        ).execute(progress)


def measured_seconds(cell: Cell) -> float:
    """The part of a cell's time the ETA knows in advance: what it measures, plus B's stagger."""
    return cell.seconds + (cell.stagger if cell.mode == "shared" else 0.0)
