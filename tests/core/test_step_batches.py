"""Steps reach the bus in batches (a probe message's rows are one StepBatch): every subscriber ends in the same state
however the same steps were cut into batches, one by one included."""

from __future__ import annotations

import csv
import io
from operator import attrgetter
from typing import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from gpumon.checks.verify import _Progress
from gpumon.core.capture.metrics import RunMetrics
from gpumon.core.capture.nosteps import NoStepsWatch
from gpumon.core.capture.stagger import StaggerWatch
from gpumon.core.interference.live import LiveStats
from gpumon.core.jobs.beside import SoloHistory
from gpumon.core.records.model import (
    StepBatch,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
    field_of,
)
from gpumon.core.store.recorder import TABLES, _cells, _step_line

STEP = st.tuples(
    st.sampled_from("AB"),
    st.floats(0.001, 0.5),  # seconds since the job's step before
    st.booleans(),  # warm-up
    st.integers(0, 1 << 20),  # copy bytes
)


def _steps(drawn: list[tuple[str, float, bool, int]]) -> list[StepEvent]:
    """The drawn steps in arrival order: each job's numbered from 0, its times rising."""
    t = {"A": 1.0, "B": 1.0}
    n = {"A": 0, "B": 0}
    out = []
    for slot, dt, warmup, copy in drawn:
        t[slot] += dt
        out.append(StepEvent(slot, 7, n[slot], t[slot], dt, 8.0, warmup, copy, dt / 4))
        n[slot] += 1
    return out


def _batches(steps: list[StepEvent], cuts: set[int]) -> list[StepBatch]:
    """``steps`` cut into batches of one job each: a new batch where the job changes or at a cut."""
    batches: list[list[StepEvent]] = []
    for i, step in enumerate(steps):
        if not batches or batches[-1][0].slot != step.slot or i in cuts:
            batches.append([])
        batches[-1].append(step)
    return [StepBatch(b[0].slot, tuple(b)) for b in batches]


def _state_after(before: list[StepBatch], after: list[StepBatch]) -> list[object]:
    """What each subscriber holds, and published, after job A's start, the batches ``before``, B's start and the
    batches ``after``."""
    published: list[object] = []
    live = LiveStats()
    no_steps = NoStepsWatch(published.append, cpu_s=0.0)
    stagger = StaggerWatch(published.append, stagger_s=5.0)
    history = SoloHistory("B")
    metrics = RunMetrics(lambda: 0.0, {}, live)
    progress = _Progress(busy_s=2.0)
    take: list[Callable[[object], None]] = [
        live.handle,
        no_steps.handle,
        stagger.handle,
        history.handle,
        metrics.handle,
        progress.handle,
    ]
    starts: list[object] = [
        WorkloadState("A", "running", 0.0, pid=7, job={"kind": "cmd"}),
        WorkloadMeta("A", 7, {"training": True}),
    ]
    for item in [*starts, *before, WorkloadState("B", "running", 1.0, job={}), *after]:
        for handle in take:
            handle(item)
    end = max((b.steps[-1].t for b in [*before, *after]), default=1.0)
    return [
        repr(live.now(end)),
        published,
        (history.first, history.last, history.steps, history.probed),
        {slot: (job.steps, job.copy_bytes) for slot, job in metrics.jobs.items()},
        (progress.first_t, progress.last_t, progress.half.is_set(), progress.done.is_set()),
    ]


@settings(max_examples=80, deadline=None)
@given(
    drawn=st.lists(STEP, min_size=1, max_size=80),
    cuts=st.sets(st.integers(0, 79)),
    b_starts=st.integers(0, 80),
)
def test_every_subscriber_ends_the_same_however_the_steps_were_batched(drawn, cuts, b_starts):
    """B's start arrives after the first ``b_starts`` steps, between two batches, in both."""
    steps = _steps(drawn)
    before, after = steps[:b_starts], steps[b_starts:]
    batched = _state_after(_batches(before, cuts), _batches(after, cuts))
    one_by_one = _state_after(
        [StepBatch.of(step) for step in before], [StepBatch.of(step) for step in after]
    )
    assert batched == one_by_one


def test_a_batch_of_warm_up_steps_only_does_not_end_a_stagger_and_one_with_a_steady_step_does():
    for warmups, lost in (((True, True), True), ((True, False), False)):
        published: list[object] = []
        stagger = StaggerWatch(published.append, stagger_s=5.0)
        stagger.handle(WorkloadState("A", "running", 0.0, job={}))
        steps = tuple(
            StepEvent("A", 7, i, 0.1 * (i + 1), 0.1, warmup=w) for i, w in enumerate(warmups)
        )
        stagger.handle(StepBatch("A", steps))
        stagger.handle(WorkloadState("B", "running", 1.0, job={}))
        assert bool(published) is lost


@settings(max_examples=300, deadline=None)
@given(
    t=st.floats(allow_nan=True),
    iter_s=st.floats(allow_nan=True),
    samples=st.floats(allow_nan=True),
    copy_s=st.floats(allow_nan=True),
    warmup=st.booleans(),
    copy_bytes=st.integers(0, 2**50),
    step=st.integers(0, 2**62),
    slot=st.sampled_from(["A", "B"]) | st.text(max_size=6),
)
def test_a_steps_line_is_what_the_csv_module_writes_of_its_cells(
    t, iter_s, samples, copy_s, warmup, copy_bytes, step, slot
):
    """steps.csv's lines are written out for speed: each must be the csv module's line of ``_cells``, the cells every
    other table's rows are made of (NaN empty, a boolean 0/1), for any step (a slot with a comma or a quote too)."""
    record = StepEvent(slot, 7, step, t, iter_s, samples, warmup, copy_bytes, copy_s)
    (columns,) = [c for cls, _, c in TABLES if cls is StepEvent]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(
        _cells(attrgetter(*map(field_of, columns))(record))
    )
    assert _step_line(record) == out.getvalue()
