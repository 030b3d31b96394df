"""compare reads a run's steps a row group at a time, only the columns it needs, never the whole table (issue 41):
its answer equals the one read from steps.csv whole; its capped copy samples equal the pooled values thinned the
documented way; each job's curve, span and the evidence's window sums equal plain pandas on any steps table."""

from __future__ import annotations

import math
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.analysis import compare as compare_module
from gpumon.analysis import jobsteps, slowdown
from gpumon.analysis.compare import compare
from gpumon.core.records.model import STEP_COLUMNS
from gpumon.core.store import columnar, stepchunks, tablecheck
from gpumon.core.store.trace import Run, load_run
from tests.core.test_compare_reads import _runs, _shuffle_rows
from tests.tracegen import Job, staggered_pair, write_run

TRACKED = {"process", *jobsteps.TRACK_COLUMNS}


def _many_groups(monkeypatch: pytest.MonkeyPatch, *runs: Path) -> None:
    """Each run's copy written in row groups of a few rows."""
    monkeypatch.setattr(columnar, "BLOCK_BYTES", 256)
    for run_dir in runs:
        (run_dir / columnar.STEPS_COLUMNAR).unlink(missing_ok=True)
        assert columnar.write_run_copy(run_dir)
        assert columnar.open_copy(run_dir).metadata.num_row_groups >= 20


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, frozenset[str]]]:
    """Every row group compare reads, with its columns; reading a steps table whole fails the test."""
    reads: list[tuple[int, frozenset[str]]] = []
    read = stepchunks.read_group

    def counted(copy, i, columns):
        reads.append((i, frozenset(columns)))
        return read(copy, i, columns)

    def whole(self, *args, **kwargs):
        raise AssertionError("compare read a steps table whole")

    monkeypatch.setattr(stepchunks, "read_group", counted)
    monkeypatch.setattr(Run, "steps", whole)
    monkeypatch.setattr(Run, "step_columns", whole)
    return reads


def test_compare_reads_the_steps_by_row_group_and_answers_as_from_the_whole_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staggered pair (baselines from its exclusive phases) and exclusive runs with copies: with many row groups
    compare reads each once for the curves, only the columns it needs, and the same answer as steps.csv whole."""
    pair = staggered_pair(tmp_path / "pair")
    xa, xb, ab = _runs(tmp_path)
    with monkeypatch.context() as no_copy:
        no_copy.setattr(Run, "columnar_file", lambda self, make=True: None)
        from_csv = [
            compare([], [load_run(pair)]),
            compare([load_run(xa), load_run(xb)], [load_run(ab)]),
        ]
    _many_groups(monkeypatch, pair, xa, xb, ab)
    groups = columnar.open_copy(pair).metadata.num_row_groups
    reads = _counting(monkeypatch)
    staggered = compare([], [load_run(pair)])
    assert {columns for _, columns in reads} <= {
        frozenset(TRACKED),
        frozenset({"process", *stepchunks.COUNT_COLUMNS}),
    }
    assert not any({"pid", "samples"} & columns for _, columns in reads), (
        "columns compare never uses"
    )
    assert reads[:groups] == [(i, TRACKED) for i in range(groups)], "one pass for the curves"
    tracked = Counter(i for i, columns in reads if columns == TRACKED)
    assert max(tracked.values()) <= 3, "then the copies' values: once a side at most"
    windows = len([s for w in staggered.workloads for s in (*w.exclusive, *w.shared)])
    evidence = [i for i, columns in reads if columns != TRACKED]
    assert len(evidence) <= 2 * windows, "the evidence reads only the row groups its windows cut"
    assert staggered.to_dict() == from_csv[0].to_dict()
    assert compare([load_run(xa), load_run(xb)], [load_run(ab)]).to_dict() == from_csv[1].to_dict()


def _reference_pooled(segments, metric: str) -> np.ndarray:
    """The copy metric's values over the segments as compare computed them from whole tables (pandas masks)."""
    parts = []
    for seg in segments:
        steps = tablecheck.checked_steps(pd.read_csv(Path(seg.run) / "steps.csv"))
        rows = steps[(steps["process"] == seg.slot) & steps["t"].notna() & steps["step"].notna()]
        rows = rows.sort_values("t", kind="stable")
        rows = rows[rows["warmup"].fillna(0).astype(int) == 0]
        rows = rows[(rows["t"] >= seg.start) & (rows["t"] <= seg.end)]
        if metric == "copy_bandwidth":
            rows = rows[(rows["copy_bytes"] > 0) & (rows["copy_s"] > 0)]
            parts.append((rows["copy_bytes"] / rows["copy_s"]).to_numpy(float))
        else:
            rows = rows[rows["iter_s"] > 0]
            parts.append((rows["copy_bytes"].fillna(0) / rows["iter_s"]).to_numpy(float))
    return np.concatenate(parts)


@pytest.mark.parametrize("cap", [7, 50, 100_000])
def test_the_copy_samples_are_the_pooled_values_evenly_thinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """Chosen before they are read (rows out of time order included): the values, in order, that thinning the pooled
    values of every window would give; the note names each metric capped."""
    xa, xb, ab = _runs(tmp_path)
    for run_dir in (xa, ab):
        _shuffle_rows(run_dir)
    _many_groups(monkeypatch, xa, xb, ab)
    monkeypatch.setattr(compare_module, "MAX_TEST_SAMPLES", cap)
    result = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    capped = []
    for w in result.workloads:
        for metric in ("copy_bandwidth", "copy_bytes_per_s"):
            sides = [_reference_pooled(segs, metric) for segs in (w.exclusive, w.shared)]
            if max(len(s) for s in sides) > cap:
                capped.append(f"{w.slot} {metric}")
            expected = [
                s[np.linspace(0, len(s) - 1, cap).astype(np.intp)] if len(s) > cap else s
                for s in sides
            ]
            assert all(len(s) for s in expected), "every window has copies"
            got = result.samples[(w.slot, metric)]
            for mine, theirs in zip(got, expected):
                assert mine.tolist() == theirs.tolist()
    notes = [n for n in result.notes if n.startswith("Distribution tests on at most")]
    assert bool(notes) == bool(capped) == (cap < 100_000)
    if notes:
        named = _thinned_named(notes[0], cap)
        assert set(capped) <= set(named) and len(named) == len(set(named))


def _thinned_named(note: str, cap: int) -> list[str]:
    """The "SLOT metric" items compare's THINNED_NOTE names, after checking the rest of its words."""
    head = f"Distribution tests on at most {cap:,} samples per side and metric, evenly spaced over the windows: "
    tail = f". (The rate intervals' block bootstrap resamples at most {slowdown.MAX_BINS} bins per window, however long the run.)"
    assert note.startswith(head) and note.endswith(tail), note
    named = note[len(head) : -len(tail)].split(", ")
    assert all(re.fullmatch(r"[AB] [a-z_]+", item) for item in named), named
    return named


def test_a_metric_with_exactly_the_cap_of_samples_is_not_said_thinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xa, xb, ab = _runs(tmp_path)
    whole = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    exclusive, shared = whole.samples[("A", "copy_bandwidth")]
    most = max(len(exclusive), len(shared))
    for cap, said in ((most, False), (most - 1, True)):
        monkeypatch.setattr(compare_module, "MAX_TEST_SAMPLES", cap)
        result = compare([load_run(xa), load_run(xb)], [load_run(ab)])
        notes = [n for n in result.notes if n.startswith("Distribution tests on at most")]
        named = _thinned_named(notes[0], cap) if notes else []
        assert ("A copy_bandwidth" in named) == said, (cap, named)


def test_a_side_without_windows_has_no_copy_samples(tmp_path: Path) -> None:
    """A job that never ran alone (no baseline window): its exclusive side is empty, its shared side read."""
    _, _, ab = _runs(tmp_path)
    run = load_run(ab)
    job = jobsteps.jobs_of(run)["A"]
    shared = [jobsteps.Part(run, "A", job, job.curve().span())]
    found = jobsteps.copy_samples([], shared, 100_000)
    bandwidth = found["copy_bandwidth"]
    assert bandwidth.exclusive is not None and bandwidth.shared is not None
    assert len(bandwidth.exclusive) == 0 and len(bandwidth.shared) == bandwidth.total > 0


NUMBER = st.one_of(
    st.floats(-5.0, 60.0, allow_nan=False).map(lambda x: round(x, 3)),
    st.sampled_from([math.nan, 1e9, -1e9]),
)
ROW = st.tuples(
    st.sampled_from(["A", "B", "C", ""]),
    NUMBER,  # t
    st.one_of(st.integers(0, 500).map(float), st.sampled_from([math.nan, 2.0**60])),  # step
    st.sampled_from([0.0, 1.0, math.nan]),  # warmup
    st.one_of(st.floats(0.0, 0.5), st.sampled_from([math.nan, -1.0, 1e7])),  # iter_s
    st.sampled_from([0.0, 4096.0, math.nan]),  # copy_bytes
    st.sampled_from([0.0, 0.002, math.nan]),  # copy_s
)


_TEMPLATE: list[Path] = []


def _template(factory: pytest.TempPathFactory) -> Path:
    """A finished run (run.json, the sampled tables) whose steps each example writes."""
    if not _TEMPLATE:
        _TEMPLATE.append(write_run(factory.mktemp("template") / "r", [Job(phases=((1.0, 0.1),))]))
    return _TEMPLATE[0]


def _write_steps(run_dir: Path, rows: list[tuple]) -> None:
    frame = pd.DataFrame(
        {
            "process": [r[0] for r in rows],
            "pid": 1,
            "step": [r[2] for r in rows],
            "t": [r[1] for r in rows],
            "iter_s": [r[4] for r in rows],
            "samples": 64,
            "warmup": [r[3] for r in rows],
            "copy_bytes": [r[5] for r in rows],
            "copy_s": [r[6] for r in rows],
        },
        columns=list(STEP_COLUMNS),
    )
    frame.to_csv(run_dir / "steps.csv", index=False)


@settings(
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=st.lists(ROW, min_size=1, max_size=60), window=st.tuples(NUMBER, NUMBER))
def test_each_jobs_steps_from_row_groups_equal_plain_pandas(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple], window: tuple[float, float]
) -> None:
    """Any steps table (rows out of order, ties, empty and out-of-bounds cells, rows without a job) in row groups of a
    few rows: each job's curve, span and rows, and the evidence's sums over a window, as pandas computes them."""
    run_dir = tmp_path_factory.mktemp("run") / "r"
    shutil.copytree(_template(tmp_path_factory), run_dir)
    _write_steps(run_dir, rows)
    old = columnar.BLOCK_BYTES
    columnar.BLOCK_BYTES = 256  # a few rows a row group
    try:
        made = columnar.write_run_copy(run_dir)
    finally:
        columnar.BLOCK_BYTES = old
    steps = tablecheck.checked_steps(
        pd.read_csv(run_dir / "steps.csv", keep_default_na=False, na_values=[""])
    )
    found = jobsteps.read_jobs(load_run(run_dir))
    assert made or columnar.open_copy(run_dir) is None, (
        "no copy: the table read whole, as one chunk"
    )
    # a row naming no slot ("C") is no job's step (tablecheck.is_job): the trust boundary's rule
    jobs = {str(j) for j in steps["process"].dropna()} & {"A", "B"}
    assert set(found) == jobs
    for slot, job in found.items():
        mine = steps[steps["process"].astype(str) == slot]
        timed = mine[mine["t"].notna() & mine["step"].notna()].sort_values("t", kind="stable")
        post = timed[timed["warmup"].fillna(0).astype(int) == 0]
        assert job.rows == len(mine)
        assert (
            job.t.tolist() == post["t"].tolist()
            and job.n.tolist() == post["step"].astype(float).tolist()
        )
        starts = timed["t"] - timed["iter_s"].fillna(0)
        assert job.span == (
            (float(starts.min()), float(timed["t"].max())) if len(timed) else (math.inf, -math.inf)
        )
        start, end = sorted(window)
        inside = mine[(mine["warmup"] != 1) & (mine["t"] >= start) & (mine["t"] <= end)]
        count, (copy_s, copy_bytes) = stepchunks.window_sums(load_run(run_dir), slot, start, end)
        assert count == len(inside)
        assert copy_s == pytest.approx(float(inside["copy_s"].sum()), abs=1e-9)
        assert copy_bytes == pytest.approx(float(inside["copy_bytes"].sum()), abs=1e-6)
