"""steps.parquet: the recorder's columnar copy of a finished run's steps; readers never write in a run directory.

A run recorded without a copy (before it, or whose copy was lost) gets one in the user's cache; steps.csv stays
the record, and a kill before the copy is written loses nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gpumon.analysis.compare import compare_paths
from gpumon.core.store import columnar
from gpumon.core.store.columnar import STEPS_COLUMNAR
from gpumon.core.store.trace import export, load_run, steps_summary, summarize
from gpumon.errors import UsageError
from tests.tracegen import Job, fcn_twice, write_run

ROOT = Path(__file__).resolve().parents[2]


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder`` with its size and mtime (what a reader must leave as it is)."""
    return {
        str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in folder.rglob("*")
    }


def test_the_recorder_writes_the_copy_once_and_it_reads_as_the_csv(tmp_path):
    run_dir = write_run(
        tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),), noise=0.1), Job(slot="B", pid=7)]
    )
    assert (run_dir / STEPS_COLUMNAR).is_file()
    stamp = (run_dir / STEPS_COLUMNAR).stat().st_mtime_ns
    from_copy = load_run(run_dir).steps()
    assert (run_dir / STEPS_COLUMNAR).stat().st_mtime_ns == stamp, "read, never rewritten"
    from_csv = pd.read_csv(run_dir / "steps.csv")
    assert len(from_copy) == len(from_csv) > 40
    for column in from_csv.columns:
        if column == "process":
            assert from_copy[column].astype(str).tolist() == from_csv[column].tolist()
        else:
            assert from_copy[column].to_numpy(float) == pytest.approx(
                from_csv[column].to_numpy(float), nan_ok=True
            ), column


def test_the_copy_is_lz4_with_times_and_steps_undictionaried_and_the_filled_columns_required(
    tmp_path,
):
    """How the copy is written (``columnar._encoding``, ``FILLED_COLUMNS``): what makes compare's reads cheap."""
    import pyarrow.parquet as pq

    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),)), Job(slot="B", pid=7)])
    copy = pq.ParquetFile(run_dir / STEPS_COLUMNAR)
    group = copy.metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert all(c.compression.startswith("LZ4") for c in chunks.values())
    assert "BYTE_STREAM_SPLIT" in chunks["t"].encodings
    assert "DELTA_BINARY_PACKED" in chunks["step"].encodings
    assert not {"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & {
        *chunks["t"].encodings,
        *chunks["step"].encodings,
    }
    schema = copy.schema_arrow
    assert [f.name for f in schema if not f.nullable] == list(columnar.FILLED_COLUMNS)


@pytest.mark.parametrize("cell", ["t", "step", "process"])
def test_an_empty_cell_in_a_filled_column_still_gets_a_copy_that_reads_as_the_csv(tmp_path, cell):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),)), Job(slot="B", pid=7)])
    header, first, *rows = (run_dir / "steps.csv").read_text().splitlines(keepends=True)
    cells = first.rstrip("\n").split(",")
    cells[header.strip().split(",").index(cell)] = ""
    (run_dir / "steps.csv").write_text(header + ",".join(cells) + "\n" + "".join(rows))
    (run_dir / STEPS_COLUMNAR).unlink()
    assert columnar.write_run_copy(run_dir)
    from_copy = load_run(run_dir).steps()
    assert columnar.open_copy(run_dir).schema_arrow.field(cell).nullable  # written again, nullable
    from_csv = pd.read_csv(run_dir / "steps.csv")
    assert len(from_copy) == len(from_csv)
    for column in from_csv.columns:
        if column == "process":
            assert from_copy[column].astype(str).tolist()[1:] == from_csv[column].tolist()[1:]
            assert from_copy[column].isna().tolist() == from_csv[column].isna().tolist()
        else:
            assert from_copy[column].to_numpy(float) == pytest.approx(
                from_csv[column].to_numpy(float), nan_ok=True
            ), column


def test_the_recorder_writes_each_jobs_summary_into_run_json_once_final(tmp_path, caplog):
    """What `gpumon runs` lists without reading the steps: each job's rate and step rows, in run.json."""
    with caplog.at_level("WARNING", logger="gpumon.core.store.recorder"):
        run_dir = write_run(
            tmp_path / "r",
            [Job(slot="A", phases=((5.0, 0.1),)), Job(slot="B", phases=((5.0, 0.25),), pid=7)],
        )
    assert not caplog.records  # the copy and the summary were written
    written = json.loads((run_dir / "run.json").read_text())["summary"]
    assert written["steps"] == {"A": 50, "B": 20}
    assert written["rates"] == {"A": pytest.approx(10.0), "B": pytest.approx(4.0)}
    assert written == steps_summary(load_run(run_dir)).to_json()


def test_a_changed_csv_is_read_again(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    rows = len(load_run(run_dir).steps())
    with open(run_dir / "steps.csv", "a") as f:
        f.write("A,1000,999,99.0,0.1,64,0,0,\n")
    assert len(load_run(run_dir).steps()) == rows + 1


def test_a_damaged_copy_is_ignored(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    rows = len(load_run(run_dir).steps())
    (run_dir / STEPS_COLUMNAR).write_bytes(b"PAR1 not really")
    assert len(load_run(run_dir).steps()) == rows


def test_a_run_still_recording_gets_no_copy_anywhere(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))], status="recording")
    (run_dir / STEPS_COLUMNAR).unlink(missing_ok=True)
    load_run(run_dir).steps()
    assert not (run_dir / STEPS_COLUMNAR).exists()
    assert columnar.open_copy(run_dir) is None


def test_a_run_without_a_copy_gets_one_in_the_users_cache_not_in_its_folder(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    (run_dir / STEPS_COLUMNAR).unlink()
    before = _listing(run_dir)
    rows = len(load_run(run_dir).steps())
    st = columnar.csv_identity(run_dir)
    assert st is not None and columnar.cache_path(run_dir, st).is_file()
    assert _listing(run_dir) == before
    assert len(load_run(run_dir).steps()) == rows == len(pd.read_csv(run_dir / "steps.csv"))


def test_readers_never_write_through_a_planted_link(tmp_path):
    """Defect 1 of issue 40: ``steps.parquet.tmp -> victim`` and no steps.parquet in a run directory."""
    a, b, shared = fcn_twice(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for run_dir in (a, b, shared):
        (run_dir / STEPS_COLUMNAR).unlink()
        (run_dir / f"{STEPS_COLUMNAR}.tmp").symlink_to(victim)
        (run_dir / f".{STEPS_COLUMNAR}.{os.getpid()}.0.tmp").symlink_to(victim)
    before = {d: _listing(d) for d in (a, b, shared)}
    comparison, _ = compare_paths([a, b, shared])
    assert comparison.workload("A").slowdown.value > 1
    for d in (a, b, shared):
        load_run(d).step_columns(("t", "step"), whole=False)
        summarize(load_run(d))
    assert victim.read_text() == "precious\n"
    assert {d: _listing(d) for d in (a, b, shared)} == before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a run directory of another uid")
def test_root_reading_another_users_read_only_run_writes_nothing_there(tmp_path):
    a, b, shared = fcn_twice(tmp_path / "theirs")
    for run_dir in (a, b, shared):
        (run_dir / STEPS_COLUMNAR).unlink()
    for path in sorted((tmp_path / "theirs").rglob("*"), reverse=True):
        os.chown(path, 4242, 4242, follow_symlinks=False)
        path.chmod(0o555 if path.is_dir() else 0o444)
    before = {d: _listing(d) for d in (a, b, shared)}
    comparison, _ = compare_paths([a, b, shared])
    assert comparison.workload("B").slowdown.value > 1
    export(load_run(shared), tmp_path / "out", fmt="parquet")
    assert {d: _listing(d) for d in (a, b, shared)} == before


def _gpumon(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "gpumon", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_a_run_without_steps_past_its_warm_up_refuses_the_same_way_every_time(tmp_path):
    """Defect 5 of issue 40: its copy must not poison later reads (``.cat accessor``, ``NullArray``)."""
    empty = write_run(tmp_path / "z", [Job(slot="A", phases=((0.0, 0.1),))])
    other = write_run(tmp_path / "b", [Job(slot="B", phases=((5.0, 0.2),), pid=7)])
    shared = write_run(
        tmp_path / "s",
        [
            Job(slot="A", phases=((6.0, 0.15),), noise=0.1),
            Job(slot="B", phases=((6.0, 0.3),), noise=0.1),
        ],
    )
    (
        empty / STEPS_COLUMNAR
    ).unlink()  # as recorded before the recorder wrote copies: readers make one
    compares = [
        _gpumon("compare", "--exclusive", f"A={empty}", "--shared", str(shared)) for _ in range(3)
    ]
    lines = {(done.returncode, done.stdout, done.stderr) for done in compares}
    assert len(lines) == 1, lines
    code, out, err = lines.pop()
    assert code == 2 and out == "" and err.count("\n") == 1 and "warm-up" in err, err
    predicts = [
        _gpumon("predict", "--exclusive", f"A={empty}", "--exclusive", f"B={other}")
        for _ in range(2)
    ]
    assert len({(d.returncode, d.stderr) for d in predicts}) == 1
    assert predicts[0].returncode == 2 and predicts[0].stderr.count("\n") == 1
    assert "warm-up" in predicts[0].stderr and "Traceback" not in predicts[0].stderr


KILLED_BEFORE_THE_COPY = """
import sys, time
from pathlib import Path
from gpumon.core.store import columnar

def stopped(run_dir):
    print("final", flush=True)
    time.sleep(3600)

columnar.write_run_copy = stopped
from tests.tracegen import Job, write_run
write_run(Path(sys.argv[1]), [Job(slot="A", phases=((30.0, 0.01),)), Job(slot="B", phases=((30.0, 0.02),))])
"""


def test_a_kill_before_the_copy_loses_no_step(tmp_path):
    run_dir = tmp_path / "r"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_BEFORE_THE_COPY, str(run_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "final\n"
        child.kill()
    finally:
        child.wait()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and "summary" not in meta
    assert not (run_dir / STEPS_COLUMNAR).exists()
    written = pd.read_csv(run_dir / "steps.csv")["process"].value_counts().to_dict()
    assert written["A"] > 2900 and written["B"] > 1400, (
        "every step the recorder was handed is there"
    )
    run = load_run(run_dir)
    assert run.steps()["process"].astype(str).value_counts().to_dict() == written
    summary = summarize(run)
    assert summary.steps == written
    assert summary.rates["A"] == pytest.approx(100.0) and summary.rates["B"] == pytest.approx(50.0)
    assert not (run_dir / STEPS_COLUMNAR).exists(), "a reader made it in its own cache"


def test_the_copy_is_written_through_the_safe_writer(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    (run_dir / STEPS_COLUMNAR).unlink()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (run_dir / STEPS_COLUMNAR).symlink_to(victim)
    assert not columnar.write_run_copy(run_dir)
    assert victim.read_text() == "precious\n"


def test_export_of_a_foreign_run_is_refused_into_an_unsafe_folder(tmp_path):
    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))])
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    with pytest.raises(UsageError):
        export(load_run(run_dir), out, fmt="csv")


def test_no_reader_leaves_a_file_open(tmp_path):
    """Every file a copy is read or made from is closed: a valid copy once nothing reads it, a damaged one and the
    CSV a cached copy streams from at once (CI saw ResourceWarnings from both)."""
    import gc
    import warnings

    from gpumon.core.store import stepchunks

    good = write_run(tmp_path / "good", [Job(slot="A", phases=((5.0, 0.1),))])
    damaged = write_run(tmp_path / "damaged", [Job(slot="A", phases=((5.0, 0.1),))])
    (damaged / STEPS_COLUMNAR).write_bytes(b"PAR1 not really")
    bare = write_run(tmp_path / "bare", [Job(slot="A", phases=((5.0, 0.1),))])
    (bare / STEPS_COLUMNAR).unlink()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        assert columnar.open_copy(good) is not None
        assert columnar.open_copy(damaged) is None
        assert columnar.ensure_cached(bare)
        run = load_run(good)
        assert sum(len(c.codes) for c in stepchunks.scan(run, stepchunks.COUNT_COLUMNS)) == 50
        del run
        gc.collect()
    assert [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)] == []
