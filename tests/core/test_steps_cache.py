"""steps.parquet: the first reader of a finished run caches its steps; steps.csv stays the record."""

from __future__ import annotations

import json

import pandas as pd

from gpumon.core.store.trace import STEPS_CACHE, load_run
from tests.tracegen import Job, write_run


def test_the_cache_is_written_once_and_reads_back_the_same(tmp_path):
    run_dir = write_run(
        tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),), noise=0.1), Job(slot="B", pid=7)]
    )
    first = load_run(run_dir).steps()
    assert (run_dir / STEPS_CACHE).is_file()
    stamp = (run_dir / STEPS_CACHE).stat().st_mtime_ns
    second = load_run(run_dir).steps()
    assert (run_dir / STEPS_CACHE).stat().st_mtime_ns == stamp, (
        "a matching cache is read, not rewritten"
    )
    pd.testing.assert_frame_equal(first, second)
    assert list(second.columns) == list(first.columns) and len(second) == len(first) > 40


def test_a_changed_csv_is_read_again(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    rows = len(load_run(run_dir).steps())
    with open(run_dir / "steps.csv", "a") as f:
        f.write("A,1000,999,99.0,0.1,64,0,0,\n")
    assert len(load_run(run_dir).steps()) == rows + 1


def test_a_damaged_cache_is_ignored(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    rows = len(load_run(run_dir).steps())
    (run_dir / STEPS_CACHE).write_bytes(b"PAR1 not really")
    assert len(load_run(run_dir).steps()) == rows


def test_a_run_still_recording_is_not_cached(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    meta = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**meta, "status": "recording"}))
    load_run(run_dir).steps()
    assert not (run_dir / STEPS_CACHE).exists()
