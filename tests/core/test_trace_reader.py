"""The run directory reader at its edges (gpumon.core.store.trace): what run.json may hold and the one-line error for
what it may not, the tables' readers, a recording run whose runner is gone, --baseline's rate. Written for the
mutation run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store import columnar
from gpumon.core.store.columnar import STEPS_COLUMNAR
from gpumon.core.store.trace import (
    TraceError,
    baseline_rate,
    complete_text,
    export,
    list_runs,
    load_live,
    load_run,
    summarize,
)
from gpumon.errors import EnvironmentFailure, UsageError
from gpumon.safewrite import UnsafeDestination
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
    assert run.gpu is not None and (run.gpu.name, run.gpu.driver) == (gpu["name"], gpu["driver"])
    assert run.specs == {"A": "fcn:preset=tiny"} and run.label == "synthetic"
    assert run.nvml_status.available is True and run.nvml_status.reason == ""
    bare = load_run(_edit(_run(tmp_path / "b"), gpu=None, nvml=None))
    assert (
        bare.gpu is None and bare.nvml_status.available is False and bare.nvml_status.reason == ""
    )
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
    assert len(empty) == 0 and list(empty.columns) == OTHERS_HEADER[:-1].split(",")


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


def meta_problem(meta: dict) -> str | None:
    """What RunMeta.from_json refuses in ``meta``, or None."""
    try:
        RunMeta.from_json(meta)
    except ValueError as exc:
        return str(exc).removeprefix("corrupt (").removesuffix(")")
    return None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"label": 3}, "label is not text"),
        ({"duration_s": "abc"}, "duration_s is not a number"),
        ({"duration_s": True}, "duration_s is not a number"),
        ({"duration_s": 10**309}, "duration_s is out of range"),
        ({"interval_ms": float("inf")}, "interval_ms is inf, not within [0, 1e+07]"),
        ({"duration_s": -4392}, "duration_s is -4392, not within [0, 8.64e+07]"),
        ({"gpu": []}, "gpu is not an object"),
        (
            {"gpu": {"pcie_method": "magic"}},
            "gpu.pcie_method is 'magic', not one of gpm, counters, throughput",
        ),
        (
            {"status": "done"},
            "status is 'done', not one of recording, complete, failed, truncated, running, interrupted",
        ),
        (
            {"workloads": [{"process": "A"}, {"process": "A"}]},
            "two workloads with the same process",
        ),
        ({"workloads": ["A"]}, "workloads[0] is not an object"),
        ({"workloads": [{"process": "A", "pid": "12"}]}, "workloads[0].pid is not an integer"),
        (
            {"workloads": [{"process": "A", "start_t": float("nan")}]},
            "workloads[0].start_t is nan, not within [-8.64e+07, 8.64e+07]",
        ),
        (
            {"workloads": [{"process": "A", "state": "zombie"}]},
            "workloads[0].state is 'zombie', not one of starting, running, exited, stopped, failed, detached, not started",
        ),
    ],
)
def test_what_run_json_may_not_hold(change: dict, message: str) -> None:
    meta = {"schema": 1, "label": "x", "workloads": [{"process": "A"}], "duration_s": 1.5, **change}
    assert meta_problem(meta) == message


def test_what_run_json_may_hold() -> None:
    meta = {
        "schema": 1,
        "label": "x",
        "duration_s": None,
        "interval_ms": 100,
        "stagger_s": 0.5,
        "gpu": None,
        "workloads": [
            {"process": "A", "pid": None, "start_t": 0, "stop_t": 1.5, "exit_status": 0},
            {"process": "B", "tail": None, "argv": []},
        ],
    }
    assert meta_problem(meta) is None


def test_load_run_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    path = _run(tmp_path / "r")
    for content, message in (
        ("[1, 2]", "not a gpumon run of schema 1"),
        (json.dumps({"schema": 1, "workloads": {}}), "corrupt (no workloads list)"),
        (json.dumps({"schema": 1, "workloads": [], "label": 5}), "corrupt (label is not text)"),
        ("[" * 10_000 + "]" * 10_000, "corrupt (nested deeper than 32 levels)"),
        (
            '{"schema": 1, "workloads": [], "duration_s": 1e400}',
            "corrupt (number 1e400 is out of range)",
        ),
        (
            '{"schema": 1, "workloads": [], "duration_s": NaN}',
            "corrupt (NaN is not a number gpumon records)",
        ),
        (" " * (5 << 20), "corrupt (larger than 4194304 bytes)"),
    ):
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
    none = _run(
        tmp_path / "none", [Job("A", "fcn", ((3.0, 0.1),)), Job("B", "gemm", ((3.0, 0.25),))]
    )
    (none / "steps.csv").write_text("process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s\n")
    _uncopy(none)
    with pytest.raises(UsageError) as err:
        baseline_rate("A", none)
    assert str(err.value) == (
        f"baseline run {none.name} has no post-warm-up rate for A: no job in it stepped past its "
        "warm-up (capture it for longer)"
    )


def test_what_gpumon_runs_shows_of_a_run(tmp_path: Path) -> None:
    path = _run(
        tmp_path / "20261126-050000-pair",
        [Job("A", "fcn", ((3.0, 0.1),)), Job("B", "gemm", ((3.0, 0.25),))],
        label="pair",
    )
    summary = summarize(load_run(path))
    assert (summary.name, summary.label, summary.mode, summary.share, summary.status) == (
        "20261126-050000-pair",
        "pair",
        "shared",
        "timeslice",
        "complete",
    )
    assert summary.workloads == "A=fcn + B=gemm" and summary.duration_s == 3.0
    assert (
        summary.rates == {"A": pytest.approx(10.0), "B": pytest.approx(4.0)}
        and summary.runner is None
    )
    recording = summarize(
        load_run(
            _edit(
                _run(tmp_path / "r"),
                status="recording",
                duration_s=None,
                workloads=[{"process": "A"}],
            )
        )
    )
    assert recording.status == "interrupted" and recording.workloads == "A=?"
    assert recording.duration_s != recording.duration_s  # NaN: not known yet


# --- Hand-written run directories: run.json and each table's text as written here, and what they must read back as.

# These pin the documented on-disk format by hand, so they are not model.py's columns imported: a column renamed
# there must fail here.
STEPS_HEADER = "process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s\n"
STEP_NAMES = STEPS_HEADER[:-1].split(",")
PROCESSES_HEADER = "t,process,pid,cpu_pct,rss_mib,threads,gpu_mem_mib,gpu_sm_util\n"
HOST_HEADER = "t,cpu_pct,mem_used_mib,mem_total_mib,per_core\n"
OTHERS_HEADER = "t,pid,user,command,gpu_mem_mib,sm_pct,cpu_pct,rss_mib,elapsed_s\n"
# device.csv and host.csv as runs recorded before the GPM columns and per_core were added wrote them
OLD_DEVICE_HEADER = "t,gpu_util,mem_util,mem_used_mib,mem_total_mib,pcie_rx_bps,pcie_tx_bps,power_w,temp_c,sm_clock_mhz\n"
OLD_HOST_HEADER = "t,cpu_pct,mem_used_mib,mem_total_mib\n"
GPM_HEADER = ",sm_active_pct,sm_occupancy_pct,dram_bw_pct,tensor_active_pct\n"
DEVICE_NAMES = (OLD_DEVICE_HEADER[:-1] + GPM_HEADER[:-1]).split(",")
HAND_META = {
    "schema": 1,
    "label": "hand",
    "mode": "shared",
    "status": "complete",
    "duration_s": 4.0,
    "workloads": [
        {"process": "A", "spec": "fcn", "pid": 11},
        {"process": "B", "spec": "gemm", "pid": 12},
    ],
}


def _hand(root: Path, meta: dict | None = None, **tables: str | bytes) -> Path:
    """A run directory written by hand: run.json, and each named table's text exactly as given."""
    root.mkdir(parents=True)
    (root / "run.json").write_text(json.dumps(meta or HAND_META))
    for table, text in tables.items():
        (root / f"{table}.csv").write_bytes(
            text if isinstance(text, bytes) else text.encode("utf-8")
        )
    return root


def test_tables_of_runs_recorded_before_columns_were_added(tmp_path: Path) -> None:
    run = load_run(
        _hand(
            tmp_path / "old",
            device=OLD_DEVICE_HEADER + "0.5,40,10,1000,80000,1000000000,200000000,300,60,1980\n"
            "1.5,41,11,1001,80000,1500000000,300000000,301,61,1985\n2.5,4",
            host=OLD_HOST_HEADER + "0.5,50.5,1000,24000\n1.5,51.5,1001,24000\n",
        )
    )
    widened = (
        OLD_DEVICE_HEADER[:-1]
        + GPM_HEADER
        + "0.5,40,10,1000,80000,1000000000,200000000,300,60,1980,,,,\n"
        "1.5,41,11,1001,80000,1500000000,300000000,301,61,1985,,,,\n"
    )
    assert run.table_text("device") == widened
    assert run.table_bytes("device") == widened.encode()
    device = run.device()
    assert list(device.columns) == DEVICE_NAMES
    assert device["t"].tolist() == [0.5, 1.5] and device["gpu_util"].tolist() == [40, 41]
    assert device["pcie_rx_bps"].tolist() == [1e9, 1.5e9] and device["sm_clock_mhz"].tolist() == [
        1980,
        1985,
    ]
    assert device[DEVICE_NAMES[-4:]].isna().all().all()
    assert list(run.rows("host")) == [
        {
            "t": "0.5",
            "cpu_pct": "50.5",
            "mem_used_mib": "1000",
            "mem_total_mib": "24000",
            "per_core": "",
        },
        {
            "t": "1.5",
            "cpu_pct": "51.5",
            "mem_used_mib": "1001",
            "mem_total_mib": "24000",
            "per_core": "",
        },
    ]
    host = run.host()
    assert host["cpu_pct"].tolist() == [50.5, 51.5] and host["per_core"].isna().all()
    header_only = load_run(_hand(tmp_path / "idle", device=OLD_DEVICE_HEADER))
    assert header_only.table_text("device") == widened.split("\n")[0] + "\n"
    assert list(header_only.device().columns) == DEVICE_NAMES and header_only.device().empty


def test_a_table_without_a_whole_header_reads_as_one_without_rows(tmp_path: Path) -> None:
    """A kill while the recorder wrote a header leaves no whole line: the table has no rows, in its own layout
    (it read before as a header with an empty first column, which pandas named "Unnamed: 0")."""
    path = _hand(
        tmp_path / "r", steps="", device="t,gpu_ut", processes=PROCESSES_HEADER, host=HOST_HEADER
    )
    run = load_run(path)
    assert run.table_text("steps") == STEPS_HEADER
    assert run.table_text("device") == ",".join(DEVICE_NAMES) + "\n"
    steps = run.steps()
    assert list(steps.columns) == STEP_NAMES and steps.empty
    assert list(run.device().columns) == DEVICE_NAMES and run.device().empty
    assert list(run.rows("steps")) == [] and summarize(run).rates == {}
    export(run, tmp_path / "out")
    assert (tmp_path / "out" / "steps.csv").read_text() == EXPORTED_STEPS_HEADER
    torn = load_run(
        _hand(tmp_path / "torn", steps=STEPS_HEADER[:-1] + ",")
    )  # the header and a torn first cell
    assert torn.table_bytes("steps") == STEPS_HEADER.encode()
    assert list(torn.steps().columns) == STEP_NAMES and torn.steps().empty


def test_rows_of_the_wrong_width_and_a_repeated_header_are_left_out(tmp_path: Path) -> None:
    run = load_run(
        _hand(
            tmp_path / "r",
            processes=PROCESSES_HEADER
            + "1.0,A,11,99.5,100.25,3,,\n1.0,B,12\n"
            + PROCESSES_HEADER
            + "2.0,B,12,50.0,200.0,4,1024.0,30.0\n2.5,A,11,99.5,100.25,3,,,9\n",
        )
    )
    assert list(run.rows("processes")) == [
        {
            "t": "1.0",
            "process": "A",
            "pid": "11",
            "cpu_pct": "99.5",
            "rss_mib": "100.25",
            "threads": "3",
            "gpu_mem_mib": "",
            "gpu_sm_util": "",
        },
        {
            "t": "2.0",
            "process": "B",
            "pid": "12",
            "cpu_pct": "50.0",
            "rss_mib": "200.0",
            "threads": "4",
            "gpu_mem_mib": "1024.0",
            "gpu_sm_util": "30.0",
        },
    ]
    assert run.columns("processes") == {
        "t": ["1.0", "2.0"],
        "process": ["A", "B"],
        "pid": ["11", "12"],
        "cpu_pct": ["99.5", "50.0"],
        "rss_mib": ["100.25", "200.0"],
        "threads": ["3", "4"],
        "gpu_mem_mib": ["", "1024.0"],
        "gpu_sm_util": ["", "30.0"],
    }


def test_a_table_pandas_cannot_parse_is_one_line(tmp_path: Path) -> None:
    path = _hand(
        tmp_path / "r", steps=STEPS_HEADER + "A,11,1,0.1,0.1,8,0,0,\nA,11,2,0.2,0.1,8,0,0,,7\n"
    )
    with pytest.raises(TraceError) as err:
        load_run(path).steps()
    assert str(err.value) == (
        f"{path / 'steps.csv'}: corrupt (Error tokenizing data. C error: Expected 9 fields in "
        "line 3, saw 10)"
    )


def test_text_beyond_ascii_is_read_and_bytes_that_are_not_utf8_refused(tmp_path: Path) -> None:
    path = _hand(
        tmp_path / "r",
        gpu_others=OTHERS_HEADER + "1.0,777,josé,python entraîné.py,512.5,9.5,88.5,640.25,60\n",
        steps=(STEPS_HEADER + "A,11,1,0.1,0.1,8,0,0,\nA,11,2,0.2,0.1,8,0,0,\xff\n").encode(
            "latin-1"
        ),
    )
    run = load_run(path)
    assert run.table_bytes("gpu_others") == (
        OTHERS_HEADER + "1.0,777,josé,python entraîné.py,512.5,9.5,88.5,640.25,60\n"
    ).encode("utf-8")
    others = run.others()
    assert others["user"].tolist() == ["josé"] and others["command"].tolist() == [
        "python entraîné.py"
    ]
    with pytest.raises(TraceError) as err:
        run.steps()
    assert str(err.value) == f"{path / 'steps.csv'} is not a gpumon trace (not UTF-8 text)"
    with pytest.raises(TraceError) as err:
        run.table_bytes("host")
    assert str(err.value) == f"{path}: missing host.csv"


EXPORTED_STEPS_HEADER = (
    "job,counts,slot,pid,step,t,wall_epoch_s,step_s,samples,warmup,copy_bytes,copy_s\n"
)
EXPORTED_HOST = (
    "t,wall_epoch_s,cpu_pct,mem_used_mib,mem_total_mib,core0_pct,core1_pct\n"
    "1.0,,50.5,1000,24000,12.5,97.0\n"
)


def _exportable(root: Path) -> Path:
    return _hand(
        root,
        steps=STEPS_HEADER + "B,12,0,0.5,0.5,8,1,0,\nA,11,1,1.0,0.25,8,0,4096,0.002\nA,11,2,1.2",
        device=",".join(DEVICE_NAMES) + "\n",
        processes=PROCESSES_HEADER + "1.0,A,11,99.5,100.25,3,,\n",
        host=HOST_HEADER + "1.0,50.5,1000,24000,12.5 97.0\n",
    )


def test_export_writes_each_table_clean_and_refuses_to_overwrite(tmp_path: Path) -> None:
    run = load_run(_exportable(tmp_path / "r"))
    out = tmp_path / "out"
    assert export(run, out) == [
        out / "steps.csv",
        out / "device.csv",
        out / "processes.csv",
        out / "host.csv",
        out / "run.json",
    ]
    assert (
        (out / "steps.csv").read_text()
        == (  # run.json has no started_at: no wall clock
            EXPORTED_STEPS_HEADER + "gemm,steps,B,12,0,0.5,,0.5,8,1,0,\n"
            "fcn,steps,A,11,1,1.0,,0.25,8,0,4096,0.002\n"
        )
    )
    assert (out / "host.csv").read_text() == EXPORTED_HOST
    assert (out / "run.json").read_bytes() == (run.path / "run.json").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == [
        "device.csv",
        "host.csv",
        "processes.csv",
        "run.json",
        "steps.csv",
    ]
    (out / "host.csv").write_text("mine\n")
    with pytest.raises(TraceError) as err:
        export(run, out)
    assert str(err.value) == (
        f"{out} already has steps.csv, device.csv, processes.csv, host.csv, run.json: not overwritten "
        "(choose another folder, or --force to replace them)"
    )
    assert (out / "host.csv").read_text() == "mine\n"
    export(run, out, overwrite=True)
    assert (out / "host.csv").read_text() == EXPORTED_HOST
    (run.path / "gpu_others.csv").write_text(
        OTHERS_HEADER + "1.0,777,alice,python x.py,512.5,9.5,88.5,640.25,60\n"
    )
    written = export(run, tmp_path / "pq", "parquet")
    assert [p.name for p in written] == [
        "steps.parquet",
        "device.parquet",
        "processes.parquet",
        "host.parquet",
        "gpu_others.parquet",
        "run.json",
    ]
    import pandas as pd

    steps = pd.read_parquet(tmp_path / "pq" / "steps.parquet")
    assert (
        steps["slot"].tolist() == ["B", "A"] and steps["slot"].dtype != "category"
    )  # names, as in the CSV
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
    (there / "processes.csv").mkdir(
        parents=True
    )  # a folder where a table goes: it cannot replace it
    (there / "processes.csv" / "keep").write_text("x")
    with pytest.raises(UnsafeDestination) as err:  # refused before any table is put in place
        export(load_run(path), there, overwrite=True)
    assert (
        str(err.value) == f"{there / 'processes.csv'} exists and is not a plain file: not replaced"
    )
    assert sorted(p.name for p in there.iterdir()) == ["processes.csv"]


# Four jobs' steps in file order, times out of order: B counts first (file order), A's first time is a tie (1.0, steps
# 2 then 1: the first in the file), its last a tie (4.0, steps 31 then 30: the last in the file), an infinite time, a
# step 2.5 and a row without a step are not steps; C and AA name no job gpumon records (a slot is A or B): their rows
# are no steps, so a stray row cannot make a pair three jobs.
ENDS_STEPS = STEPS_HEADER + "".join(
    line + "\n"
    for line in (
        "B,12,0,0.3,0.3,8,1,0,",
        "A,11,0,0.4,0.4,8,1,0,",
        "AA,14,0,0.2,0.2,8,1,0,",
        "B,12,1,1.0,0.25,8,0,0,",
        "A,11,10,2.0,0.1,8,0,4096,0.002",
        "A,11,2,1.0,0.1,8,0,0,",
        "A,11,1,1.0,0.1,8,0,0,",
        "C,13,7,2.5,0.1,8,0,0,",
        "A,11,,2.5,0.1,8,0,0,",
        "A,11,20,3.0,0.1,8,0,0,",
        "B,12,5,2.0,0.25,8,0,0,",
        "A,11,99,inf,0.1,8,0,0,",
        "A,11,2.5,5.0,0.1,8,0,0,",
        "A,11,31,4.0,0.1,8,0,0,",
        "A,11,30,4.0,0.1,8,0,0,",
    )
)
ENDS = [("B", ([1.0, 2.0], [1.0, 5.0])), ("A", ([1.0, 4.0], [2.0, 30.0]))]


@pytest.mark.parametrize(
    "extra",
    [
        "",
        "A,11,40,6.0,0.1,8,0\n",  # short: the csv module skips it, pandas would pad it (the columns are read by row)
        "A,11,41,later,0.1,8,0,0,\n",  # text for a time: read by row, the row skipped
    ],
)
@pytest.mark.parametrize("path", ["by row", "columns", "cache", "light"])
def test_each_jobs_first_and_last_counted_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, extra: str
) -> None:
    from gpumon.core.store import trace

    run_dir = _hand(tmp_path / "r", steps=ENDS_STEPS + extra)
    if path != "by row":
        monkeypatch.setattr(trace, "COLUMNS_BYTES", 0)  # a big run's reading, for this small one
    if path == "cache":
        load_run(run_dir).steps()
        assert _copied(run_dir) == (not extra), "a table that does not type has no copy"
    ends = trace.exclusive_ends(load_run(run_dir), whole=path != "light")
    assert list(ends.items()) == ENDS
    assert _copied(run_dir) == (path in ("columns", "cache") and not extra)
    rates = trace.exclusive_rates(load_run(run_dir))
    assert rates == pytest.approx({"A": 28 / 3, "B": 4.0})
    assert baseline_rate("A", run_dir) == pytest.approx(28 / 3)
    with pytest.raises(UsageError, match="has no post-warm-up rate for C"):
        baseline_rate("C", run_dir)  # no job of that name


@pytest.mark.parametrize("path", ["read", "cache", "light", "steps"])
def test_the_step_columns_of_each_row(tmp_path: Path, path: str) -> None:
    run_dir = _hand(
        tmp_path / "r",
        steps=STEPS_HEADER + "B,12,0,0.5,0.5,8,1,0,\nA,11,1,1.0,0.25,8,0,4096,0.002\n"
        ",13,2,1.5,0.25,8,0,,\nA,11,2,2.0,0.25,,0,8192,0.004\n",
    )
    run = load_run(run_dir)
    if path == "cache":
        run.steps()
        run = load_run(run_dir)
    if path == "steps":
        run.steps()
    codes, names, (t, step, copy_s) = run.step_columns(
        ("t", "step", "copy_s"), whole=path != "light"
    )
    jobs = [
        names[int(c)] if c == c and c >= 0 else None for c in codes.tolist()
    ]  # no job: -1 or NaN
    assert jobs == ["B", "A", None, "A"]
    assert t.tolist() == [0.5, 1.0, 1.5, 2.0] and step.tolist() == [0, 1, 2, 2]
    assert (
        copy_s[1:2].tolist() == [0.002]
        and copy_s[3] == 0.004
        and copy_s[0] != copy_s[0]
        and copy_s[2] != copy_s[2]
    )
    assert _copied(run_dir) == (path != "light")


def test_numbers_of_arrow_columns_with_nulls_offsets_and_chunks() -> None:
    import numpy as np
    import pyarrow as pa

    from gpumon.core.store.trace import _numpy

    ints = pa.array([1, None, 3, 4, None, 6, 7, 8, 9, 10], type=pa.int32()).slice(
        3, 5
    )  # 4, None, 6, 7, 8
    got = _numpy(ints)
    assert got[0] == 4 and got[1] != got[1] and got[2:].tolist() == [6, 7, 8]
    floats = pa.chunked_array(
        [pa.array([0.5, None], type=pa.float64()), pa.array([2.5], type=pa.float64())]
    )
    got = _numpy(floats)
    assert got[0] == 0.5 and got[1] != got[1] and got[2] == 2.5 and len(got) == 3
    assert _numpy(pa.array([True, False])).tolist() == [
        True,
        False,
    ]  # not a number type: pyarrow's own conversion
    assert _numpy(pa.chunked_array([pa.array([True]), pa.array([False, True])])).tolist() == [
        True,
        False,
        True,
    ]
    assert _numpy(pa.array([7, 8], type=pa.int64())).dtype == np.int64
    assert _numpy(pa.chunked_array([], type=pa.float64())).tolist() == []


def test_a_steps_csv_of_the_threshold_size_is_read_as_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpumon.core.store import trace

    run_dir = _hand(tmp_path / "r", steps=ENDS_STEPS)
    monkeypatch.setattr(trace, "COLUMNS_BYTES", len(ENDS_STEPS))  # exactly its size: big
    assert list(trace.exclusive_ends(load_run(run_dir)).items()) == ENDS
    assert _copied(run_dir), "read as columns from the copy made in the user's cache"
    monkeypatch.setattr(trace, "COLUMNS_BYTES", len(ENDS_STEPS) + 1)
    _uncopy(run_dir)
    assert list(trace.exclusive_ends(load_run(run_dir)).items()) == ENDS
    assert not _copied(run_dir), "a byte below: row by row"
    assert trace._rate_columns(load_run(run_dir)) is not None and _copied(run_dir), (
        "whole by default"
    )


def _two_jobs(root: Path) -> Path:
    return _hand(
        root,
        steps=STEPS_HEADER + "B,12,0,0.5,0.5,8,1,0,\nA,11,1,1.0,0.25,8,0,4096,0.002\n"
        "B,12,1,1.5,0.25,8,0,0,\nA,11,2,2.0,0.25,8,0,8192,0.004\n",
    )


def test_the_steps_split_by_job_once_with_their_row_numbers(tmp_path: Path) -> None:
    run = load_run(_two_jobs(tmp_path / "r"))
    jobs = run.jobs()
    assert run.jobs() is jobs, "split once while steps.csv is unchanged"
    assert sorted(jobs) == ["A", "B"]
    assert jobs["A"].index.tolist() == [1, 3] and jobs["A"]["step"].tolist() == [1, 2]
    assert jobs["B"].index.tolist() == [0, 2] and jobs["B"]["t"].tolist() == [0.5, 1.5]
    assert list(jobs["A"].columns) == STEP_NAMES and run.job_steps("A") is jobs["A"]
    none = run.job_steps("C")
    assert none.empty and list(none.columns) == STEP_NAMES
    with open(run.path / "steps.csv", "a") as f:
        f.write("C,13,1,3.0,0.25,8,0,0,\nA,11,3,3.5,0.25,8,0,0,\n")
    again = run.jobs()
    assert again is not jobs and sorted(again) == ["A", "B"], "C names no job: its row is no step"
    assert again["A"].index.tolist() == [1, 3, 5]


def test_each_tables_columns_are_kept_apart(tmp_path: Path) -> None:
    """Two tables of the same size and time: each keeps its own columns (they are memoised by table)."""
    import os

    path = _hand(
        tmp_path / "r",
        processes=PROCESSES_HEADER + "1.0,A,11,99.5,100.25,3,,\n",
        host=HOST_HEADER + "1.0,50.5,1000,24000,12.5 97.000000000000\n",
    )
    assert (path / "processes.csv").stat().st_size == (path / "host.csv").stat().st_size
    for name in ("processes.csv", "host.csv"):
        os.utime(path / name, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    run = load_run(path)
    assert run.columns("processes")["process"] == ["A"]
    assert run.columns("host")["per_core"] == ["12.5 97.000000000000"]
    assert run.columns("processes")["cpu_pct"] == ["99.5"]


def test_a_light_read_of_a_clean_table_needs_no_pandas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpumon.core.store.trace import Run

    def no_pandas(*args: object, **kwargs: object) -> None:
        raise AssertionError("steps.csv parsed by pandas: pyarrow reads it as pandas would")

    monkeypatch.setattr(Run, "_frame_of", no_pandas)
    codes, names, (t,) = load_run(_two_jobs(tmp_path / "r")).step_columns(("t",), whole=False)
    assert [names[int(c)] for c in codes] == ["B", "A", "B", "A"] and t.tolist() == [
        0.5,
        1.0,
        1.5,
        2.0,
    ]


def test_a_run_finalised_between_two_reads_reads_as_final(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_live reads an interrupted-looking run once more: its runner may have just written the final run.json."""
    from gpumon.core.store import trace

    path = _hand(tmp_path / "r", meta={**HAND_META, "status": "recording"})
    read = trace.load_run

    def read_then_finalise(p: Path) -> trace.Run:
        run = read(p)
        (path / "run.json").write_text(json.dumps(HAND_META))  # the runner finishes and exits
        return run

    monkeypatch.setattr(trace, "load_run", read_then_finalise)
    run, status = trace.load_live(path)
    assert status == "complete" and run.meta.status == "complete"


def test_a_run_this_process_records_reads_running(tmp_path: Path) -> None:
    from gpumon.core.store.runner import RunnerInfo, RunnerLock

    me = RunnerInfo.current()
    path = _hand(
        tmp_path / "r",
        meta={**HAND_META, "status": "recording", "runner": me.to_json(), "device": "cuda:1"},
        steps=STEPS_HEADER,
    )
    lock = RunnerLock.take(path)
    try:
        run, status = load_live(path)
        assert status == "running"
        summary = summarize(run)
        assert (summary.status, summary.runner, summary.device) == ("running", me, "cuda:1")
    finally:
        lock.release()
    assert load_live(path)[1] == "interrupted"


def test_a_damaged_run_is_listed_with_why(tmp_path: Path) -> None:
    from gpumon.core.store.trace import scan_runs

    good = _hand(tmp_path / "runs" / "20261126-050000-a")
    bad = _hand(tmp_path / "runs" / "20261126-060000-b")
    (bad / "run.json").write_text("{")
    runs, damaged = scan_runs(tmp_path / "runs")
    assert [r.path for r in runs] == [good]
    assert [(d.name, d.problem) for d in damaged] == [
        ("20261126-060000-b", f"{bad / 'run.json'}: corrupt (not valid JSON)")
    ]


def test_an_export_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(EnvironmentFailure) as err:
        export(load_run(_exportable(tmp_path / "r")), tmp_path / "file" / "out")
    assert str(err.value) == f"cannot create {tmp_path / 'file' / 'out'}: Not a directory"


def test_parquet_export_holds_the_columns_alone(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    export(load_run(_exportable(tmp_path / "r")), tmp_path / "pq", "parquet")
    steps = EXPORTED_STEPS_HEADER.strip().split(",")
    assert pq.read_schema(tmp_path / "pq" / "steps.parquet").names == steps  # no index column
    assert pq.read_schema(tmp_path / "pq" / "device.parquet").names == [
        "t",
        "wall_epoch_s",
        *DEVICE_NAMES[1:],
    ]


def test_export_writes_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """Under an ASCII locale (C, without Python's UTF-8 mode) the exported text is still the UTF-8 it was."""
    import os
    import subprocess
    import sys

    others = OTHERS_HEADER + "1.0,777,josé,python entraîné.py,512.5,9.5,88.5,640.25,60\n"
    path = _exportable(tmp_path / "r")
    (path / "gpu_others.csv").write_text(others, encoding="utf-8")
    (path / "run.json").write_text(
        json.dumps({**HAND_META, "label": "déjà"}, ensure_ascii=False), encoding="utf-8"
    )
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    code = (
        "import sys; from pathlib import Path; from gpumon.core.store.trace import export, load_run; "
        "assert sys.flags.utf8_mode == 0; run = load_run(sys.argv[1]); print(ascii(run.label)); "
        "export(run, Path(sys.argv[2]))"
    )
    here = load_run(
        path
    )  # here too: mutmut runs a test against the functions it calls in its own process
    assert here.label == "déjà"
    export(here, tmp_path / "here")
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == ascii("déjà"), done.stderr
    exported = (
        "t,wall_epoch_s,pid,user,command,gpu_mem_mib,sm_pct,cpu_pct,rss_mib,elapsed_s\n"
        "1.0,,777,josé,python entraîné.py,512.5,9.5,88.5,640.25,60\n"
    )
    assert (tmp_path / "here" / "gpu_others.csv").read_bytes() == exported.encode("utf-8")
    assert (tmp_path / "out" / "gpu_others.csv").read_bytes() == exported.encode("utf-8")


def test_the_step_columns_of_a_cache_are_read_without_pandas(tmp_path: Path) -> None:
    """``gpumon runs`` reads a cache's columns with pyarrow alone (its own conversion to numpy would import pandas)."""
    import subprocess
    import sys

    run_dir = _hand(
        tmp_path / "r",
        steps=STEPS_HEADER + "B,12,0,0.5,0.5,8,1,0,\nA,11,1,1.0,0.25,8,0,4096,0.002\n"
        ",13,2,1.5,0.25,8,0,,\nA,11,2,2.0,0.25,,0,8192,0.004\n",
    )
    light_dir = _hand(tmp_path / "light", steps=(run_dir / "steps.csv").read_text())
    load_run(run_dir).steps()
    assert _copied(run_dir)
    code = (
        "import sys; from gpumon.core.store.trace import load_run; "
        "codes, names, (t, step, copy_s) = load_run(sys.argv[1]).step_columns(('t', 'step', 'copy_s'), "
        "whole=sys.argv[2] == 'whole'); "
        "print('pandas' in sys.modules, [names[int(c)] if c == c else None for c in codes], t.tolist(), "
        "step.tolist(), [None if x != x else x for x in copy_s.tolist()])"
    )
    # here too (mutmut runs a test against the functions it calls in its own process), then without pandas loaded
    for path, whole in ((run_dir, "whole"), (light_dir, "light")):
        codes, names, (t, step, copy_s) = load_run(path).step_columns(
            ("t", "step", "copy_s"), whole=whole == "whole"
        )
        assert (
            [names[int(c)] if c == c else None for c in codes] == ["B", "A", None, "A"]
            and t.tolist() == [0.5, 1.0, 1.5, 2.0]
            and step.tolist() == [0, 1, 2, 2]
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(path), whole],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.stdout.strip() == (
            "False ['B', 'A', None, 'A'] [0.5, 1.0, 1.5, 2.0] [0.0, 1.0, 2.0, 2.0] "
            "[None, 0.002, None, 0.004]"
            if whole == "light"
            else "False ['B', 'A', None, 'A'] [0.5, 1.0, 1.5, 2.0] [0, 1, 2, 2] "
            "[None, 0.002, None, 0.004]"
        ), done.stderr
    assert not _copied(light_dir)


def _copied(run_dir: Path) -> bool:
    """Whether the run has a valid columnar copy of its steps (its own, or in the user's cache)."""
    return columnar.open_copy(run_dir) is not None


def _uncopy(run_dir: Path) -> None:
    """No columnar copy of the run's steps anywhere (its own, the user's cache)."""
    (run_dir / STEPS_COLUMNAR).unlink(missing_ok=True)
    st = columnar.csv_identity(run_dir)
    if st is not None:
        columnar.cache_path(run_dir, st).unlink(missing_ok=True)


def _forge_cache(
    run_dir: Path, t: list[float], columns: list[str] | None = None, dictionary: bool = True
) -> None:
    """A steps.parquet made here with pyarrow, valid for steps.csv as it is now (its size and mtime, layout 3), whose
    rows are not steps.csv's: job Z at times ``t``. Whichever values a read gives say where it read them from."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    st = os.stat(run_dir / "steps.csv")
    n = len(t)
    process = pa.array(["Z"] * n)
    table = pa.table(
        {
            "process": process.dictionary_encode().cast(pa.dictionary(pa.int32(), pa.string()))
            if dictionary
            else process,
            "pid": pa.array([99] * n, type=pa.int64()),
            "step": pa.array(list(range(n)), type=pa.int64()),
            "t": pa.array(t, type=pa.float64()),
            "iter_s": pa.array([0.5] * n),
            "samples": pa.array([8.0] * n),
            "warmup": pa.array([0] * n, type=pa.int64()),
            "copy_bytes": pa.array([0] * n, type=pa.int64()),
            "copy_s": pa.array([None] * n, type=pa.float64()),
        }
    )
    if columns is not None:
        table = table.select(columns)
    pq.write_table(
        table.replace_schema_metadata(
            {
                b"gpumon_steps_csv": f"{st.st_size}:{st.st_mtime_ns}".encode(),
                b"gpumon_steps_layout": b"3",
            }
        ),
        run_dir / STEPS_COLUMNAR,
    )


def test_where_the_step_columns_come_from(tmp_path: Path) -> None:
    """The steps already read, else a cache valid for steps.csv, else steps.csv; the light read kept for a later one."""
    run_dir = _two_jobs(tmp_path / "r")
    csv_t = [0.5, 1.0, 1.5, 2.0]
    _forge_cache(run_dir, [7.0, 8.0])
    codes, names, (t,) = load_run(run_dir).step_columns(("t",))
    assert [names[int(c)] for c in codes] == ["Z", "Z"] and t.tolist() == [7.0, 8.0], (
        "a valid cache is read"
    )
    assert load_run(run_dir).steps()["t"].tolist() == [7.0, 8.0]
    _forge_cache(
        run_dir, [7.0, 8.0], dictionary=False
    )  # job names as plain strings: read as the dictionary they are
    codes, names, (t,) = load_run(run_dir).step_columns(("t",))
    assert [names[int(c)] for c in codes] == ["Z", "Z"] and t.tolist() == [7.0, 8.0]
    forged = load_run(run_dir)
    assert forged.steps()["process"].tolist() == ["Z", "Z"]
    assert forged.step_columns(("t",), whole=False)[2][0].tolist() == [7.0, 8.0], (
        "the steps already read, even light"
    )
    _forge_cache(run_dir, [7.0, 8.0], columns=[c for c in STEP_NAMES if c != "copy_s"])
    assert load_run(run_dir).step_columns(("t",))[2][0].tolist() == csv_t, (
        "a cache without every column is not"
    )
    _uncopy(run_dir)
    run = load_run(run_dir)
    assert run.steps()["t"].tolist() == csv_t
    _forge_cache(run_dir, [7.0, 8.0])
    assert run.step_columns(("t",))[2][0].tolist() == csv_t, "the steps already read"
    _uncopy(run_dir)
    light = load_run(run_dir)
    assert light.step_columns(("t", "warmup"), whole=False)[2][0].tolist() == csv_t
    _forge_cache(run_dir, [7.0, 8.0])
    assert light.step_columns(("t",))[2][0].tolist() == csv_t, "the light read, kept"
    _uncopy(run_dir)
    assert light.step_columns(("t", "copy_s"))[2][0].tolist() == csv_t
    assert not _copied(run_dir), "the light read serves a whole one of its columns"
    load_run(run_dir).step_columns(("t",))
    assert _copied(run_dir), "whole by default: read from the copy made in the user's cache"


def test_a_recording_runs_tables_are_read_every_time(tmp_path: Path) -> None:
    """A recording run's steps are read again at each call, even when steps.csv keeps its size and mtime; a finished
    run's are kept while those do not change."""
    import os

    for status, kept in (("recording", False), ("complete", True)):
        run_dir = _hand(
            tmp_path / status,
            meta={**HAND_META, "status": status},
            steps=STEPS_HEADER + "A,11,1,1.0,0.25,8,0,0,\n",
        )
        stamp = os.stat(run_dir / "steps.csv").st_mtime_ns
        run = load_run(run_dir)
        first = run.steps()
        assert first["t"].tolist() == [1.0] and run.columns("steps")["t"] == ["1.0"]
        (run_dir / "steps.csv").write_text(
            STEPS_HEADER + "A,11,1,9.0,0.25,8,0,0,\n"
        )  # the same size
        os.utime(run_dir / "steps.csv", ns=(stamp, stamp))
        if kept:
            assert run.steps() is first and run.columns("steps")["t"] == ["1.0"]
        else:
            assert run.steps()["t"].tolist() == [9.0] and run.columns("steps")["t"] == ["9.0"]


def test_a_table_in_the_current_layout_is_handed_over_as_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No decoding for a table in the current layout: its complete lines, as they are on disk (a torn last line, even
    one cut inside a character, dropped)."""
    from gpumon.core.store.trace import Run

    run = load_run(
        _hand(
            tmp_path / "r", steps=STEPS_HEADER.encode() + b"A,11,1,1.0,0.25,8,0,0,\n\xc3\xa9,11,2"
        )
    )

    def no_decoding(self: Run, table: str) -> str:
        raise AssertionError("decoded as text")

    monkeypatch.setattr(Run, "table_text", no_decoding)
    assert run.table_bytes("steps") == (STEPS_HEADER + "A,11,1,1.0,0.25,8,0,0,\n").encode()


def test_the_errors_of_a_run_directory_word_for_word(tmp_path: Path) -> None:
    path = _hand(tmp_path / "r", steps="process,pid\n")
    with pytest.raises(TraceError) as err:
        load_run(path).steps()
    assert (
        str(err.value) == f"{path / 'steps.csv'}: corrupt header (expected {STEPS_HEADER.strip()})"
    )
    for content, message in (
        (b"{not json", f"{path / 'run.json'}: corrupt (not valid JSON)"),
        (None, f"{path}: not a gpumon run (no run.json)"),
    ):
        (path / "run.json").unlink(missing_ok=True)
        if content is not None:
            (path / "run.json").write_bytes(content)
        with pytest.raises(TraceError) as err:
            load_run(path)
        assert str(err.value) == message
    (path / "run.json").mkdir()
    with pytest.raises(TraceError) as err:
        load_run(path)
    assert str(err.value) == f"cannot read {path / 'run.json'}: Is a directory"
    with pytest.raises(TraceError) as err:
        load_run(tmp_path / "gone")
    assert str(err.value) == f"{tmp_path / 'gone'}: no such run directory"
    crlf = _hand(
        tmp_path / "crlf", steps=STEPS_HEADER.replace("\n", "\r\n") + "A,11,1,1.0,0.25,8,0,0,\r\n"
    )
    with pytest.raises(TraceError) as err:
        load_run(crlf).steps()  # not the documented header: "copy_s\r"
    assert (
        str(err.value) == f"{crlf / 'steps.csv'}: corrupt header (expected {STEPS_HEADER.strip()})"
    )
    lone = tmp_path / "lone.csv"
    lone.write_bytes(b"\nabc")  # a newline first, then a torn line
    assert complete_text(lone) == "\n"


@pytest.mark.parametrize("missing", ["<NA>", "None"])
def test_a_job_name_pandas_reads_as_missing_is_missing_in_a_light_read(
    tmp_path: Path, missing: str
) -> None:
    run_dir = _hand(
        tmp_path / "r",
        steps=STEPS_HEADER + f"A,11,1,1.0,0.25,8,0,0,\n{missing},12,1,1.5,0.25,8,0,0,\n",
    )
    codes, names, (t,) = load_run(run_dir).step_columns(("t",), whole=False)
    assert [names[int(c)] if c == c and c >= 0 else None for c in codes] == ["A", None]
    assert t.tolist() == [1.0, 1.5]


def test_a_name_picks_the_run_the_user_labelled_before_an_automatic_label(tmp_path: Path) -> None:
    """Issue 43: `--label fcn-lstm` on one run, then `gpumon run fcn lstm` (automatic label fcn-lstm): the name
    fcn-lstm named the newer, automatic one. A label made from the jobs' names says so in run.json."""
    from gpumon.core.store.runstore import resolve_run

    given = _hand(tmp_path / "20261122-110000-fcn-lstm", {**HAND_META, "label": "fcn-lstm"})
    auto = _hand(
        tmp_path / "20261122-120000-fcn-lstm",
        {**HAND_META, "label": "fcn-lstm", "label_given": False},
    )
    assert load_run(auto).meta.label_given is False and load_run(given).meta.label_given
    assert resolve_run("fcn-lstm", tmp_path) == given
    assert "label_given" not in load_run(given).meta.to_json(), "a given label writes nothing new"
    assert load_run(auto).meta.to_json()["label_given"] is False
    (given / "run.json").unlink()
    assert resolve_run("fcn-lstm", tmp_path) == auto, "no given label: the automatic one"


def test_a_plan_says_whether_its_label_was_given(tmp_path: Path) -> None:
    from gpumon.core.capture.session import SessionConfig
    from gpumon.frontends.plan import make_plan

    config = SessionConfig(device="cpu", runs_dir=tmp_path, nvml=False)
    made = make_plan([], ["sleep 1"], session=config, label=None, duration_s=None, stagger_s=0.0)
    named = make_plan([], ["sleep 1"], session=config, label="mine", duration_s=None, stagger_s=0.0)
    assert (made.label, made.label_given) == ("cmd", False)
    assert (named.label, named.label_given) == ("mine", True)
