"""``gpumon runs`` reads only what it lists: run.json's summary (or the user's cache), newest first, --limit/--all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpumon.core.store import columnar, trace
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
        columnar.cache_folder("listings")
    )  # the row is made again, from run.json and the cache
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
