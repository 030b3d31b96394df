"""The reader's summary cache (``summary_of``), its reads of big runs a row group at a time (``CHUNK_ROWS`` lowered, not
a million rows written) and ``export``'s streamed tables. Written for the mutation run (issue 44: benchmarks/mutation.py,
docs/testing.md)."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import gpumon.core.store.trace as trace
from gpumon.core.records.enums import RunStatus
from gpumon.core.records.model import StepEvent
from gpumon.core.store import columnar
from gpumon.core.store.columnar import STEPS_COLUMNAR
from gpumon.core.store.recorder import Recorder, create_run_dir
from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store.summary import RunSummaryRecord
from gpumon.core.store.trace import (
    RATE_COLUMNS,
    exclusive_ends,
    export,
    load_run,
    steps_summary,
    summary_of,
)
from tests.tracegen import Job, write_run

PLANTED = RunSummaryRecord({"A": 123.5}, {"A": 1})  # no run of these tests has this summary


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("GPUMON_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _finished(tmp_path: Path) -> trace.Run:
    """A finished two-job run, loaded as if it had been recorded without run.json's summary."""
    path = write_run(
        tmp_path / "run",
        [Job("A", phases=((4.0, 0.1),)), Job("B", phases=((4.0, 0.25),), pid=7)],
    )
    run = load_run(path)
    run.meta.summary = None
    return run


def _where(run: trace.Run) -> Path:
    where = columnar.user_cache_path(run.path, "summaries", ("run.json", "steps.csv"), ".json")
    assert where is not None
    return where


def test_a_finished_run_without_a_summary_gets_one_cached_in_a_private_folder(tmp_path, _own_cache):
    run = _finished(tmp_path)
    made = summary_of(run)
    assert made == steps_summary(run) and set(made.steps) == {"A", "B"}
    where = _where(run)
    assert where.parent == _own_cache / "gpumon" / "summaries" and where.name.endswith(".json")
    assert json.loads(where.read_text()) == made.to_json()
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700


def test_the_cached_summary_is_read_back_not_computed_again(tmp_path):
    run = _finished(tmp_path)
    summary_of(run)
    _where(run).write_text(json.dumps(PLANTED.to_json()))
    assert summary_of(run) == PLANTED


def test_a_cached_summary_over_a_mebibyte_or_damaged_is_replaced(tmp_path):
    run = _finished(tmp_path)
    made = summary_of(run)
    where = _where(run)
    for held in (
        json.dumps(PLANTED.to_json()) + " " * (3 << 19),  # valid JSON, 1.5 MiB: over the read limit
        "{not json",
    ):
        where.write_text(held)
        assert summary_of(run) == made
        assert json.loads(where.read_text()) == made.to_json()


def test_run_jsons_summary_is_taken_as_it_is_unless_still_recording(tmp_path, _own_cache):
    run = _finished(tmp_path)
    run.meta.summary = PLANTED
    assert summary_of(run) == PLANTED
    run.meta.status = (
        RunStatus.RECORDING
    )  # a recording run's summary is computed every time, never cached
    assert summary_of(run) == steps_summary(run) != PLANTED
    assert not (_own_cache / "gpumon" / "summaries").exists()


def test_a_run_whose_run_json_is_gone_is_summarised_without_a_cache(tmp_path, _own_cache):
    run = _finished(tmp_path)
    (run.path / "run.json").unlink()
    assert summary_of(run) == steps_summary(run)
    assert not (_own_cache / "gpumon" / "summaries").exists()


def _run_of(tmp_path: Path, rows: list[tuple[str, float, int, bool]]) -> Path:
    """A run directory whose steps.csv holds ``rows`` (job, t, step, warm-up) in this order, through the Recorder."""
    path = create_run_dir(tmp_path / "runs", "chunks", time.localtime())
    rec = Recorder(
        path,
        RunMeta.from_json({"schema": 1, "label": "chunks", "status": "recording", "workloads": []}),
    )
    for slot, t, n, warmup in rows:
        rec.handle(StepEvent(slot, 100, n, t, 0.01, samples=8.0, warmup=warmup))
    rec.close(30.0)
    return path


# Row groups of 4: A's first counted row is the last of the second group, B's the first of the third, earlier in
# time than A's; A has two steps at its first time and two at its last, either side of a group's edge.
ROWS = [
    ("A", 1.0, 0, True),
    ("B", 1.0, 0, True),
    ("A", 2.0, 1, True),
    ("B", 2.0, 1, True),
    ("A", 3.0, 2, True),
    ("B", 3.0, 2, True),
    ("B", 3.5, 3, True),
    ("A", 10.0, 3, False),  # row 7: A's first counted
    ("B", 5.0, 4, False),  # row 8: B's first counted, before A's in time
    ("A", 11.0, 4, False),
    ("A", 12.0, 5, False),
    ("B", 6.0, 5, False),
    ("A", 12.0, 6, False),  # the next group, A's last time again: its last step is this one
    ("B", 7.0, 6, False),
    ("A", 10.0, 8, False),  # A's first time again: its first step stays step 3
    ("B", 8.0, 7, False),
]


def test_big_runs_are_read_a_row_group_at_a_time_as_row_by_row(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "COLUMNS_BYTES", 0)  # every run is big
    monkeypatch.setattr(trace, "CHUNK_ROWS", 4)
    path = _run_of(tmp_path, ROWS)
    (path / STEPS_COLUMNAR).unlink()  # the copy is made in the user's cache, for a finished run
    run = load_run(path)
    chunks = list(trace._rate_chunks(run, True))
    assert [len(t) for _, _, t, _, _ in chunks] == [4, 4, 4, 4]
    expected = {"A": ([10.0, 12.0], [3.0, 6.0]), "B": ([5.0, 8.0], [4.0, 7.0])}
    ends = exclusive_ends(load_run(path))
    assert ends == trace._exclusive_ends_by_row(run) == expected
    assert list(ends) == ["A", "B"]  # by each job's first counted row in steps.csv


def test_steps_already_read_are_not_read_again_from_the_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "CHUNK_ROWS", 4)
    path = _run_of(tmp_path, ROWS)
    whole = load_run(path)
    whole.steps()  # the frame, held by the Run
    (chunk,) = trace._rate_chunks(whole, True)
    assert len(chunk[2]) == len(ROWS)
    (path / STEPS_COLUMNAR).unlink()
    parsed = load_run(path)
    parsed.step_columns(
        RATE_COLUMNS, whole=False
    )  # the columns parsed from steps.csv, held by the Run
    (chunk,) = trace._rate_chunks(parsed, True)
    assert len(chunk[2]) == len(ROWS)


def _exported(run: trace.Run, out: Path, fmt: str) -> dict[str, pd.DataFrame]:
    written = export(run, out, fmt)
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    return {p.stem: read(p) for p in written if p.suffix == f".{fmt}"}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_streams_the_steps_a_block_at_a_time_as_one_whole_table(tmp_path, monkeypatch, fmt):
    monkeypatch.setattr(trace, "EXPORT_CHUNK_ROWS", 5)
    blocks: list[tuple[str, int]] = []
    real = trace.export_columns

    def counted(meta, table, frame):
        blocks.append((table, len(frame)))
        return real(meta, table, frame)

    monkeypatch.setattr(trace, "export_columns", counted)
    path = _run_of(tmp_path, ROWS)
    chunked = _exported(load_run(path), tmp_path / "chunked", fmt)
    assert [n for table, n in blocks if table == "steps"] == [5, 5, 5, 1]
    assert all(n == 0 for table, n in blocks if table != "steps")  # no other table holds rows here
    (path / STEPS_COLUMNAR).unlink()
    monkeypatch.setattr(trace.Run, "columnar_file", lambda self, make=True: None)  # no pyarrow copy
    whole = _exported(load_run(path), tmp_path / "whole", fmt)
    assert sorted(chunked) == sorted(whole) and "steps" in chunked
    for table, frame in whole.items():
        pd.testing.assert_frame_equal(chunked[table], frame, check_dtype=False)
    assert len(chunked["steps"]) == len(ROWS) and list(chunked["steps"].index) == list(
        range(len(ROWS))
    )
    if fmt == "parquet":
        assert (
            "__index_level_0__" not in pq.read_schema(tmp_path / "chunked" / "steps.parquet").names
        )


def test_a_blank_warm_up_cell_in_a_big_run_is_read_row_by_row(tmp_path, monkeypatch):
    """A row group whose warm-up column has a gap (a hand-edited steps.csv) is not read as numbers: the csv module's
    reading counts that row (its flag is not "1"), as the columns must not silently drop it."""
    monkeypatch.setattr(trace, "COLUMNS_BYTES", 0)  # every run is big
    path = _run_of(tmp_path, ROWS)
    (path / STEPS_COLUMNAR).unlink()
    lines = (path / "steps.csv").read_text().splitlines(keepends=True)
    at = lines[0].rstrip("\n").split(",").index("warmup")
    cells = lines[1].rstrip("\n").split(",")
    assert cells[0] == "A" and cells[at] == "1"
    cells[at] = ""
    lines[1] = ",".join(cells) + "\n"
    (path / "steps.csv").write_text("".join(lines))
    run = load_run(path)
    assert (
        exclusive_ends(run)["A"]
        == ([1.0, 12.0], [0.0, 6.0])
        == trace._exclusive_ends_by_row(run)["A"]
    )


def test_a_run_recording_on_another_host_reads_recording_live(tmp_path):
    """load_live asks about the runner run.json names: one on another host cannot be checked here (not interrupted)."""
    path = _run_of(tmp_path, ROWS[:4])
    meta = json.loads((path / "run.json").read_text())
    meta["status"] = "recording"
    meta["runner"] = {
        "pid": 1,
        "started": 0.0,
        "uid": 0,
        "user": "x",
        "host": "another-host.invalid",
    }
    (path / "run.json").write_text(json.dumps(meta))
    run, status = trace.load_live(path)
    assert status == "recording" and run.meta.runner is not None and not run.meta.runner.here
