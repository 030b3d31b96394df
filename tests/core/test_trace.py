"""Run directory reading: torn last lines, corrupt metadata, export that pandas reads as-is."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gpumon.core.records.model import DEVICE_COLUMNS, HOST_COLUMNS, PROCESS_COLUMNS, STEP_COLUMNS
from gpumon.core.store.trace import TraceError, export, list_runs, load_run, summarize


def make_run(root: Path, steps_tail: str = "") -> Path:
    run = root / "20260101-000000-x"
    (run / "logs").mkdir(parents=True)
    meta = {
        "schema": 1,
        "label": "x",
        "mode": "exclusive",
        "status": "complete",
        "duration_s": 2.0,
        "workloads": [{"process": "A", "spec": "fcn", "pid": 1}],
    }
    (run / "run.json").write_text(json.dumps(meta))
    lines = [",".join(STEP_COLUMNS)]
    for i in range(10):
        lines.append(f"A,1,{i},{0.1 * (i + 1):.1f},0.1,8.0,{int(i < 2)},100,0.001")
    (run / "steps.csv").write_text("\n".join(lines) + "\n" + steps_tail)
    (run / "device.csv").write_text(",".join(DEVICE_COLUMNS) + "\n")
    (run / "processes.csv").write_text(",".join(PROCESS_COLUMNS) + "\n0.1,A,1,99.0,100.0,3,,\n")
    (run / "host.csv").write_text(",".join(HOST_COLUMNS) + "\n0.1,50.0,1000.0,24000.0\n")
    return run


def test_torn_last_line_is_dropped(tmp_path):
    run = load_run(make_run(tmp_path, steps_tail="A,1,10,1.1,0.1,8."))
    steps = run.steps()
    assert len(steps) == 10
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert steps["step"].is_monotonic_increasing


def test_summary_rate_excludes_warmup(tmp_path):
    summary = summarize(load_run(make_run(tmp_path)))
    assert summary.rates["A"] == pytest.approx(10.0)
    assert summary.mode == "exclusive"


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda r: (r / "run.json").write_text("{not json"), "not valid JSON"),
        (lambda r: (r / "run.json").unlink(), "no run.json"),
        (lambda r: (r / "run.json").write_text(json.dumps({"schema": 99})), "schema"),
        (lambda r: (r / "steps.csv").write_text("a,b,c\n1,2,3\n"), "corrupt header"),
        (lambda r: (r / "steps.csv").write_bytes(b"\xff\xfe\x00garbage\n"), "not UTF-8"),
    ],
)
def test_corrupt_runs_raise_one_line_errors(tmp_path, damage, message):
    path = make_run(tmp_path)
    damage(path)
    with pytest.raises(TraceError, match=message):
        load_run(path).steps()


def test_missing_directory(tmp_path):
    with pytest.raises(TraceError, match="no such run directory"):
        load_run(tmp_path / "nope")


def test_export_csv_and_parquet_round_trip(tmp_path):
    run = load_run(make_run(tmp_path, steps_tail="A,1,10,1"))
    written = export(run, tmp_path / "csv", "csv")
    assert sorted(p.name for p in written) == [
        "device.csv",
        "host.csv",
        "processes.csv",
        "run.json",
        "steps.csv",
    ]
    steps = pd.read_csv(tmp_path / "csv" / "steps.csv")
    assert len(steps) == 10 and steps["copy_bytes"].sum() == 1000
    assert pd.read_csv(tmp_path / "csv" / "processes.csv")["gpu_mem_mib"].isna().all()
    export(run, tmp_path / "pq", "parquet")
    assert pd.read_parquet(tmp_path / "pq" / "steps.parquet").equals(steps)


def test_list_runs_skips_unreadable(tmp_path):
    make_run(tmp_path)
    bad = tmp_path / "20260101-000001-bad"
    bad.mkdir()
    (bad / "run.json").write_text("{")
    assert [r.label for r in list_runs(tmp_path)] == ["x"]
