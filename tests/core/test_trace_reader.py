"""The run directory reader at its edges (gpumon.core.store.trace): what run.json may hold and the one-line error for
what it may not, the tables' readers, a recording run whose runner is gone, --baseline's rate. Written for the
mutation run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumon.core.store.runmeta import meta_problem
from gpumon.core.store.trace import (
    STEPS_CACHE, TraceError, baseline_rate, complete_text, export, list_runs, load_live, load_run, summarize,
)
from gpumon.errors import EnvironmentFailure, UsageError
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


# --- Hand-written run directories: run.json and each table's text as written here, and what they must read back as.

STEPS_HEADER = "process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s\n"
STEP_NAMES = ["process", "pid", "step", "t", "iter_s", "samples", "warmup", "copy_bytes", "copy_s"]
DEVICE_NAMES = ["t", "gpu_util", "mem_util", "mem_used_mib", "mem_total_mib", "pcie_rx_bps", "pcie_tx_bps", "power_w",
                "temp_c", "sm_clock_mhz", "sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_active_pct"]
PROCESSES_HEADER = "t,process,pid,cpu_pct,rss_mib,threads,gpu_mem_mib,gpu_sm_util\n"
HOST_HEADER = "t,cpu_pct,mem_used_mib,mem_total_mib,per_core\n"
OTHERS_HEADER = "t,pid,user,command,gpu_mem_mib,sm_pct,cpu_pct,rss_mib,elapsed_s\n"
# device.csv and host.csv as runs recorded before the GPM columns and per_core were added wrote them
OLD_DEVICE_HEADER = "t,gpu_util,mem_util,mem_used_mib,mem_total_mib,pcie_rx_bps,pcie_tx_bps,power_w,temp_c,sm_clock_mhz\n"
OLD_HOST_HEADER = "t,cpu_pct,mem_used_mib,mem_total_mib\n"
HAND_META = {"schema": 1, "label": "hand", "mode": "shared", "status": "complete", "duration_s": 4.0,
             "workloads": [{"process": "A", "spec": "fcn", "pid": 11}, {"process": "B", "spec": "gemm", "pid": 12}]}


def _hand(root: Path, meta: dict | None = None, **tables: str | bytes) -> Path:
    """A run directory written by hand: run.json, and each named table's text exactly as given."""
    root.mkdir(parents=True)
    (root / "run.json").write_text(json.dumps(meta or HAND_META))
    for table, text in tables.items():
        (root / f"{table}.csv").write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return root


def test_tables_of_runs_recorded_before_columns_were_added(tmp_path: Path) -> None:
    run = load_run(_hand(tmp_path / "old",
                         device=OLD_DEVICE_HEADER + "0.5,40,10,1000,80000,1000000000,200000000,300,60,1980\n"
                                                    "1.5,41,11,1001,80000,1500000000,300000000,301,61,1985\n2.5,4",
                         host=OLD_HOST_HEADER + "0.5,50.5,1000,24000\n1.5,51.5,1001,24000\n"))
    widened = (OLD_DEVICE_HEADER[:-1] + ",sm_active_pct,sm_occupancy_pct,dram_bw_pct,tensor_active_pct\n"
               "0.5,40,10,1000,80000,1000000000,200000000,300,60,1980,,,,\n"
               "1.5,41,11,1001,80000,1500000000,300000000,301,61,1985,,,,\n")
    assert run.table_text("device") == widened
    assert run.table_bytes("device") == widened.encode()
    device = run.device()
    assert list(device.columns) == DEVICE_NAMES
    assert device["t"].tolist() == [0.5, 1.5] and device["gpu_util"].tolist() == [40, 41]
    assert device["pcie_rx_bps"].tolist() == [1e9, 1.5e9] and device["sm_clock_mhz"].tolist() == [1980, 1985]
    assert device[DEVICE_NAMES[-4:]].isna().all().all()
    assert list(run.rows("host")) == [
        {"t": "0.5", "cpu_pct": "50.5", "mem_used_mib": "1000", "mem_total_mib": "24000", "per_core": ""},
        {"t": "1.5", "cpu_pct": "51.5", "mem_used_mib": "1001", "mem_total_mib": "24000", "per_core": ""}]
    host = run.host()
    assert host["cpu_pct"].tolist() == [50.5, 51.5] and host["per_core"].isna().all()
    header_only = load_run(_hand(tmp_path / "idle", device=OLD_DEVICE_HEADER))
    assert header_only.table_text("device") == widened.split("\n")[0] + "\n"
    assert list(header_only.device().columns) == DEVICE_NAMES and header_only.device().empty


def test_a_table_without_a_whole_header_reads_as_one_without_rows(tmp_path: Path) -> None:
    """A kill while the recorder wrote a header leaves no whole line: the table has no rows, in its own layout
    (it read before as a header with an empty first column, which pandas named "Unnamed: 0")."""
    path = _hand(tmp_path / "r", steps="", device="t,gpu_ut", processes=PROCESSES_HEADER, host=HOST_HEADER)
    run = load_run(path)
    assert run.table_text("steps") == STEPS_HEADER
    assert run.table_text("device") == ",".join(DEVICE_NAMES) + "\n"
    steps = run.steps()
    assert list(steps.columns) == STEP_NAMES and steps.empty
    assert list(run.device().columns) == DEVICE_NAMES and run.device().empty
    assert list(run.rows("steps")) == [] and summarize(run).rates == {}
    export(run, tmp_path / "out")
    assert (tmp_path / "out" / "steps.csv").read_text() == STEPS_HEADER


def test_rows_of_the_wrong_width_and_a_repeated_header_are_left_out(tmp_path: Path) -> None:
    run = load_run(_hand(tmp_path / "r", processes=PROCESSES_HEADER + "1.0,A,11,99.5,100.25,3,,\n1.0,B,12\n"
                         + PROCESSES_HEADER + "2.0,B,12,50.0,200.0,4,1024.0,30.0\n2.5,A,11,99.5,100.25,3,,,9\n"))
    assert list(run.rows("processes")) == [
        {"t": "1.0", "process": "A", "pid": "11", "cpu_pct": "99.5", "rss_mib": "100.25", "threads": "3",
         "gpu_mem_mib": "", "gpu_sm_util": ""},
        {"t": "2.0", "process": "B", "pid": "12", "cpu_pct": "50.0", "rss_mib": "200.0", "threads": "4",
         "gpu_mem_mib": "1024.0", "gpu_sm_util": "30.0"}]
    assert run.columns("processes") == {"t": ["1.0", "2.0"], "process": ["A", "B"], "pid": ["11", "12"],
                                        "cpu_pct": ["99.5", "50.0"], "rss_mib": ["100.25", "200.0"],
                                        "threads": ["3", "4"], "gpu_mem_mib": ["", "1024.0"],
                                        "gpu_sm_util": ["", "30.0"]}


def test_a_table_pandas_cannot_parse_is_one_line(tmp_path: Path) -> None:
    path = _hand(tmp_path / "r", steps=STEPS_HEADER + "A,11,1,0.1,0.1,8,0,0,\nA,11,2,0.2,0.1,8,0,0,,7\n")
    with pytest.raises(TraceError) as err:
        load_run(path).steps()
    assert str(err.value) == (f"{path / 'steps.csv'}: corrupt (Error tokenizing data. C error: Expected 9 fields in "
                              "line 3, saw 10)")


def test_text_beyond_ascii_is_read_and_bytes_that_are_not_utf8_refused(tmp_path: Path) -> None:
    path = _hand(tmp_path / "r", gpu_others=OTHERS_HEADER + "1.0,777,josé,python entraîné.py,512.5,9.5,88.5,640.25,60\n",
                 steps=(STEPS_HEADER + "A,11,1,0.1,0.1,8,0,0,\nA,11,2,0.2,0.1,8,0,0,\xff\n").encode("latin-1"))
    run = load_run(path)
    assert run.table_bytes("gpu_others") == (OTHERS_HEADER + "1.0,777,josé,python entraîné.py,512.5,9.5,88.5,640.25,60\n"
                                             ).encode("utf-8")
    others = run.others()
    assert others["user"].tolist() == ["josé"] and others["command"].tolist() == ["python entraîné.py"]
    with pytest.raises(TraceError) as err:
        run.steps()
    assert str(err.value) == f"{path / 'steps.csv'} is not a gpumon trace (not UTF-8 text)"
    with pytest.raises(TraceError) as err:
        run.table_bytes("host")
    assert str(err.value) == f"{path}: missing host.csv"


def _exportable(root: Path) -> Path:
    return _hand(root, steps=STEPS_HEADER + "B,12,0,0.5,0.5,8,1,0,\nA,11,1,1.0,0.25,8,0,4096,0.002\nA,11,2,1.2",
                 device=",".join(DEVICE_NAMES) + "\n", processes=PROCESSES_HEADER + "1.0,A,11,99.5,100.25,3,,\n",
                 host=HOST_HEADER + "1.0,50.5,1000,24000,12.5 97.0\n")


def test_export_writes_each_table_clean_and_refuses_to_overwrite(tmp_path: Path) -> None:
    run = load_run(_exportable(tmp_path / "r"))
    out = tmp_path / "out"
    assert export(run, out) == [out / "steps.csv", out / "device.csv", out / "processes.csv", out / "host.csv"]
    assert (out / "steps.csv").read_text() == STEPS_HEADER + "B,12,0,0.5,0.5,8,1,0,\nA,11,1,1.0,0.25,8,0,4096,0.002\n"
    assert (out / "host.csv").read_text() == HOST_HEADER + "1.0,50.5,1000,24000,12.5 97.0\n"
    assert sorted(p.name for p in out.iterdir()) == ["device.csv", "host.csv", "processes.csv", "steps.csv"]
    (out / "host.csv").write_text("mine\n")
    with pytest.raises(TraceError) as err:
        export(run, out)
    assert str(err.value) == (f"{out} already has steps.csv, device.csv, processes.csv, host.csv: not overwritten "
                              "(choose another folder, or --force to replace them)")
    assert (out / "host.csv").read_text() == "mine\n"
    export(run, out, overwrite=True)
    assert (out / "host.csv").read_text() == HOST_HEADER + "1.0,50.5,1000,24000,12.5 97.0\n"
    (run.path / "gpu_others.csv").write_text(OTHERS_HEADER + "1.0,777,alice,python x.py,512.5,9.5,88.5,640.25,60\n")
    written = export(run, tmp_path / "pq", "parquet")
    assert [p.name for p in written] == ["steps.parquet", "device.parquet", "processes.parquet", "host.parquet",
                                         "gpu_others.parquet"]
    import pandas as pd

    steps = pd.read_parquet(tmp_path / "pq" / "steps.parquet")
    assert steps["process"].tolist() == ["B", "A"] and steps["process"].dtype != "category"  # names, as in the CSV
    assert steps["copy_bytes"].tolist() == [0, 4096] and steps["copy_s"].tolist()[1] == 0.002
    assert pd.read_parquet(tmp_path / "pq" / "gpu_others.parquet")["user"].tolist() == ["alice"]


def test_an_export_that_fails_leaves_nothing_behind(tmp_path: Path) -> None:
    """A table that does not read, or a file that cannot be put in place: no temporary file is left, and a folder
    the export created is removed (a damaged device.csv used to leave ``.steps.csv.PID.tmp`` in a new folder)."""
    path = _exportable(tmp_path / "r")
    (path / "device.csv").write_text("a,b\n1,2\n")
    out = tmp_path / "new" / "out"
    with pytest.raises(TraceError, match="device.csv: corrupt header"):
        export(load_run(path), out)
    assert not (tmp_path / "new" / "out").exists()
    (path / "device.csv").write_text(",".join(DEVICE_NAMES) + "\n")
    there = tmp_path / "there"
    (there / "processes.csv").mkdir(parents=True)  # a folder where a table goes: it cannot replace it
    (there / "processes.csv" / "keep").write_text("x")
    with pytest.raises(EnvironmentFailure) as err:
        export(load_run(path), there, overwrite=True)
    assert str(err.value) == f"cannot write {there / 'processes.csv'}: Is a directory; nothing was exported"
    assert sorted(p.name for p in there.iterdir()) == ["device.csv", "processes.csv", "steps.csv"]
