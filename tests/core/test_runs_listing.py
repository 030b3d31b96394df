"""``gpumon runs`` reads only what it lists: run.json's summary (or the user's cache), newest first, --limit/--all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.core.store import columnar, trace
from gpumon.core.store import listing as listing_module
from gpumon.core.store.listing import listing
from gpumon.core.store.trace import DamagedRun, RunSummary
from tests.tracegen import Job, write_run

ROOT = Path(__file__).resolve().parents[2]


def _runs(root: Path, count: int) -> list[Path]:
    return [
        write_run(
            root / f"20261127-0000{i:02d}-r{i}",
            [Job(slot="A", phases=((2.0 + i, 0.1),)), Job(slot="B", phases=((3.0, 0.2),), pid=7)],
            label=f"r{i}",
        )
        for i in range(count)
    ]


def _gpumon(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpumon", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def test_newest_first_limited_and_all(tmp_path):
    _runs(tmp_path, 4)
    rows, left = listing(tmp_path, newest=2)
    assert [r.name for r in rows] == ["20261127-000003-r3", "20261127-000002-r2"] and left == 2
    rows, left = listing(tmp_path)
    assert [r.name for r in rows][::-1] == sorted(r.name for r in rows) and len(rows) == 4
    assert left == 0
    limited = _gpumon("runs", str(tmp_path), "--limit", "3", "--json")
    assert [r["name"] for r in json.loads(limited.stdout)] == [r.name for r in rows[:3]]
    assert limited.stderr.strip() == (
        f"gpumon: 1 older run(s) in {tmp_path} not listed (--all lists them)"
    )
    bad = _gpumon("runs", str(tmp_path), "--limit", "0")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith("at least 1: '0'")
    assert "newest 20" in _gpumon("runs", "--help").stdout


def test_a_finished_run_is_listed_from_run_json_alone(tmp_path):
    (run_dir,) = _runs(tmp_path, 1)
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    assert summary["steps"] == {"A": 20, "B": 15} and summary["rates"]["A"] == pytest.approx(10.0)
    for table in ("steps.csv", "steps.parquet", "device.csv", "processes.csv", "host.csv"):
        (run_dir / table).unlink()
    (row,), _ = listing(tmp_path)
    assert isinstance(row, RunSummary) and row.status == "complete"
    assert row.steps == {"A": 20, "B": 15} and row.rates["B"] == pytest.approx(5.0)


def test_an_older_run_gets_its_summary_once_in_the_users_cache(tmp_path, monkeypatch):
    (run_dir,) = _runs(tmp_path, 1)
    meta = json.loads((run_dir / "run.json").read_text())
    del meta["summary"]
    (run_dir / "run.json").write_text(json.dumps(meta))
    (run_dir / "steps.parquet").unlink()
    before = _files(run_dir)
    (first,), _ = listing(tmp_path)
    assert first.steps == {"A": 20, "B": 15} and first.rates["A"] == pytest.approx(10.0)

    def read_again(run):
        raise AssertionError("the steps were read again")

    monkeypatch.setattr(trace, "steps_summary", read_again)
    shutil.rmtree(
        columnar.cache_folder("listings"), ignore_errors=True
    )  # the row is made again (a run.json this fresh is not kept anyway), from run.json and the cache
    (again,), _ = listing(tmp_path)
    assert again == first
    assert _files(run_dir) == before, "nothing written in the run directory"


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_a_changed_run_json_is_read_again_and_a_damaged_one_listed(tmp_path):
    first, second = _runs(tmp_path, 2)
    listing(tmp_path)
    meta = json.loads((first / "run.json").read_text())
    (first / "run.json").write_text(json.dumps({**meta, "label": "again"}))
    (second / "run.json").write_text("{")
    rows, _ = listing(tmp_path)
    assert isinstance(rows[0], DamagedRun) and "corrupt" in rows[0].problem
    assert isinstance(rows[1], RunSummary) and rows[1].label == "again"


def _kept(runs_dir: Path) -> dict:
    """The rows the listing cache of ``runs_dir`` keeps, by run name."""
    where = columnar.user_cache_path(runs_dir, "listings", (), ".json")
    assert where is not None
    return json.loads(where.read_text())["runs"] if where.exists() else {}


def _after_a_clock_tick(path: Path, scratch: Path) -> None:
    """Wait until a file changed now gets a later ctime than ``path`` has (file times advance by clock ticks)."""
    since = path.stat().st_ctime_ns
    while True:
        scratch.write_text("tick")
        if scratch.stat().st_ctime_ns > since:
            return


def test_a_kept_row_is_read_again_when_run_json_changes_even_to_the_same_size_and_mtime(
    tmp_path, monkeypatch
):
    runs = tmp_path / "runs"
    (run_dir,) = _runs(runs, 1)
    monkeypatch.setattr(listing_module, "FRESH_NS", -(10**12))  # every run.json counts as settled
    (first,), _ = listing(runs)
    assert first.label == "r0" and run_dir.name in _kept(runs)
    meta_path = run_dir / "run.json"
    before = meta_path.stat()
    _after_a_clock_tick(meta_path, tmp_path / "scratch")
    text = meta_path.read_text()
    with open(meta_path, "r+") as f:  # in place: same inode, same size
        f.write(text.replace('"label": "r0"', '"label": "x0"'))
    os.utime(meta_path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the mtime set back
    after = meta_path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    (again,), _ = listing(runs)
    assert again.label == "x0", "a stale row was served"


def test_a_run_json_changed_within_the_last_second_is_not_kept(tmp_path, monkeypatch):
    (run_dir,) = _runs(tmp_path, 1)
    listing(tmp_path)
    assert run_dir.name not in _kept(tmp_path), (
        "a run.json this fresh may change again within its tick"
    )
    monkeypatch.setattr(listing_module, "FRESH_NS", -(10**12))
    listing(tmp_path)
    assert run_dir.name in _kept(tmp_path)

    def read_again(path):
        raise AssertionError(f"{path} was read again")

    monkeypatch.setattr(listing_module, "read_meta", read_again)
    (row,), _ = listing(tmp_path)
    assert row.label == "r0" and row.steps == {"A": 20, "B": 15}


@pytest.fixture(scope="module")
def listed_runs(tmp_path_factory):
    runs = tmp_path_factory.mktemp("listed")
    _runs(runs, 2)
    (runs / "20261127-000009-damaged").mkdir()
    (runs / "20261127-000009-damaged" / "run.json").write_text('{"schema": 1, "workloads": 3}')
    return runs, listing(runs)


CACHE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.one_of(
        CACHE_JSON,
        st.fixed_dictionaries({"layout": st.just(listing_module.LAYOUT), "runs": CACHE_JSON}),
        st.fixed_dictionaries(
            {
                "layout": st.just(listing_module.LAYOUT),
                "runs": st.fixed_dictionaries(
                    {
                        "20261127-000001-r1": st.tuples(
                            st.lists(st.integers(), max_size=5), CACHE_JSON
                        )
                    }
                ),
            }
        ),
    )
)
def test_whatever_the_listing_cache_holds_the_rows_are_those_of_the_runs(listed_runs, data):
    runs, expected = listed_runs
    where = columnar.user_cache_path(runs, "listings", (), ".json")
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(json.dumps(data))
    assert listing(runs) == expected


# What `gpumon runs` must not load to list finished runs: the tables' reader and what it imports, psutil (only a
# run still recording asks whose it is), the other commands' modules (the parser is built for `runs` alone) and
# the analysis libraries. A run recorded before summaries, or still recording, loads the reader for that run.
NOT_FOR_A_FINISHED_RUN = (
    "gpumon.core.store.trace",
    "gpumon.core.records.rates",
    "gpumon.commands.compare",
    "gpumon.commands.run",
    "gpumon.frontends.detach",
    "psutil",
    "socket",
    "subprocess",
    "numpy",
    "pandas",
    "pyarrow",
)
LOADED_AFTER_RUNS = (
    "import contextlib, io, json, sys\nfrom gpumon.cli import main\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n    main(['runs', {runs!r}, '--all'])\n"
    "print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))"
)


def _loaded_by_runs(runs: Path, cache: Path) -> list[str]:
    code = LOADED_AFTER_RUNS.format(runs=str(runs), modules=NOT_FOR_A_FINISHED_RUN)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "GPUMON_CACHE_DIR": str(cache)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_listing_finished_runs_loads_neither_the_tables_reader_nor_psutil(tmp_path):
    runs = tmp_path / "runs"
    _runs(runs, 2)
    (runs / "20261127-000009-damaged").mkdir()
    (runs / "20261127-000009-damaged" / "run.json").write_text("{")
    assert _loaded_by_runs(runs, tmp_path / "cache") == []
    # the check can fail: a run still recording needs the reader (its steps)
    write_run(
        runs / "20261127-000010-live", [Job(slot="A", phases=((2.0, 0.1),))], status="recording"
    )
    assert "gpumon.core.store.trace" in _loaded_by_runs(runs, tmp_path / "cache")


def test_a_run_still_recording_or_without_a_summary_is_listed_from_its_steps(tmp_path):
    old, _ = _runs(tmp_path, 2)
    meta = json.loads((old / "run.json").read_text())
    del meta["summary"]
    (old / "run.json").write_text(json.dumps(meta))
    write_run(
        tmp_path / "20261127-000010-live",
        [Job(slot="A", phases=((2.0, 0.1),))],
        status="recording",
    )
    rows, _ = listing(tmp_path)
    live, newer, older = rows
    assert isinstance(live, RunSummary) and live.status == "interrupted"  # no runner holds it
    assert live.steps == {"A": 20}
    assert isinstance(older, RunSummary) and older.steps == {"A": 20, "B": 15}
    assert newer.steps == {"A": 30, "B": 15} and older.rates["A"] == pytest.approx(10.0)
