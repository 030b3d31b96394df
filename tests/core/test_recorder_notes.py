"""The recorder's own notices, its finalise step (the columnar copy and run.json's summary, or the warning when they
fail) and ``initial_meta``'s fields. Written for the mutation run (issue 44: benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import errno
import json
import logging
import math
import time
import types
from pathlib import Path

import pytest

import gpumon.core.store.recorder as recorder_module
import gpumon.core.store.trace as trace_module
from gpumon.core.records.machine import HostInfo
from gpumon.core.records.model import Notice, StepEvent, WorkloadMeta
from gpumon.core.records.model import SourceStatus
from gpumon.core.store.columnar import STEPS_COLUMNAR
from gpumon.core.store.recorder import MAX_NOTICES, Recorder, create_run_dir, initial_meta
from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store.trace import load_run, steps_summary
from tests.helpers import wait_for

BAD_META = WorkloadMeta(
    "A", 100, {"loss": math.nan}
)  # run.json cannot hold NaN: one bad record, a notice


def _meta(notices: int = 0) -> RunMeta:
    meta = RunMeta.from_json(
        {"schema": 1, "label": "notes", "mode": "exclusive", "status": "recording", "workloads": []}
    )
    meta.notices = [Notice(float(i), f"earlier {i}") for i in range(notices)]
    return meta


def _run_dir(tmp_path: Path) -> Path:
    return create_run_dir(tmp_path / "runs", "notes", time.localtime())


def _steps(slot: str, n: int) -> list[StepEvent]:
    return [
        StepEvent(slot, 100, i, 1.0 + i * 0.5, 0.01, samples=8.0, warmup=i < 2) for i in range(n)
    ]


def _notices_on_disk(path: Path) -> list[dict]:
    return json.loads((path / "run.json").read_text()).get("notices", [])


def test_a_record_run_json_cannot_hold_is_a_notice_timed_from_the_start(tmp_path, monkeypatch):
    """The notice's time is the recorder's clock since it started, to the millisecond, and it reaches run.json while
    the capture is still recording (the writer marks run.json to be rewritten)."""
    path = _run_dir(tmp_path)
    now = [500.0]
    monkeypatch.setattr(recorder_module, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    rec = Recorder(path, _meta())
    try:
        now[0] = 501.23456  # the clock the writer reads when it notes the bad record
        rec.handle(BAD_META)
        rec.flush_soon()
        (notice,) = wait_for(
            lambda: _notices_on_disk(path),
            timeout=30,
            what="the notice in run.json while recording",
        )
        assert json.loads((path / "run.json").read_text())["status"] == "recording"
        assert notice["t"] == 1.235 and isinstance(notice["t"], float)
        assert notice["text"].startswith("a WorkloadMeta was not recorded: ")
    finally:
        rec.close(2.0)


def test_the_recorders_notices_stop_at_max_notices(tmp_path):
    path = _run_dir(tmp_path)
    rec = Recorder(path, _meta(notices=MAX_NOTICES))
    rec.handle(BAD_META)
    rec.close(1.0)
    notices = _notices_on_disk(path)
    assert len(notices) == MAX_NOTICES and notices[-1]["text"] == f"earlier {MAX_NOTICES - 1}"


def test_close_writes_the_columnar_copy_and_run_jsons_summary(tmp_path):
    path = _run_dir(tmp_path)
    rec = Recorder(path, _meta())
    for step in _steps("A", 12) + _steps("B", 6):
        rec.handle(step)
    rec.close(7.0)
    assert (path / STEPS_COLUMNAR).is_file()
    assert sorted(p.name for p in path.iterdir() if "run" in p.name.lower()) == ["run.json"]
    summary = json.loads((path / "run.json").read_text())["summary"]
    fresh = steps_summary(load_run(path))  # the same steps read again
    assert fresh.steps == {"A": 12, "B": 6}
    assert summary == fresh.to_json()
    assert load_run(path).meta.summary == fresh


def test_a_failed_columnar_copy_is_a_warning_naming_the_run_and_why(tmp_path, monkeypatch, caplog):
    """The disk refusing the copy (raised where the copy is written) leaves run.json final without a summary, and
    says so in one warning: the run and the error's words."""

    def full(run_dir: Path) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir / STEPS_COLUMNAR))

    monkeypatch.setattr(recorder_module.columnar, "write_run_copy", full)
    path = _run_dir(tmp_path)
    rec = Recorder(path, _meta())
    for step in _steps("A", 5):
        rec.handle(step)
    with caplog.at_level(logging.WARNING, logger="gpumon.core.store.recorder"):
        rec.close(3.0)
    meta = json.loads((path / "run.json").read_text())
    assert meta["status"] == "complete" and meta.get("summary") is None
    assert [r.getMessage() for r in caplog.records] == [
        f"run {path}: no columnar copy or summary written ([Errno 28] No space left on device: "
        f"'{path / STEPS_COLUMNAR}')"
    ]


INITIAL = {
    "label": "first",
    "mode": "shared",
    "clock_t0_ns": 42,
    "started_at": "2026-11-27T23:00:00.000Z",
    "interval_ms": 100,
    "device": "cpu",
    "stagger_s": 0.0,
    "gpu": None,
    "nvml": SourceStatus("nvml", False, "no driver"),
    "versions": {"python": "3.12"},
    "workloads": [],
}


@pytest.mark.parametrize("host", [{"hostname": "box", "cpus": 4}, HostInfo("box", cpus=4)])
def test_initial_meta_takes_the_host_as_a_dict_or_its_record(host):
    meta = initial_meta(**INITIAL, host=host)
    assert meta.host == HostInfo("box", cpus=4)
    assert (
        meta.label_given is True and meta.duration_s is None
    )  # a label the user gave, unless told otherwise


def test_initial_meta_keeps_a_label_the_user_did_not_give():
    meta = initial_meta(**INITIAL, host={"hostname": "box"}, label_given=False)
    assert meta.label_given is False
    assert json.loads(json.dumps(meta.to_json()))["label_given"] is False


def test_a_big_run_without_its_columnar_copy_still_gets_its_summary(tmp_path, monkeypatch):
    """A job named as pandas' missing value: no columnar copy is written (the copy would read it as no job), and the
    summary is read from steps.csv with the run's own meta (finished: a cached copy is tried first, and refused)."""
    monkeypatch.setattr(trace_module, "COLUMNS_BYTES", 0)  # every run is big
    path = _run_dir(tmp_path)
    rec = Recorder(path, _meta())
    for step in _steps("A", 6) + _steps("None", 3):
        rec.handle(step)
    rec.close(4.0)
    assert not (path / STEPS_COLUMNAR).exists()
    summary = json.loads((path / "run.json").read_text())["summary"]
    assert summary["steps"] == {"A": 6, "None": 3} and summary["rates"] == {"A": 2.0}
