"""Every recorded column makes the round trip: one record per table, a distinct non-default value in every
field, written by the Recorder and read back by the trace reader (pandas, the csv module, the steps cache,
pyarrow's light columns) and by replay's record parser, compared column by column.

The tables and their columns come from the recorder's own schema (``recorder.TABLES`` and the others table),
so a column added to any table without a value below fails ``test_every_recorded_column_has_a_value``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
from pathlib import Path

import pandas as pd
import pytest

from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import (
    DeviceSample,
    GpuOthers,
    LogLine,
    Notice,
    OtherGpuProcess,
    SourceStatus,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
    field_of,
)
from gpumon.core.sources.replay import others_by_tick, record
from gpumon.core.store import recorder
from gpumon.core.store.recorder import Recorder, create_run_dir
from gpumon.core.store.runmeta import RunMeta, WorkloadRecord
from gpumon.core.store.runner import LOCK_FILE
from gpumon.core.store.columnar import STEPS_COLUMNAR
from gpumon.core.store.trace import load_run
from tests.helpers import wait_for

# What the recorder writes: table -> (the record it writes a row of, its columns in file order).
SCHEMA: dict[str, tuple[type, tuple[str, ...]]] = {
    **{table: (cls, columns) for cls, table, columns in recorder.TABLES},
    recorder.OTHERS_TABLE: (OtherGpuProcess, recorder.OTHER_COLUMNS),
}

# One record per table, by column (a record's field: ``field_of(column)``): every field set, no two numbers of a table alike (a swapped column shows), none a default.
VALUES: dict[str, dict[str, object]] = {
    "steps": {
        "process": "B",
        "pid": 4242,
        "step": 17,
        "t": 3.25,
        "iter_s": 0.0625,
        "samples": 48.5,
        "warmup": True,
        "copy_bytes": 1_048_577,
        "copy_s": 0.003125,
    },
    "device": {
        "t": 1.5,
        "gpu_util": 37.0,
        "mem_util": 21.0,
        "mem_used_mib": 1234.5,
        "mem_total_mib": 81559.0,
        "pcie_rx_bps": 2.5e9,
        "pcie_tx_bps": 1.25e8,
        "power_w": 312.25,
        "temp_c": 61.0,
        "sm_clock_mhz": 1980.0,
        "sm_active_pct": 44.5,
        "sm_occupancy_pct": 12.75,
        "dram_bw_pct": 8.5,
        "tensor_active_pct": 3.375,
    },
    "processes": {
        "t": 2.0,
        "process": "A",
        "pid": 4243,
        "cpu_pct": 97.5,
        "rss_mib": 2048.25,
        "threads": 34,
        "gpu_mem_mib": 3072.5,
        "gpu_sm_util": 55.0,
    },
    "host": {
        "t": 2.5,
        "cpu_pct": 63.5,
        "mem_used_mib": 9000.5,
        "mem_total_mib": 24000.0,
        "per_core": (12.5, 97.0),
    },
    "gpu_others": {
        "t": 3.0,
        "pid": 777,
        "user": "alice",
        "command": 'python "train, v2.py" --lr 0.1',
        "gpu_mem_mib": 512.5,
        "sm_pct": 9.5,
        "cpu_pct": 88.5,
        "rss_mib": 640.25,
        "elapsed_s": 3600.5,
    },
}


def _record(table: str) -> object:
    cls, _ = SCHEMA[table]
    return cls(**{field_of(column): value for column, value in VALUES[table].items()})


def _in_file(value: object) -> object:
    """A field's value as a reader of the CSV sees it: booleans 0/1, per-core CPU one cell of percentages."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, tuple):
        return " ".join(f"{v:.1f}" for v in value)
    return value


def test_every_recorded_column_has_a_value() -> None:
    assert set(VALUES) == set(SCHEMA), (
        "a table without a round-trip record (or a record for no table)"
    )
    for table, (cls, columns) in SCHEMA.items():
        assert list(VALUES[table]) == list(columns), (
            f"{table}: a column without a round-trip value, or out of order"
        )
        fields = {f.name: f for f in dataclasses.fields(cls)}
        assert {field_of(c) for c in columns} == set(fields), (
            f"{table}: the columns are not the fields of {cls.__name__}"
        )
        for name, value in VALUES[table].items():
            default = fields[field_of(name)].default
            is_default = default is not dataclasses.MISSING and (
                value == default
                or (isinstance(default, float) and math.isnan(default) and value != value)
            )
            assert not is_default, (
                f"{table}.{name}: {value!r} is the field's default, a lost value would not show"
            )
        numbers = [
            v
            for v in VALUES[table].values()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        assert len(numbers) == len(set(numbers)), f"{table}: two columns hold the same number"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = create_run_dir(tmp_path_factory.mktemp("roundtrip"), "roundtrip", time.localtime())
    rec = Recorder(
        path,
        RunMeta.from_json(
            {"schema": 1, "label": "roundtrip", "status": "recording", "workloads": []}
        ),
    )
    for table in SCHEMA:
        item = _record(table)
        rec.handle(GpuOthers(item.t, (item,)) if table == recorder.OTHERS_TABLE else item)
    rec.close(4.0)
    return path


@pytest.mark.parametrize("table", list(VALUES))
def test_pandas_reads_back_every_column(run_dir: Path, table: str) -> None:
    frame = load_run(run_dir).frame(table)
    assert list(frame.columns) == list(SCHEMA[table][1]) and len(frame) == 1, frame
    row = frame.iloc[0]
    for column, value in VALUES[table].items():
        assert row[column] == _in_file(value), (
            f"{table}.{column}: wrote {value!r}, read {row[column]!r}"
        )


@pytest.mark.parametrize("table", list(VALUES))
def test_the_csv_rows_give_back_the_record(run_dir: Path, table: str) -> None:
    """The csv-module reader (runs, follow, replay) and replay's parser: the very record that was written."""
    run = load_run(run_dir)
    rows = list(run.rows(table))
    assert len(rows) == 1, rows
    if table == recorder.OTHERS_TABLE:
        (tick,) = others_by_tick(rows, run_dir)
        (got,) = tick.processes
    else:
        got = record(SCHEMA[table][0], rows[0], run_dir)
    want = _record(table)
    for column in VALUES[table]:
        assert getattr(got, field_of(column)) == getattr(want, field_of(column)), (
            f"{table}.{column}"
        )
    assert got == want


def test_the_steps_cache_and_the_light_columns_read_back_every_step_column(run_dir: Path) -> None:
    load_run(run_dir).steps()  # a complete run's first read writes the cache
    assert (run_dir / STEPS_COLUMNAR).exists()
    cached = load_run(run_dir).steps()
    row = cached.iloc[0]
    for column, value in VALUES["steps"].items():
        assert row[column] == _in_file(value), (
            f"steps.{column} through {STEPS_COLUMNAR}: read {row[column]!r}"
        )
    assert isinstance(cached["process"].dtype, pd.CategoricalDtype)
    (run_dir / STEPS_COLUMNAR).unlink()
    wanted = ("t", "step", "warmup", "copy_bytes", "copy_s")
    codes, names, columns = load_run(run_dir).step_columns(wanted, whole=False)
    assert [names[c] for c in codes] == [VALUES["steps"]["process"]]
    for column, values in zip(wanted, columns):
        assert values.tolist() == [_in_file(VALUES["steps"][column])], (
            f"steps.{column} (light columns)"
        )


# -- run.json: what the capture knows besides the tables ---------------------------------------------------------

META = {
    "label": "round-trip",
    "mode": "shared",
    "clock_t0_ns": 123_456_789,
    "started_at": "2026-11-26T05:00:00.000Z",
    "interval_ms": 250,
    "device": "cuda:1",
    "stagger_s": 7.5,
    "host": {"hostname": "box", "cpus": 16},
    "gpu": {"name": "NVIDIA H100 80GB HBM3", "index": 1},
    "nvml": SourceStatus("nvml", True, ""),
    "versions": {"python": "3.11.7", "gpumon": "0.1.0"},
    "workloads": [WorkloadRecord("A", spec="fcn")],
}


def test_run_json_holds_every_field_of_the_capture(tmp_path: Path) -> None:
    """initial_meta's fields, the workloads' lifecycle (one launched into the running capture), their metadata,
    notices (the first MAX_NOTICES) and logs; the runner's lock and the reserve gone once final."""
    path = create_run_dir(tmp_path, "meta", time.localtime())
    rec = Recorder(path, recorder.initial_meta(**copy.deepcopy(META)))
    items = [
        WorkloadState("A", "running", 1.25, pid=4242),
        WorkloadMeta("A", 4242, {"model": "fcn", "torch": "2.14.1"}),
        WorkloadState("B", "running", 2.5, pid=4343, attached={"attached": True, "owned": False}),
        LogLine("A", 1.5, "époque 1: loss 0.25"),
        *[
            Notice(3.0 + i / 1000 + 0.0004, f"notice {i}", "B" if i % 2 else None)
            for i in range(recorder.MAX_NOTICES + 2)
        ],
        WorkloadState("A", "exited", 9.75, pid=4242, exit_status=3, tail="Traceback: boom"),
        WorkloadState("C", "not started", 10.0, tail="A exited with status 3 at 9.8 s"),
        WorkloadState(
            "D",
            "running",
            10.5,
            pid=4444,
            job={"spec": "gemm", "kind": "builtin", "argv": ["--n", "2"]},
        ),
        WorkloadState("D", "stopped", 11.5, pid=4444, exit_status=-15),
    ]
    for item in items:
        rec.handle(item)
    rec.close(12.5)
    meta = json.loads((path / "run.json").read_text())
    # "failed", not "complete": job A ended on its own with status 3 (docs/trace.md, the run's status)
    expected = {
        "schema": 1,
        "label": "round-trip",
        "mode": "shared",
        "status": "failed",
        "started_at": META["started_at"],
        "t0_monotonic_ns": 123_456_789,
        "duration_s": 12.5,
        "interval_ms": 250,
        "device": "cuda:1",
        "host": {**META["host"], "platform": None, "cpu_affinity": [], "mem_total_mib": None},
        "gpu": GpuInfo.from_json(META["gpu"]).to_json(),
        "nvml": {"available": True, "reason": ""},
        "stagger_s": 7.5,
        "versions": {**META["versions"], "torch": "2.14.1"},
    }
    assert {k: meta[k] for k in expected} == expected
    a, b, c, d = meta["workloads"]
    assert a == {
        "process": "A",
        "spec": "fcn",
        "pid": 4242,
        "start_t": 1.25,
        "stop_t": 9.75,
        "exit_status": 3,
        "state": "exited",
        "tail": "Traceback: boom",
        "meta": {"model": "fcn", "torch": "2.14.1"},
    }
    assert b == {
        "process": "B",
        "pid": 4343,
        "start_t": 2.5,
        "stop_t": None,
        "exit_status": None,
        "state": "running",
        "attached": True,
        "owned": False,
    }
    assert c == {
        "process": "C",
        "state": "not started",
        "reason": "A exited with status 3 at 9.8 s",
    }
    assert d == {
        "process": "D",
        "spec": "gemm",
        "kind": "builtin",
        "argv": ["--n", "2"],
        "pid": 4444,
        "start_t": 10.5,
        "stop_t": 11.5,
        "exit_status": -15,
        "state": "stopped",
        "tail": "",
    }
    notices = meta["notices"]
    assert len(notices) == recorder.MAX_NOTICES  # the first ones
    assert notices[0] == {"t": 3.0, "process": None, "text": "notice 0"}
    assert notices[1] == {
        "t": 3.001,
        "process": "B",
        "text": "notice 1",
    }  # rounded to the millisecond
    assert notices[-1]["text"] == f"notice {recorder.MAX_NOTICES - 1}"
    assert (path / "logs" / "A.out").read_bytes() == "époque 1: loss 0.25\n".encode()
    assert load_run(path).meta.to_json() == meta  # the reader gives back every field written
    assert not (path / recorder.RESERVE_FILE).exists() and not (path / LOCK_FILE).exists()


def test_unknown_values_are_empty_cells_and_booleans_digits(tmp_path: Path) -> None:
    """What docs/trace.md promises of the CSV text itself: NaN an empty cell, a boolean 0 or 1."""
    path = create_run_dir(tmp_path, "cells", time.localtime())
    rec = Recorder(
        path,
        RunMeta.from_json({"schema": 1, "label": "cells", "status": "recording", "workloads": []}),
    )
    rec.handle(StepEvent("A", 7, 3, 0.5, 0.125, warmup=False))  # samples and copy_s unknown
    rec.handle(StepEvent("A", 7, 4, 0.625, 0.125, warmup=True))
    rec.handle(DeviceSample(0.75))  # nothing known but the time
    rec.close(1.0)
    assert (path / "steps.csv").read_text().splitlines()[1:] == [
        "A,7,3,0.5,0.125,,0,0,",
        "A,7,4,0.625,0.125,,1,0,",
    ]
    assert (path / "device.csv").read_text().splitlines()[1] == "0.75" + "," * 13


def test_run_json_while_recording_and_a_new_job_in_a_slot(tmp_path: Path) -> None:
    """What a viewer reads before the end: initial_meta as written at the start, then each state change soon after
    it (flush_soon); a slot's new job clears the ended one's stop time and status."""
    path = create_run_dir(tmp_path, "live", time.localtime())
    rec = Recorder(path, recorder.initial_meta(**copy.deepcopy(META)))
    first = json.loads((path / "run.json").read_text())
    assert (
        path / LOCK_FILE
    ).is_file()  # held while it records: what proves the runner (core/store/runner.py)
    assert (first["status"], first["mode"], first["duration_s"], first["label"]) == (
        "recording",
        "shared",
        None,
        "round-trip",
    )
    rec.handle(WorkloadState("A", "running", 1.0, pid=1))
    rec.handle(WorkloadState("A", "exited", 2.0, pid=1, exit_status=3, tail="boom"))
    rec.handle(WorkloadState("A", "running", 3.0, pid=2))  # a new job in slot A
    rec.flush_soon()

    def entry() -> dict:
        return json.loads((path / "run.json").read_text())["workloads"][0]

    wait_for(lambda: entry().get("pid") == 2, what="run.json rewritten with A's new job")
    assert entry() == {
        "process": "A",
        "spec": "fcn",
        "pid": 2,
        "start_t": 3.0,
        "stop_t": None,
        "exit_status": None,
        "state": "running",
        "tail": "boom",
    }
    rec.close(4.0)
    assert not (path / LOCK_FILE).exists()
