"""The replay source: a run directory published onto a bus in time order, deterministically."""

from __future__ import annotations

import math
import threading

import pytest

from gpumon.core.records.bus import Bus
from gpumon.core.records.model import (
    DeviceSample,
    HostSample,
    LogLine,
    ProcessSample,
    SourceStatus,
    StepBatch,
    StepEvent,
    WorkloadState,
)
from gpumon.core.sources.replay import AS_FAST_AS_POSSIBLE, ReplaySource
from gpumon.core.store.trace import Run, TraceError
from tests.helpers import unbatched
from tests.tracegen import staggered_pair


def _collect(bus: Bus) -> list[object]:
    """What the bus carries, each StepBatch as its steps (a replayed step is a batch of one)."""
    items: list[object] = []
    bus.subscribe(lambda item: items.extend(unbatched([item])))
    return items


def test_seek_publishes_everything_up_to_t_in_time_order(tmp_path):
    root = staggered_pair(tmp_path / "run", gpu=True)
    bus = Bus()
    items = _collect(bus)
    source = ReplaySource(root, bus)
    assert source.run.gpu is not None and str(source.run.gpu.name).endswith("(simulated)")
    assert source.run.specs == {"A": "fcn:preset=tiny", "B": "gemm:preset=tiny"}
    source.seek(15.0)
    assert isinstance(items[0], SourceStatus) and items[0].available
    times = [x.t for x in items[1:] if hasattr(x, "t")]
    assert times == sorted(times) and max(times) <= 15.0
    kinds = {type(x) for x in items}
    assert {StepEvent, DeviceSample, ProcessSample, HostSample, WorkloadState} <= kinds
    states = [(x.slot, x.state) for x in items if isinstance(x, WorkloadState)]
    assert states == [("A", "starting"), ("A", "running"), ("B", "starting"), ("B", "running")]
    assert source.now() == 15.0
    first = len(items)
    source.seek(10.0)
    assert len(items) == first, "replay only moves forward"
    source.seek(source.end_t)
    assert source.finished
    assert [x.text for x in items if isinstance(x, LogLine)][0].startswith(
        "gpumon.workloads: training fcn"
    )
    exits = [x for x in items if isinstance(x, WorkloadState) and x.state == "exited"]
    assert {(x.slot, x.exit_status) for x in exits} == {("A", 0), ("B", 0)}


def test_replay_of_the_same_run_is_identical(tmp_path):
    root = staggered_pair(tmp_path / "run", crash_b=True)
    first, second = Bus(), Bus()
    a, b = _collect(first), _collect(second)
    for bus in (first, second):  # the whole run at once: its end state
        source = ReplaySource(root, bus, AS_FAST_AS_POSSIBLE)
        source.seek(source.end_t)
    assert a and [repr(x) for x in a] == [repr(x) for x in b]
    steps = [x for x in a if isinstance(x, StepEvent)]
    assert all(isinstance(x.pid, int) and isinstance(x.warmup, bool) for x in steps)
    assert any(math.isnan(x.copy_s) for x in steps) and any(x.copy_bytes for x in steps)


def test_play_as_fast_as_possible_reaches_the_end(tmp_path):
    root = staggered_pair(tmp_path / "run")
    bus = Bus()
    done = threading.Event()
    bus.subscribe(
        lambda x: (
            done.set()
            if isinstance(x, WorkloadState) and x.slot == "B" and x.state == "exited"
            else None
        )
    )
    source = ReplaySource(root, bus, AS_FAST_AS_POSSIBLE)
    source.play()
    try:
        assert done.wait(20)
    finally:
        source.stop()
    assert source.now() == pytest.approx(source.end_t)


def test_play_in_real_time_moves_the_clock(tmp_path):
    root = staggered_pair(tmp_path / "run")
    bus = Bus()
    seen = threading.Event()
    bus.subscribe(
        lambda x: seen.set() if isinstance(x, StepBatch) and x.steps[-1].t > 2.0 else None
    )
    source = ReplaySource(root, bus, speed=8.0)
    source.seek(1.0)
    source.play()
    try:
        assert seen.wait(10)
        assert source.now() > 2.0
        source.set_speed(AS_FAST_AS_POSSIBLE)
    finally:
        source.stop()


def test_bad_runs_are_trace_errors(tmp_path):
    with pytest.raises(TraceError):
        ReplaySource(tmp_path / "missing", Bus())
    root = staggered_pair(tmp_path / "run")
    (root / "steps.csv").write_text(
        "process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s\nA,x,0,1,1,,0,0,\n"
    )
    with pytest.raises(TraceError):
        ReplaySource(root, Bus()).load()
    with pytest.raises(ValueError):
        ReplaySource(root, Bus(), speed=0)


def _replayed(root, to: float | None = None) -> tuple[ReplaySource, list[str]]:
    bus = Bus()
    items = _collect(bus)
    source = ReplaySource(root, bus)
    source.seek(source.end_t if to is None else to)
    return source, [repr(x) for x in items]


def test_first_frame_reads_only_the_row_groups_it_shows(tmp_path, monkeypatch):
    """With a columnar copy of many row groups the first frame reads few of them, and the whole replay is the same
    record for record as the replay of steps.csv."""
    from gpumon.core.store import columnar

    root = staggered_pair(tmp_path / "run", gpu=True)
    with monkeypatch.context() as no_copy:
        no_copy.setattr(Run, "columnar_file", lambda self, make=True: None)
        _, from_csv = _replayed(root)
    monkeypatch.setattr(columnar, "BLOCK_BYTES", 256)  # a few rows a row group
    assert columnar.write_run_copy(root)
    groups = columnar.open_copy(root).metadata.num_row_groups
    assert groups >= 20
    source, _ = _replayed(root, to=-math.inf)
    source.seek(source.start_t)
    assert source._steps is not None and source._steps.groups_read <= 1
    first_step = source._steps.spans[0][0]
    source.seek(first_step)
    assert 1 <= source._steps.groups_read <= 2, (
        "the first frame with a step reads its row group, not the table"
    )
    source.seek((first_step + source.end_t) / 2)
    assert source._steps.groups_read < groups
    source.seek(source.end_t)
    assert source.finished and source._steps.groups_read == groups
    source, from_copy = _replayed(root)
    assert from_copy == from_csv
    assert [_replayed(root, to)[1] for to in (5.0, 15.0)] == [
        from_csv[: len(_replayed(root, to)[1])] for to in (5.0, 15.0)
    ]
