"""The live graphs' time (issue 43: "graphs have no time axis"): an axis whose labels sit at the column of the time they
name, and the span a graph's width covers."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumon.tui.widgets.graph import TICK_GAP, axis_row, span_text

LABEL = re.compile(r"-(\d+)([sm])")


@pytest.fixture(autouse=True)
def _axes_drawn_anew():
    """Each test draws its axes itself, not from ``axis_row``'s cache, which lives as long as the process: a mutation
    run (benchmarks/mutation.py) forks each mutant's tests from a process that has run them once already, and a
    cached axis would hide a wrong label."""
    axis_row.cache_clear()


@given(st.integers(0, 400), st.sampled_from([0.5, 1.0, 2.0, 5.0]))
def test_each_label_ends_at_the_column_of_its_time(width, bin_s):
    axis = axis_row(width, bin_s)
    assert len(axis) == width
    if width >= 3:
        assert axis.endswith("now"), "the newest bin is the right edge"
    ends = []
    for match in LABEL.finditer(axis):
        seconds = int(match[1]) * (60 if match[2] == "m" else 1)
        column = match.end() - 1
        assert column == width - 1 - round(seconds / bin_s), axis
        ends.append(column)
    assert all(b - a >= TICK_GAP for a, b in zip(ends, ends[1:])), axis
    assert len(set(LABEL.findall(axis))) == len(ends), "no label said twice"


def test_an_axis_reads_as_the_seconds_before_now():
    assert axis_row(40, 1.0) == "      -30s      -20s      -10s       now"
    assert axis_row(13, 1.0) == "          now"


def test_the_span_reads_whole():
    assert [span_text(s) for s in (14, 119.4, 120, 240, 7200)] == [
        "14 s",
        "119 s",
        "2 min",
        "4 min",
        "2 h",
    ]


def test_labels_read_in_minutes_from_two_minutes_on_when_whole():
    """Below two minutes, and where the time is not whole minutes, a label says seconds; from two whole minutes on, it
    says minutes."""
    assert axis_row(80, 2.0) == (
        "-150s            -2m           -90s           -60s           -30s            now"
    )
    assert axis_row(200, 1.0).split() == ["-3m", "-2m", "-60s", "now"]


def test_the_span_rounds_to_the_nearest_whole_unit():
    """Minutes and hours are the span divided by 60 and 3,600, to the nearest whole one: 90 minutes read "90 min", and
    9,002 s (2.5006 h) read "3 h", not "2 h"."""
    assert [span_text(s) for s in (5400, 7199, 9002, 36000)] == ["90 min", "120 min", "3 h", "10 h"]
