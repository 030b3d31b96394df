"""gpumon.analysis.rates on small frames with answers worked out by hand: which rows a job's curve is built from
(valid, sorted stably, past warm-up, a slice where it can be), the curve's steps and windows, rates over time and
where a rate was measured. Written for the mutation run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from gpumon.analysis.rates import (
    MIN_SEGMENT_STEPS,
    Curve,
    Segment,
    Window,
    curve,
    curve_of,
    inside,
    post_warmup,
    rate_over_time,
    solo_windows,
    timed,
    where,
    without_warmup,
)
from gpumon.core.records.model import StepEvent
from gpumon.core.store.recorder import Recorder, create_run_dir
from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store.trace import load_run

NAN = math.nan


def _frame(t, step, warmup=None) -> pd.DataFrame:
    return pd.DataFrame(
        {"t": t, "step": step, "warmup": warmup if warmup is not None else [0] * len(t)}
    )


def test_timed_drops_rows_without_a_time_or_a_step_and_sorts_stably() -> None:
    rows = _frame([1.0, NAN, 3.0, 2.0], [0, 1, NAN, 3])
    got = timed(rows)
    assert got["t"].tolist() == [1.0, 2.0] and got.index.tolist() == [0, 3]
    ordered = _frame([1.0, 2.0, 3.0], [0, 1, 2])
    assert timed(ordered) is ordered  # already valid and sorted: the frame itself
    # many rows at a few times, shuffled: rows of one time keep their file order (a stable sort)
    rng = np.random.default_rng(3)
    t = rng.integers(0, 4, 200).astype(float)
    shuffled = _frame(t, list(range(200)))
    got = timed(shuffled)
    assert got["t"].is_monotonic_increasing
    for value in range(4):
        steps = got.loc[got["t"] == value, "step"].tolist()
        assert steps == sorted(steps), value


def test_without_warmup_counts_an_empty_cell_as_steady() -> None:
    rows = _frame([1.0, 2.0, 3.0, 4.0], [0, 1, 2, 3], [1, NAN, 0, 0])
    assert without_warmup(rows)["step"].tolist() == [1, 2, 3]


def test_where_slices_consecutive_rows_and_keeps_the_frame_when_all_are_kept() -> None:
    rows = _frame([1.0, 2.0, 3.0, 4.0, 5.0], [0, 1, 2, 3, 4])
    assert where(rows, pd.Series([True] * 5)) is rows
    assert len(where(rows, pd.Series([False] * 5))) == 0
    middle = where(rows, pd.Series([False, True, True, True, False]))
    assert middle["step"].tolist() == [1, 2, 3] and middle.index.tolist() == [1, 2, 3]
    assert np.shares_memory(middle["t"].to_numpy(), rows["t"].to_numpy())  # a slice, not a copy
    tail = where(rows, pd.Series([False, False, False, True, True]))
    assert tail["step"].tolist() == [3, 4]
    gaps = where(rows, pd.Series([True, False, True, False, True]))
    assert gaps["step"].tolist() == [0, 2, 4] and gaps.index.tolist() == [0, 2, 4]
    two_gaps = where(rows, pd.Series([False, True, False, True, False]))
    assert two_gaps["step"].tolist() == [1, 3]


def test_inside_keeps_the_rows_on_both_edges() -> None:
    rows = _frame([1.0, 2.0, 3.0, 4.0], [0, 1, 2, 3])
    assert inside(rows, Window(2.0, 3.0))["step"].tolist() == [1, 2]
    assert inside(rows, Window(1.5, 3.5))["step"].tolist() == [1, 2]


def test_a_curve_needs_two_steps_and_counts_whole_steps_in_a_window() -> None:
    assert curve_of(_frame([1.0], [0])) is None
    c = curve_of(_frame([1.0, 3.0], [0, 4]))
    assert c is not None and c.t.tolist() == [1.0, 3.0] and c.n.tolist() == [0.0, 4.0]
    assert c.n.dtype == np.float64 and c.t.dtype == np.float64
    assert (c.first_t, c.last_t, len(c), c.span()) == (1.0, 3.0, 2, Window(1.0, 3.0))
    assert c.rate(Window(1.5, 2.5)) == 2.0 and c.steps_in(Window(1.0, 3.0)) == 4
    assert c.steps_in(Window(1.0, 1.7)) == 1 and c.steps_in(Window(2.0, 2.0)) == 0
    assert c.steps_in(Window(3.0, 1.0)) == 0  # inverted: none, not a negative count


def test_solo_windows_need_min_segment_steps_before_and_after_the_other_job() -> None:
    c = Curve(np.arange(0.0, 11.0), np.arange(0.0, 11.0))  # one step a second, 0 to 10 s
    both = solo_windows(c, other_start=float(MIN_SEGMENT_STEPS), other_end=10.0 - MIN_SEGMENT_STEPS)
    assert both == [
        Window(0.0, MIN_SEGMENT_STEPS),
        Window(10.0 - MIN_SEGMENT_STEPS, 10.0),
    ]  # exactly the minimum
    short = solo_windows(
        c, other_start=MIN_SEGMENT_STEPS - 0.5, other_end=10.0 - MIN_SEGMENT_STEPS + 0.5
    )
    assert short == []
    assert solo_windows(c, other_start=20.0, other_end=30.0) == [
        Window(0.0, 10.0)
    ]  # the other never overlapped


def test_rate_over_time_in_equal_slices_of_the_window() -> None:
    c = Curve(
        np.array([0.0, 4.0, 8.0]), np.array([0.0, 40.0, 120.0])
    )  # 10 it/s to 4 s, then 20 it/s
    mids, rates = rate_over_time(c, Window(2.0, 6.0), bins=4)
    assert mids.tolist() == [0.5, 1.5, 2.5, 3.5]
    assert rates.tolist() == [10.0, 10.0, 20.0, 20.0]
    mids, rates = rate_over_time(c, Window(0.0, 8.0))
    assert (
        len(mids) == len(rates) == 60
        and rates[0] == pytest.approx(10.0)
        and rates[-1] == pytest.approx(20.0)
    )


def test_a_segment_says_where_its_rate_was_measured() -> None:
    seg = Segment("/runs/20261123-x-fcn", "A", "exclusive", 1.5, 4.0, 30)
    assert seg.window == Window(1.5, 4.0) and seg.name == "20261123-x-fcn"
    assert seg.to_dict() == {
        "run": "/runs/20261123-x-fcn",
        "slot": "A",
        "role": "exclusive",
        "start": 1.5,
        "end": 4.0,
        "duration": 2.5,
        "steps": 30,
    }


def test_a_jobs_curve_from_a_run_directory(tmp_path) -> None:
    path = create_run_dir(tmp_path, "curve", time.localtime())
    recorder = Recorder(
        path,
        RunMeta.from_json({"schema": 1, "label": "curve", "status": "recording", "workloads": []}),
    )
    for n, (t, warm) in enumerate([(0.5, True), (1.0, False), (2.0, False), (4.0, False)]):
        recorder.handle(StepEvent("A", 9, n, t, 0.1, warmup=warm))
        recorder.handle(StepEvent("B", 8, n, t + 0.25, 0.1, warmup=False))
    recorder.close(5.0)
    run = load_run(path)
    assert post_warmup(run, "A")["step"].tolist() == [1, 2, 3]
    c = curve(run, "A")
    assert c is not None and c.t.tolist() == [1.0, 2.0, 4.0] and c.n.tolist() == [1.0, 2.0, 3.0]
    b = curve(run, "B")
    assert b is not None and b.t.tolist() == [0.75, 1.25, 2.25, 4.25]
