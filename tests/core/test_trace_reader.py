"""The run directory reader at its edges (gpumon.core.store.trace): what run.json may hold and the one-line error for
what it may not, the tables' readers, a recording run whose runner is gone, --baseline's rate. Written for the
mutation run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumon.core.store.runmeta import meta_problem
from gpumon.core.store.trace import (
    STEPS_CACHE, TraceError, baseline_rate, complete_text, list_runs, load_live, load_run, summarize,
)
from gpumon.errors import UsageError
from tests.tracegen import COLLEAGUE, Job, write_run


def _run(root: Path, jobs=None, **kw) -> Path:
    return write_run(root, jobs or [Job("A", "fcn:preset=tiny", ((2.0, 0.1),))], **kw)


def _edit(path: Path, **changes) -> Path:
    meta = json.loads((path / "run.json").read_text())
    meta.update(changes)
    (path / "run.json").write_text(json.dumps(meta))
    return path


def test_run_json_fields_as_the_readers_take_them(tmp_path: Path) -> None:
    gpu = {"name": "NVIDIA H100 80GB HBM3", "driver": "580.159.04"}
    run = load_run(_run(tmp_path / "r", gpu=gpu))
    assert run.gpu == gpu and run.specs == {"A": "fcn:preset=tiny"} and run.label == "synthetic"
    assert run.nvml_status.available is True and run.nvml_status.reason == ""
    bare = load_run(_edit(_run(tmp_path / "b"), gpu=None, nvml=None))
    assert bare.gpu is None and bare.nvml_status.available is False and bare.nvml_status.reason == ""
    blind = load_run(_edit(_run(tmp_path / "n"), nvml={"available": False, "reason": "no driver"}))
    assert (blind.nvml_status.available, blind.nvml_status.reason) == (False, "no driver")
    unnamed = _edit(_run(tmp_path / "u"), workloads=[{"process": "A"}])
    assert load_run(unnamed).specs == {"A": "?"}


def test_each_table_read_as_a_frame(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path / "r", gpu_util=40.0, others=(COLLEAGUE,)))
    assert run.device()["gpu_util"].eq(40.0).all() and len(run.device()) == 21
    assert set(run.processes()["process"]) == {"A"} and len(run.host()) == 21
    assert set(run.others()["pid"]) == {COLLEAGUE.pid}
    (run.path / "gpu_others.csv").unlink()  # a run recorded before gpu_others.csv
    empty = load_run(run.path).others()
    assert len(empty) == 0 and list(empty.columns) == ["t", "pid", "user", "command", "gpu_mem_mib", "sm_pct",
                                                       "cpu_pct", "rss_mib", "elapsed_s"]


def test_complete_text_drops_a_torn_line_and_refuses_what_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\n1,2\n3,")
    assert complete_text(path) == "a,b\n1,2\n"
    path.write_bytes(b"no newline yet")
    assert complete_text(path) == ""
    path.write_bytes(b"a\n\xff\n")
    with pytest.raises(TraceError) as err:
        complete_text(path)
    assert str(err.value) == f"{path} is not a gpumon trace (not UTF-8 text)"
    with pytest.raises(TraceError) as err:
        complete_text(tmp_path / "gone.csv")
    assert str(err.value) == f"cannot read {tmp_path / 'gone.csv'}: No such file or directory"


@pytest.mark.parametrize(("change", "message"), [
    ({"label": 3}, "label is 3"),
    ({"duration_s": "abc"}, 'duration_s is "abc"'),
    ({"duration_s": True}, "duration_s is true"),
    ({"interval_ms": float("inf")}, "interval_ms is not finite"),
    ({"gpu": []}, "gpu is []"),
    ({"workloads": [{"process": "A"}, {"process": "A"}]}, "two workloads with the same process"),
    ({"workloads": ["A"]}, "workloads[0] is not an object"),
    ({"workloads": [{"process": "A", "pid": "12"}]}, 'workloads[0].pid is "12"'),
    ({"workloads": [{"process": "A", "start_t": float("nan")}]}, "workloads[0].start_t is not finite"),
])
def test_what_run_json_may_not_hold(change: dict, message: str) -> None:
    meta = {"schema": 1, "label": "x", "workloads": [{"process": "A"}], "duration_s": 1.5, **change}
    assert meta_problem(meta) == message


def test_what_run_json_may_hold() -> None:
    meta = {"schema": 1, "label": "x", "duration_s": None, "interval_ms": 100, "stagger_s": 0.5, "gpu": None,
            "workloads": [{"process": "A", "pid": None, "start_t": 0, "stop_t": 1.5, "exit_status": 0},
                          {"process": "B", "tail": None, "argv": []}]}
    assert meta_problem(meta) is None


def test_load_run_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    path = _run(tmp_path / "r")
    for content, message in (("[1, 2]", "not a gpumon run of schema 1"),
                             (json.dumps({"schema": 1, "workloads": {}}), "corrupt (no workloads list)"),
                             (json.dumps({"schema": 1, "workloads": [], "label": 5}), "corrupt (label is 5)")):
        (path / "run.json").write_text(content)
        with pytest.raises(TraceError) as err:
            load_run(path)
        assert str(err.value) == f"{path / 'run.json'}: {message}"
    (path / "run.json").write_bytes(b"\xff\xfe")
    with pytest.raises(TraceError, match="corrupt \\(not valid JSON\\)"):
        load_run(path)
    (path / "run.json").unlink()
    (path / "run.json").mkdir()  # unreadable as a file
    with pytest.raises(TraceError) as err:
        load_run(path)
    assert str(err.value).startswith(f"cannot read {path / 'run.json'}: ")


def test_a_missing_table_is_named(tmp_path: Path) -> None:
    path = _run(tmp_path / "r")
    (path / "device.csv").unlink()
    with pytest.raises(TraceError) as err:
        load_run(path).device()
    assert str(err.value) == f"{path}: missing device.csv"


def test_a_recording_run_whose_runner_is_gone_reads_interrupted(tmp_path: Path) -> None:
    path = _run(tmp_path / "r", status="recording")
    run, status = load_live(path)
    assert status == "interrupted" and run.meta.status == "recording"
    done, status = load_live(_run(tmp_path / "c"))
    assert status == "complete"


def test_list_runs_oldest_first_and_only_runs(tmp_path: Path) -> None:
    first = _run(tmp_path / "runs" / "20261126-050000-a")
    second = _run(tmp_path / "runs" / "20261126-060000-b")
    (tmp_path / "runs" / "notes").mkdir()
    (tmp_path / "runs" / "stray.json").write_text("{}")
    assert [r.path for r in list_runs(tmp_path / "runs")] == [first, second]
    with pytest.raises(TraceError) as err:
        list_runs(tmp_path / "nowhere")
    assert str(err.value) == f"{tmp_path / 'nowhere'}: no such runs directory"


def test_the_baseline_rate_of_a_slot_or_of_the_only_job(tmp_path: Path) -> None:
    one = _run(tmp_path / "one", [Job("A", "fcn:preset=tiny", ((3.0, 0.1),))])
    assert baseline_rate("A", one) == pytest.approx(10.0)
    assert baseline_rate("B", one) == pytest.approx(10.0)  # its only job, whatever slot it ran in
    two = _run(tmp_path / "two", [Job("A", "fcn", ((3.0, 0.1),)), Job("B", "gemm", ((3.0, 0.25),))])
    assert baseline_rate("B", two) == pytest.approx(4.0)
    none = _run(tmp_path / "none", [Job("A", "fcn", ((3.0, 0.1),)), Job("B", "gemm", ((3.0, 0.25),))])
    (none / "steps.csv").write_text("process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s\n")
    (none / STEPS_CACHE).unlink(missing_ok=True)
    with pytest.raises(UsageError) as err:
        baseline_rate("A", none)
    assert str(err.value) == f"baseline run {none.name} has no post-warm-up rate for A"


def test_what_gpumon_runs_shows_of_a_run(tmp_path: Path) -> None:
    path = _run(tmp_path / "20261126-050000-pair", [Job("A", "fcn", ((3.0, 0.1),)), Job("B", "gemm", ((3.0, 0.25),))],
                label="pair")
    summary = summarize(load_run(path))
    assert (summary.name, summary.label, summary.mode, summary.share, summary.status) == (
        "20261126-050000-pair", "pair", "shared", "timeslice", "complete")
    assert summary.workloads == "A=fcn + B=gemm" and summary.duration_s == 3.0
    assert summary.rates == {"A": pytest.approx(10.0), "B": pytest.approx(4.0)} and summary.runner is None
    recording = summarize(load_run(_edit(_run(tmp_path / "r"), status="recording", duration_s=None,
                                         workloads=[{"process": "A"}])))
    assert recording.status == "interrupted" and recording.workloads == "A=?"
    assert recording.duration_s != recording.duration_s  # NaN: not known yet
