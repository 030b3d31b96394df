"""FollowSource: a run directory that is being written, published as it grows (what ``gpumon attach`` shows)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from gpumon.core.records.bus import Bus
from gpumon.core.records.model import (
    GpuOthers,
    HostSample,
    LogLine,
    Notice,
    OtherGpuProcess,
    SourceStatus,
    StepBatch,
    StepEvent,
    WorkloadState,
)
from gpumon.core.store.recorder import Recorder, create_run_dir
from gpumon.core.store.runmeta import RunMeta, WorkloadRecord
from gpumon.core.store.runner import INTERRUPTED, RunnerInfo, RunnerLock
from gpumon.core.sources.follow import FollowSource, Tail
from gpumon.core.store.trace import TABLES
from tests.helpers import unbatched, wait_for
from tests.tracegen import cpu_run_meta


def _meta(runner: RunnerInfo) -> RunMeta:
    workload = WorkloadRecord("A", spec="gemm", kind="builtin", argv=[])
    meta = cpu_run_meta("t", time.monotonic_ns(), workload, nvml_reason="disabled")
    meta.runner = runner
    return meta


class Seen:
    """Everything a bus delivered, in order."""

    def __init__(self, bus: Bus) -> None:
        self.raw: list[object] = []
        bus.subscribe(self.raw.append)

    @property
    def items(self) -> list[object]:
        """What it delivered, each StepBatch as its steps."""
        return unbatched(self.raw)

    def of(self, cls: type) -> list:
        return [item for item in self.items if isinstance(item, cls)]


def test_tail_gives_complete_lines_only_and_the_rest_once_its_newline_comes(tmp_path) -> None:
    path = tmp_path / "f.csv"
    tail = Tail(path)
    assert tail.lines() == []  # not written yet
    path.write_bytes(b"a,1\nb,")
    assert tail.lines() == ["a,1"]
    with open(path, "ab") as f:
        f.write(b"2\nc,3\n")
    assert tail.lines() == ["b,2", "c,3"]
    assert tail.lines() == []


def test_a_run_written_by_the_recorder_is_followed_until_it_completes(tmp_path) -> None:
    run_dir = create_run_dir(tmp_path, "t", time.localtime())
    writer = Bus()
    recorder = Recorder(run_dir, _meta(RunnerInfo.current()))
    writer.subscribe(recorder.handle)
    follower = Bus()
    seen = Seen(follower)
    source = FollowSource(run_dir, follower, poll_s=0.05)
    assert source.status == "running"

    writer.publish(WorkloadState("A", "starting", 0.5))
    writer.publish(WorkloadState("A", "running", 0.5, pid=4242))
    for i in range(1, 21):
        writer.publish(StepBatch.of(StepEvent("A", 4242, i, 0.5 + i * 0.1, 0.1, 32.0, i <= 5)))
    writer.publish(HostSample(1.0, 50.0, 1000.0, 24000.0, (75.0, 25.0)))
    writer.publish(LogLine("A", 1.0, "epoch 1"))
    writer.publish(Notice(1.2, "another process uses the GPU"))
    source.start()
    wait_for(
        lambda: len(seen.of(StepEvent)) == 20 and seen.of(LogLine) and seen.of(Notice),
        timeout=10,
        what="the first flush followed",
    )
    states = [(s.state, s.pid) for s in seen.of(WorkloadState)]
    assert states == [("starting", None), ("running", 4242)]
    assert (
        seen.of(SourceStatus)[0].available is False
        and seen.of(SourceStatus)[0].reason == "disabled"
    )
    assert [s.step for s in seen.of(StepEvent)] == list(range(1, 21))
    assert not [i for i in seen.raw if isinstance(i, StepEvent)], "steps reach the bus as StepBatch"
    assert seen.items.index(seen.of(WorkloadState)[0]) < seen.items.index(
        seen.of(StepEvent)[0]
    )  # start before steps
    assert seen.of(HostSample)[0].per_core == (
        75.0,
        25.0,
    )  # each core's CPU, for the viewer's cores line
    assert (
        seen.of(LogLine)[0].text == "epoch 1"
        and seen.of(Notice)[0].text == "another process uses the GPU"
    )
    assert source.now() >= 2.5  # the runner's clock, not the last record's

    writer.publish(StepBatch.of(StepEvent("A", 4242, 21, 2.6, 0.1, 32.0)))
    writer.publish(WorkloadState("A", "stopped", 2.7, pid=4242, exit_status=-15))
    recorder.close(2.7)
    wait_for(lambda: source.ended, timeout=10, what="the run to end")
    assert source.status == "complete"
    assert [s.step for s in seen.of(StepEvent)][-1] == 21
    assert seen.of(WorkloadState)[-1].state == "stopped"
    assert source.now() == source.end_t() == 2.7  # the final picture stays at the run's end
    assert source.poll() == 0


def _handmade_run(tmp_path: Path, runner: RunnerInfo) -> Path:
    """A run directory as a runner leaves it mid-run: run.json "recording", each table's header."""
    run_dir = create_run_dir(tmp_path, "t", time.localtime())
    (run_dir / "run.json").write_text(json.dumps(_meta(runner).to_json()))
    for table, columns in TABLES.items():
        (run_dir / f"{table}.csv").write_text(",".join(columns) + "\n")
    return run_dir


def test_the_newest_tick_of_other_processes_waits_for_the_rest_of_its_rows(tmp_path) -> None:
    run_dir = _handmade_run(tmp_path, RunnerInfo.current())
    lock = RunnerLock.take(run_dir)  # this process is its runner while the test runs
    try:
        follower = Bus()
        seen = Seen(follower)
        source = FollowSource(run_dir, follower)
        others = run_dir / "gpu_others.csv"
        with open(others, "a") as f:
            f.write("1.0,11,bob,train.py,1024,30,,,\n1.5,11,bob,train.py,1024,31,,,\n")
        source.poll()
        assert [o.t for o in seen.of(GpuOthers)] == [1.0]  # 1.5 may have more rows to come
        with open(others, "a") as f:
            f.write("1.5,12,eve,eval.py,2048,5,,,\n2.0,11,bob,train.py,1024,29,,,\n")
        source.poll()
    finally:
        lock.release()
    ticks = seen.of(GpuOthers)
    assert [o.t for o in ticks] == [1.0, 1.5]
    assert [p.pid for p in ticks[1].processes] == [11, 12]
    assert (
        isinstance(ticks[1].processes[1], OtherGpuProcess) and ticks[1].processes[1].user == "eve"
    )


def test_a_run_whose_runner_died_is_read_to_its_end_and_ends_as_interrupted(tmp_path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    runner = RunnerInfo(
        dead.pid, psutil.Process(dead.pid).create_time(), 0, "me", RunnerInfo.current().host
    )
    dead.wait()
    run_dir = _handmade_run(tmp_path, runner)  # a runner killed with -9 leaves run.json "recording"
    with open(run_dir / "steps.csv", "a") as f:
        f.write("A,1,1,0.4,0.1,,0,0,\nA,1,2,0.5")  # and perhaps a torn last line
    follower = Bus()
    seen = Seen(follower)
    source = FollowSource(run_dir, follower)
    assert source.status == INTERRUPTED
    source.poll()
    assert source.ended and [s.step for s in seen.of(StepEvent)] == [1]
    assert source.now() == 0.4


def test_a_jobs_rows_read_before_run_json_says_it_started_wait_for_its_start(tmp_path) -> None:
    # The runner flushes its tables, then run.json: a poll between the two reads a job's steps before its start.
    run_dir = _handmade_run(tmp_path, RunnerInfo.current())
    lock = RunnerLock.take(run_dir)
    try:
        follower = Bus()
        seen = Seen(follower)
        source = FollowSource(run_dir, follower)
        with open(run_dir / "steps.csv", "a") as f:
            f.write("A,4242,1,0.6,0.1,32,1,0,\nA,4242,2,0.7,0.1,32,1,0,\n")
        source.poll()
        assert seen.of(StepEvent) == [] and seen.of(WorkloadState) == []
        meta = _meta(RunnerInfo.current())
        meta.workloads[0].start_t, meta.workloads[0].pid = 0.5, 4242
        (run_dir / "run.json").write_text(json.dumps(meta.to_json()))
        source.poll()
        started = [
            (type(i).__name__, getattr(i, "state", getattr(i, "step", None)))
            for i in seen.items
            if isinstance(i, (WorkloadState, StepEvent))
        ]
        assert started == [
            ("WorkloadState", "starting"),
            ("WorkloadState", "running"),
            ("StepEvent", 1),
            ("StepEvent", 2),
        ]
    finally:
        lock.release()
