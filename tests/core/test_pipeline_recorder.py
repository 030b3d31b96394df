"""The Recorder on its own: real files, real kernel write errors, a bounded queue (issues 14 and 15)."""

from __future__ import annotations

import json
import locale
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from gpumon.core.records.model import (
    THREAD_DIED,
    DeviceSample,
    GpuOthers,
    LogLine,
    Notice,
    OtherGpuProcess,
    StepBatch,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
)
import gpumon.core.store.recorder as recorder_module
from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store.recorder import RESERVE_FILE, CaptureError, Recorder, create_run_dir
from gpumon.core.store.trace import export, load_run, summarize
from gpumon.core.store.runner import LOCK_FILE
from gpumon.errors import EnvironmentFailure
from gpumon.safewrite import UnsafeDestination
from tests.helpers import wait_for


def _meta(workloads: list[dict] | None = None) -> RunMeta:
    return RunMeta.from_json(
        {
            "schema": 1,
            "label": "unit",
            "mode": "exclusive",
            "status": "recording",
            "workloads": workloads or [],
        }
    )


def _run_dir(tmp_path: Path) -> Path:
    return create_run_dir(tmp_path / "runs", "unit", time.localtime())


class Errors:
    """Collects the recorder's ``on_error`` calls."""

    def __init__(self) -> None:
        self.seen: list[CaptureError] = []
        self.event = threading.Event()

    def __call__(self, error: CaptureError) -> None:
        self.seen.append(error)
        self.event.set()


def _steps(process: str, n: int, t0: float = 0.0) -> list[StepEvent]:
    return [
        StepEvent(process, 100, i, t0 + i * 0.01, 0.01, samples=8.0, warmup=i < 2) for i in range(n)
    ]


def test_writes_every_table_and_a_complete_run_json(tmp_path):
    path = _run_dir(tmp_path)
    recorder = Recorder(path, _meta())
    assert (path / RESERVE_FILE).stat().st_size > 0, "space for the final run.json is reserved"
    for item in (
        WorkloadState("A", "running", 0.0, pid=100),
        StepBatch("A", tuple(_steps("A", 50))),  # as the listener publishes a probe message's steps
        DeviceSample(0.1, gpu_util=50.0),
        LogLine("A", 0.2, "hello"),
        WorkloadState("A", "exited", 0.6, pid=100, exit_status=0),
    ):
        recorder.handle(item)
    assert recorder.close(0.7) == path
    assert (
        recorder.close(9.9) == path
    )  # a second close changes nothing (it had rewritten the run as truncated)
    run = load_run(path)
    assert (
        run.meta.status == "complete"
        and run.meta.mode == "exclusive"
        and run.meta.duration_s == 0.7
    )
    (a,) = run.workloads
    assert (a.slot, a.pid, a.exit_status, a.state) == ("A", 100, 0, "exited")
    assert len(run.steps()) == 50 and run.device()["gpu_util"].tolist() == [50.0]
    assert (path / "logs" / "A.out").read_text() == "hello\n"
    assert not (path / RESERVE_FILE).exists()
    assert summarize(run).rates["A"] == pytest.approx(100.0)


def test_a_planned_pair_stays_shared_when_the_second_never_starts(tmp_path):
    path = _run_dir(tmp_path)
    recorder = Recorder(path, _meta([{"process": "A", "spec": "x"}, {"process": "B", "spec": "y"}]))
    recorder.handle(WorkloadState("A", "running", 0.0, pid=7))
    recorder.handle(WorkloadState("A", "exited", 1.0, pid=7, exit_status=3))
    recorder.handle(WorkloadState("B", "not started", 1.0, tail="A failed first"))
    recorder.close(1.0)
    run = load_run(path)
    assert run.meta.mode == "shared"
    a, b = run.workloads
    assert a.exit_status == 3 and b.to_json() == {
        "process": "B",
        "spec": "y",
        "state": "not started",
        "reason": "A failed first",
    }


def test_rows_are_flushed_while_recording(tmp_path):
    path = _run_dir(tmp_path)
    recorder = Recorder(path, _meta())
    for step in _steps("A", 10):
        recorder.handle(step)
    wait_for(
        lambda: len((path / "steps.csv").read_text().splitlines()) == 11, what="the rows on disk"
    )
    assert json.loads((path / "run.json").read_text())["status"] == "recording"
    recorder.close(1.0)


def _opens_instead(monkeypatch, name: str, device: Path) -> None:
    """The recorder's file ``name`` is opened as ``device`` (a symlink planted in the run directory would be
    refused by gpumon.safewrite, so the recorder's opener is pointed at it instead)."""
    opened = recorder_module.open_new
    monkeypatch.setattr(
        recorder_module,
        "open_new",
        lambda p: open(device, "w", encoding="utf-8") if p.name == name else opened(p),
    )


def test_no_space_left_stops_the_capture_at_once_and_finalises_it_as_truncated(
    tmp_path, monkeypatch
):
    """logs/A.out opens /dev/full: the kernel's real ENOSPC on a real file object, on the first log flush."""
    path = _run_dir(tmp_path)
    _opens_instead(monkeypatch, "A.out", Path("/dev/full"))
    errors = Errors()
    before = time.monotonic()
    recorder = Recorder(path, _meta([{"process": "A", "spec": "x"}]), on_error=errors)
    recorder.handle(WorkloadState("A", "running", 0.0, pid=100))
    for step in _steps("A", 20):
        recorder.handle(step)
    wait_for(
        lambda: len((path / "steps.csv").read_text().splitlines()) == 21,
        what="rows before the failure",
    )
    recorder.handle(LogLine("A", 0.3, "this line cannot be written"))
    assert errors.event.wait(10), "the failed write is noticed within a flush period"
    (error,) = errors.seen
    assert error.reason == f"no space left on {path}" and error.path == path
    assert 0 < error.t < time.monotonic() - before, "seconds since the recorder started"
    assert (
        error.finalised
        and error.line().startswith("capture stopped at ")
        and error.line().endswith(error.reason)
    )
    assert recorder.failed
    wait_for(lambda: not recorder._thread.is_alive(), what="the writer thread to end")

    for step in _steps("A", 1000, t0=1.0):
        recorder.handle(step)
    assert len(recorder._queue) == 0, "nothing queues once the capture has failed"
    assert recorder.close(2.0) == path
    assert errors.seen == [error], "on_error is called once"

    run = load_run(path)
    assert run.meta.status == "truncated"
    assert run.meta.capture_error is not None and run.meta.capture_error.reason == error.reason
    assert (
        run.meta.capture_error.t == run.meta.duration_s == round(error.t, 3)
    )  # run.json's times are in ms
    assert len(run.steps()) == 20, "what was written before the failure stays readable"
    assert summarize(run).status == "truncated"
    assert [p.name for p in export(run, tmp_path / "csv")] == [
        "steps.csv",
        "device.csv",
        "processes.csv",
        "host.csv",
        "gpu_others.csv",
        "run.json",
    ]
    assert not (path / RESERVE_FILE).exists()


def test_a_run_directory_removed_mid_run_is_noticed_and_said_to_be_unfinalisable(tmp_path):
    path = _run_dir(tmp_path)
    errors = Errors()
    recorder = Recorder(path, _meta(), on_error=errors)
    for step in _steps("A", 5):
        recorder.handle(step)
    wait_for(lambda: len((path / "steps.csv").read_text().splitlines()) == 6, what="rows on disk")
    shutil.rmtree(path)
    recorder.handle(DeviceSample(1.0))
    assert errors.event.wait(10), "the removal is noticed"
    (error,) = errors.seen
    assert error.reason == f"run directory {path} was removed"
    assert not error.finalised and error.finalise_error == f"run directory {path} was removed"
    assert recorder.close(1.0) == path
    assert not path.exists()


def test_the_queue_is_bounded_and_a_writer_that_falls_behind_ends_the_capture(
    tmp_path, monkeypatch
):
    """logs/A.out opens a FIFO nobody reads yet: the writer blocks in open(), as on a stalled disk."""
    path = _run_dir(tmp_path)
    stalled = tmp_path / "stalled"
    os.mkfifo(stalled)
    _opens_instead(monkeypatch, "A.out", stalled)
    errors = Errors()
    recorder = Recorder(path, _meta(), on_error=errors, queue_max=10)
    recorder.handle(LogLine("A", 0.0, "blocks the writer"))
    wait_for(lambda: len(recorder._queue) == 0, what="the writer to take the line and block")
    steps = _steps("A", 1000)
    for i in range(0, len(steps), 4):
        recorder.handle(StepBatch("A", tuple(steps[i : i + 4])))
    assert 10 <= len(recorder._queue) < 10 + 4, (
        "the queue counts steps, not batches: queue_max and at most the batch that reached it"
    )
    reader = os.open(stalled, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert errors.event.wait(10)
    finally:
        os.close(reader)
    (error,) = errors.seen
    assert error.reason == "the disk is not keeping up (10 records waiting)"
    recorder.close(1.0)
    assert load_run(path).meta.status == "truncated"


def test_an_unwritable_run_directory_at_the_start_is_one_usage_error(tmp_path, monkeypatch):
    path = _run_dir(tmp_path)
    _opens_instead(monkeypatch, "steps.csv", Path("/dev/full"))
    with pytest.raises(
        EnvironmentFailure, match=f"cannot write the capture: no space left on {path}"
    ):
        Recorder(path, _meta())
    assert not (path / LOCK_FILE).exists(), "the runner lock is let go"


@pytest.mark.parametrize("table", ["steps.csv", "run.json", ".reserve", "runner.lock"])
def test_a_symlink_planted_in_the_run_directory_is_refused_and_its_target_untouched(
    tmp_path, table
):
    path = _run_dir(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (path / table).symlink_to(victim)
    with pytest.raises(UnsafeDestination, match="symbolic link"):
        Recorder(path, _meta())
    assert victim.read_text() == "precious"
    assert table == "runner.lock" or not (path / LOCK_FILE).exists()


def test_items_it_does_not_record_are_ignored(tmp_path):
    path = _run_dir(tmp_path)
    recorder = Recorder(path, _meta())
    recorder.handle(Notice(0.0, "not a table row"))
    recorder.handle(object())
    recorder.close(0.1)
    run = load_run(path)
    assert run.meta.status == "complete" and run.steps().empty


def test_flush_soon_writes_at_once_instead_of_at_the_end_of_the_interval(tmp_path, monkeypatch):
    """What a runner's listener asks after each read, so a viewer following the files is not a second later."""
    import gpumon.core.store.recorder as recorder_module

    monkeypatch.setattr(recorder_module, "FLUSH_INTERVAL_S", 60.0)
    path = _run_dir(tmp_path)
    recorder = Recorder(path, _meta())
    for step in _steps("A", 3):
        recorder.handle(step)
    recorder.flush_soon()
    wait_for(
        lambda: len((path / "steps.csv").read_text().splitlines()) == 4,
        timeout=10,
        what="the rows, not in 60 s",
    )
    recorder.close(1.0)


def test_a_write_flush_soon_asked_for_puts_the_timed_one_off_two_intervals(tmp_path, monkeypatch):
    """A listener asks after each read, about once an interval: the recorder's own timer must not race it into two
    writes an interval (observer_cost: the recorder's wake-ups); it still writes when nobody asks."""
    import time

    import gpumon.core.store.recorder as recorder_module

    monkeypatch.setattr(recorder_module, "FLUSH_INTERVAL_S", 0.4)
    recorder = Recorder(_run_dir(tmp_path), _meta())
    writes: list[float] = []
    write = recorder._write_pending
    monkeypatch.setattr(
        recorder, "_write_pending", lambda: (writes.append(time.monotonic()), write())[1]
    )
    recorder.flush_soon()
    wait_for(lambda: len(writes) >= 2, timeout=10, what="the asked write, then a timed one")
    assert writes[1] - writes[0] >= 0.8, writes  # two intervals after the asked write, not one
    recorder.close(1.0)


def test_a_bug_in_the_writer_ends_the_capture_as_failed_and_says_which(tmp_path, caplog):
    """A record the writer cannot handle (a WorkloadMeta without its dict) is a bug, not a disk error: the capture
    ends as failed (never complete, never truncated as if the disk refused it) with its type and words, the
    traceback is logged, and the writer thread ends."""
    path = _run_dir(tmp_path)
    errors = Errors()
    recorder = Recorder(path, _meta(), on_error=errors)
    with caplog.at_level(logging.ERROR, logger="gpumon.core.store.recorder"):
        recorder.handle(WorkloadMeta("A", 100, None))  # type: ignore[arg-type]
        assert errors.event.wait(10), "the failure is noticed within a flush period"
        wait_for(
            lambda: not recorder._thread.is_alive(), timeout=10, what="the writer thread to end"
        )
    (error,) = errors.seen
    assert (
        error.reason == "internal error: AttributeError: 'NoneType' object has no attribute 'get'"
    )
    assert [(r.getMessage(), r.exc_info is not None) for r in caplog.records] == [
        ("recorder failed", True)
    ]
    recorder.close(1.0)
    assert errors.seen == [error]
    meta = load_run(path).meta
    assert meta.capture_error.reason == error.reason and meta.status == "failed"


def test_a_second_recorder_of_one_run_is_refused_and_leaves_the_first_its_lock(tmp_path):
    path = _run_dir(tmp_path)
    first = Recorder(path, _meta())
    with pytest.raises(EnvironmentFailure) as err:
        Recorder(path, _meta())
    assert str(err.value) == f"cannot write the capture: File exists ({path / 'runner.lock'})"
    assert (path / "runner.lock").exists()
    first.close(0.71234)
    run = load_run(path)
    assert run.meta.status == "complete" and run.meta.duration_s == 0.712
    assert not (path / "runner.lock").exists()


def test_what_a_job_says_about_itself_is_in_run_json_while_recording(tmp_path):
    path = _run_dir(tmp_path)
    recorder = Recorder(path, _meta([{"process": "A", "spec": "x"}]))
    recorder.handle(WorkloadMeta("A", 100, {"model": "fcn", "torch": "2.5.1"}))
    recorder.flush_soon()
    meta = wait_for(
        lambda: (
            (m := json.loads((path / "run.json").read_text()))["workloads"][0].get("meta") and m
        ),
        timeout=10,
        what="the job's meta in run.json before the run ends",
    )
    assert (
        meta["workloads"][0]["meta"] == {"model": "fcn", "torch": "2.5.1"}
        and meta["versions"]["torch"] == "2.5.1"
    )
    recorder.close(1.0)


@pytest.fixture
def ascii_locale():
    """The process's LC_CTYPE set to C, where Python's default file encoding is ASCII (restored after)."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_the_tables_and_logs_are_utf8_whatever_the_locale(tmp_path, ascii_locale):
    """A progress bar's blocks in a job's log and another user's name with an accent: written as UTF-8 under an
    ASCII locale too."""
    path = _run_dir(tmp_path)
    recorder = Recorder(path, _meta())
    recorder.handle(LogLine("A", 0.1, "epoch 1 █████ 50%"))
    recorder.handle(
        GpuOthers(0.2, (OtherGpuProcess(0.2, 4242, user="josé", command="python3 train.py"),))
    )
    recorder.close(1.0)
    assert load_run(path).meta.status == "complete"
    assert (path / "logs" / "A.out").read_text(encoding="utf-8") == "epoch 1 █████ 50%\n"
    assert "4242,josé,python3 train.py" in (path / "gpu_others.csv").read_text(encoding="utf-8")


def test_a_capture_thread_that_died_ends_the_run_failed_with_its_reason(tmp_path):
    run_dir = _run_dir(tmp_path)
    recorder = Recorder(run_dir, _meta())
    recorder.handle(StepEvent("A", 7, 0, 0.1, 0.1))
    recorder.handle(Notice(0.2, "the probe listener stopped (RuntimeError: x)", None, THREAD_DIED))
    recorder.close(1.0)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "failed"
    assert "the probe listener stopped (RuntimeError: x)" in [n["text"] for n in meta["notices"]]


def test_a_workload_meta_run_json_cannot_hold_is_dropped_with_a_notice_not_the_capture(tmp_path):
    run_dir = _run_dir(tmp_path)
    recorder = Recorder(run_dir, _meta([{"process": "A"}]))
    recorder.handle(WorkloadMeta("A", 7, {"lr": float("nan")}))
    recorder.handle(StepEvent("A", 7, 0, 0.1, 0.1))
    recorder.close(1.0)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and "meta" not in meta["workloads"][0]
    assert any("WorkloadMeta was not recorded" in n["text"] for n in meta["notices"])
    assert not (run_dir / "run.json.tmp").exists()
