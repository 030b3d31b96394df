"""The no-steps notice (issue 43): said only once a job trains (its first backward pass) and uses CPU without a step,
never while it imports or loads data; withdrawn by the first step after it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpumon.core.capture.nosteps import NoStepsWatch
from gpumon.core.records.model import (
    NO_STEPS,
    NO_STEPS_WITHDRAWN,
    Notice,
    ProcessSample,
    StepBatch,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
)


def _watch() -> tuple[NoStepsWatch, list[Notice]]:
    said: list[Notice] = []
    watch = NoStepsWatch(said.append)  # type: ignore[arg-type]
    watch.handle(WorkloadState("A", "running", 0.0, pid=1, job={"kind": "cmd"}))
    return watch, said


def _busy(watch: NoStepsWatch, start: float, end: float) -> None:
    """A whole core in use from ``start`` to ``end``, sampled every 0.5 s."""
    t = start
    while t <= end:
        watch.handle(ProcessSample(t, "A", 1, cpu_pct=100.0, rss_mib=10.0, threads=1))
        t += 0.5


def test_cpu_before_the_first_backward_pass_is_not_no_steps():
    watch, said = _watch()
    _busy(watch, 0.5, 30.0)  # importing, loading a data set: 30 s of CPU
    assert said == []
    watch.handle(WorkloadMeta("A", 1, {"training": True}))
    _busy(watch, 30.5, 33.0)
    assert said == [], "2.5 s of training is not yet 5"
    _busy(watch, 33.5, 37.0)
    assert [n.kind for n in said] == [NO_STEPS]


def test_the_first_step_after_the_notice_withdraws_it_once():
    watch, said = _watch()
    watch.handle(WorkloadMeta("A", 1, {"training": True}))
    _busy(watch, 0.5, 10.0)
    watch.handle(StepBatch.of(StepEvent("A", 1, 0, 12.0, 12.0)))
    watch.handle(StepBatch.of(StepEvent("A", 1, 1, 12.5, 0.5)))
    assert [n.kind for n in said] == [NO_STEPS, NO_STEPS_WITHDRAWN]
    assert said[1].slot == "A" and "12.0 s" in said[1].text


def test_a_job_that_steps_before_the_notice_is_never_told():
    watch, said = _watch()
    watch.handle(WorkloadMeta("A", 1, {"training": True}))
    _busy(watch, 0.5, 3.0)
    watch.handle(StepBatch.of(StepEvent("A", 1, 0, 3.2, 3.2)))
    _busy(watch, 3.5, 30.0)
    assert said == []


@given(
    st.lists(
        st.one_of(st.floats(min_value=0.0, max_value=1600.0), st.just(float("nan"))), max_size=200
    )
)
def test_any_cpu_before_training_says_nothing(cpu):
    watch, said = _watch()
    for i, pct in enumerate(cpu):
        watch.handle(ProcessSample(0.5 * (i + 1), "A", 1, cpu_pct=pct, rss_mib=1.0, threads=1))
    assert said == []
