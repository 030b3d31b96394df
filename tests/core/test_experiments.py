"""Experiment specs, expansion, resume and reports, without torch (synthetic runs, a fake cell executor)."""

from __future__ import annotations

import io
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gpumon.core.jobs.interpreter import choose
from gpumon.cli import main
from gpumon.errors import UsageError
from gpumon.experiments.runner.cells import Cell, check_all_presets, expand
from gpumon.experiments.runner.device import CudaStatus
from gpumon.experiments.study.frames import read_speedscope
from gpumon.experiments.runner.manifest import (
    FAILED,
    INTERRUPTED,
    OK,
    SKIPPED,
    CellRecord,
    Manifest,
)
from gpumon.experiments.study.operators import read_profile
from gpumon.experiments.runner import pyspy
from gpumon.experiments.runner.progress import Progress
from gpumon.experiments.study.report import write_results
from gpumon.experiments.study.results import Context
from gpumon.core.store.runmeta import WorkloadRecord
from gpumon.experiments.runner.cellrun import CellScheduler, cell_argv, failure_reason
from gpumon.experiments.study.similarity import jaccard, weighted_jaccard
from gpumon.experiments.runner.spec import load_spec, shipped_specs
from gpumon.experiments.runner.steady import StepsTail
from tests.tracegen import Job, write_run

PAIRWISE = """\
[experiment]
name = "pairs"
title = "Pairs"
question = "Which pairs pay?"
analysis = "pairwise"

[run]
workloads = ["fcn", "gemm"]
pairs = "distinct"
seconds = 4
stagger = 1
startup = 30

[presets.tiny]
options = { preset = "tiny", threads = 1 }
repeats = 2
"""

SWEEP = """\
[experiment]
name = "sweep"
title = "Sweep"
question = "How fast?"
analysis = "sweep"

[run]
workloads = ["fcn"]
points = [{ input = "synthetic" }, { input = "disk", workers = 2 }]
sweep = { batch = [16, 64] }
seconds = 3
"""

COST = """\
[experiment]
name = "cost"
title = "Cost"
question = "CPU or GPU?"
analysis = "device_cost"

[run]
workloads = ["fcn"]
devices = ["cpu", "cuda"]
seconds = 3

[prices]
currency = "EUR"
cpu = 0.5
cuda = 3.0
"""

NO_CUDA = CudaStatus(False, "no NVIDIA driver on this machine")


def spec_of(text: str, tmp_path: Path, name: str = "spec.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_spec(path)


def error_of(text: str, tmp_path: Path) -> str:
    with pytest.raises(UsageError) as info:
        spec = spec_of(text, tmp_path)
        check_all_presets(spec)
    return str(info.value)


# --- spec parsing and validation -------------------------------------------------------------


def test_a_valid_spec_fills_defaults_and_merges_preset_options(tmp_path):
    spec = spec_of(PAIRWISE, tmp_path)
    tiny = spec.presets["tiny"]
    assert spec.analysis == "pairwise" and list(spec.presets) == ["tiny"]
    assert tiny.options == {"preset": "tiny", "threads": "1"}
    assert (tiny.seconds, tiny.stagger, tiny.startup, tiny.repeats, tiny.interval_ms) == (
        4,
        1,
        30,
        2,
        100,
    )
    assert tiny.warmup is None and tiny.device == "auto"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("seconds = 4", "secnds = 4"), "[run] unknown key 'secnds'"),
        (
            ('question = "Which pairs pay?"', 'question = "Q"\nauthor = "me"'),
            "[experiment] unknown key 'author'",
        ),
        (("[presets.tiny]", "[preset.tiny]"), "unknown table 'preset'"),
        (("seconds = 4", "seconds = -1"), "[run] seconds: expected a number > 0, got -1"),
        (("repeats = 2", "repeats = 0"), "[presets.tiny] repeats: expected an integer >= 1, got 0"),
        (
            ("repeats = 2", "repeats = 1.5"),
            "[presets.tiny] repeats: expected an integer >= 1, got 1.5",
        ),
        (
            ('pairs = "distinct"', 'pairs = "some"'),
            "[run] pairs: expected one of none, all, distinct",
        ),
        (('pairs = "distinct"', 'pairs = [["fcn", "lstm"]]'), "pairs: unknown workload 'lstm'"),
        (('pairs = "distinct"', ""), "the pairwise analysis needs pairs"),
        (
            ('analysis = "pairwise"', 'analysis = "magic"'),
            "[experiment] analysis: expected one of pairwise",
        ),
        (('["fcn", "gemm"]', "[]"), "[run] workloads: expected a non-empty list of workload specs"),
        (('["fcn", "gemm"]', '["fcn", "gpt"]'), "unknown workload 'gpt'"),
        (("threads = 1 }", "threads = 0 }"), "bad value for threads: '0'"),
        (("threads = 1 }", "thread = 1 }"), "unknown option 'thread'"),
        (("stagger = 1", "stagger = true"), "[run] stagger: expected a number >= 0, got True"),
        (('name = "pairs"', 'name = "Pairs!"'), "[experiment] name: expected lower-case letters"),
        (("seconds = 4\n", "seconds = [4\n"), "not valid TOML"),
        (("seconds = 4\n", ""), "[presets.tiny] seconds is required"),
        (("seconds = 4\n", "seconds = inf\n"), "inf is not a number an experiment can use"),
        (("seconds = 4\n", "seconds = nan\n"), "nan is not a number an experiment can use"),
        (("seconds = 4\n", "seconds = " + "[" * 10_000 + "]" * 10_000 + "\n"), "nested deeper"),
        (("seconds = 4\n", "seconds = [[[[[[[[[[4]]]]]]]]]]\n"), "nested deeper than 8 levels"),
        (
            ("seconds = 4\n", "seconds = 4\n# " + "x" * (1 << 20) + "\n"),
            "larger than 1048576 bytes",
        ),
    ],
)
def test_bad_specs_name_the_table_and_key(tmp_path, change, message):
    old, new = change
    assert old in PAIRWISE
    text = error_of(PAIRWISE.replace(old, new, 1), tmp_path)
    assert message in text and str(tmp_path / "spec.toml") in text


def test_a_spec_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_bytes(PAIRWISE.encode() + b"# \xff\xfe\n")
    with pytest.raises(UsageError, match="not UTF-8 text"):
        load_spec(path)


def test_layout_errors(tmp_path):
    assert "sweep/points only go with" in error_of(
        PAIRWISE.replace('pairs = "distinct"', 'pairs = "all"\nsweep = { batch = [1] }'), tmp_path
    )
    assert "needs a sweep table or points" in error_of(
        SWEEP.replace("sweep = { batch = [16, 64] }", "").replace(
            'points = [{ input = "synthetic" }, { input = "disk", workers = 2 }]', ""
        ),
        tmp_path,
    )
    assert "[prices] needs a price per hour for cuda" in error_of(
        COST.replace("cuda = 3.0", ""), tmp_path
    )
    assert "input=disk is not available" in error_of(SWEEP.replace('["fcn"]', '["gemm"]'), tmp_path)
    assert "sets batch, which the sweep varies" in error_of(
        SWEEP.replace('["fcn"]', '["fcn:batch=8"]'), tmp_path
    )


def test_cli_reports_a_bad_spec_in_one_line_with_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(PAIRWISE.replace("seconds = 4", "seconds = 0"))
    assert main(["experiment", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpumon: error: ") and "[run] seconds" in err
    assert main(["experiment", str(tmp_path / "missing.toml")]) == 2
    assert "no experiment spec" in capsys.readouterr().err


def test_every_shipped_spec_parses_and_expands_in_every_preset():
    paths = shipped_specs()
    names = {p.stem for p in paths}
    assert names >= {
        "q1_memory_fraction",
        "q2_pairwise",
        "q3_operators",
        "q4_contention",
        "cpu_threads",
        "input_pipeline",
        "batch_size",
        "device_cost",
    }
    for path in paths:
        spec = load_spec(path)
        assert spec.name == path.stem and {"tiny", "paper"} <= set(spec.presets)
        check_all_presets(spec)
    q4 = load_spec(next(p for p in paths if p.stem == "q4_contention"))
    assert {"h2d", "gemm"} <= set(q4.presets["tiny"].workloads)


def test_q1_on_the_cpu_says_it_needs_cuda_and_exits_0(tmp_path, capsys):
    assert (
        main(["experiment", "q1_memory_fraction", "--device", "cpu", "--out", str(tmp_path / "q1")])
        == 0
    )
    out = capsys.readouterr().out
    assert "needs CUDA" in out and "no numbers are reported" in out
    assert not (tmp_path / "q1").exists()


# --- expansion ---------------------------------------------------------------------------------


def test_pairwise_expansion_runs_repeats_outermost_exclusive_first(tmp_path):
    spec = spec_of(PAIRWISE, tmp_path)
    cells = expand(spec, spec.presets["tiny"], "cpu")
    assert [c.id for c in cells] == [
        "x-fcn-r1",
        "x-gemm-r1",
        "s-fcn+gemm-r1",
        "x-fcn-r2",
        "x-gemm-r2",
        "s-fcn+gemm-r2",
    ]
    shared = cells[2]
    assert shared.mode == "shared" and shared.jobs[0].spec == "fcn:preset=tiny,threads=1"
    assert shared.duration_s == 1 + 30 + 4 and cells[0].duration_s == 30 + 4
    assert shared.group == "s-fcn+gemm" and cells[5].group == shared.group
    argv = cell_argv(shared, tmp_path / "runs", tmp_path / "scratch", choose())
    assert argv[argv.index("run") :][:3] == [
        "run",
        "fcn:preset=tiny,threads=1",
        "gemm:preset=tiny,threads=1",
    ]
    assert (
        argv[argv.index("--stagger") + 1] == "1"
        and argv[argv.index("--label") + 1] == "s-fcn+gemm-r1"
    )
    assert "--stagger" not in cell_argv(cells[0], tmp_path / "runs", tmp_path / "scratch", choose())


def test_all_pairs_include_self_pairs_and_duplicate_workloads_get_keys(tmp_path):
    text = PAIRWISE.replace('pairs = "distinct"', 'pairs = "all"').replace(
        '["fcn", "gemm"]', '["fcn", "fcn:batch=8"]'
    )
    spec = spec_of(text, tmp_path)
    ids = [c.id for c in expand(spec, spec.presets["tiny"], "cpu") if c.repeat == 1]
    assert ids == ["x-fcn-r1", "x-fcn-2-r1", "s-fcn+fcn-r1", "s-fcn+fcn-2-r1", "s-fcn-2+fcn-2-r1"]


def test_sweep_expansion_is_points_times_the_product_of_the_sweep(tmp_path):
    spec = spec_of(SWEEP, tmp_path)
    cells = expand(spec, spec.presets["default"], "cpu")
    assert [c.id for c in cells] == [
        "x-fcn-inputsynthetic-batch16-r1",
        "x-fcn-inputsynthetic-batch64-r1",
        "x-fcn-inputdisk-workers2-batch16-r1",
        "x-fcn-inputdisk-workers2-batch64-r1",
    ]
    assert cells[3].jobs[0].spec == "fcn:batch=64,input=disk,workers=2"
    assert all(c.mode == "exclusive" for c in cells)


def test_device_cost_cells_use_the_chosen_gpu(tmp_path):
    spec = spec_of(COST, tmp_path)
    cells = expand(spec, spec.presets["default"], "cuda:1")
    assert [(c.id, c.device) for c in cells] == [
        ("x-fcn-cpu-r1", "cpu"),
        ("x-fcn-cuda-1-r1", "cuda:1"),
    ]
    assert [c.device for c in expand(spec, spec.presets["default"], "cpu")] == ["cpu", "cuda"]


def test_dry_run_lists_cells_and_commands(tmp_path, capsys):
    path = tmp_path / "pairs.toml"
    path.write_text(PAIRWISE)
    assert (
        main(
            [
                "experiment",
                str(path),
                "--dry-run",
                "--device",
                "cpu",
                "--out",
                str(tmp_path / "x"),
                "--repeats",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        out.startswith(f"3 cells into {tmp_path / 'x'}")
        and "s-fcn+gemm-r1" in out
        and "x-fcn-r2" not in out
    )
    assert not (tmp_path / "x").exists()


# --- manifest, scheduler, resume ------------------------------------------------------------------


def fake_run(directory: Path, cell: Cell, rate: float = 10.0) -> str:
    """A synthetic run directory for ``cell``: each job steps at ``rate`` it/s alone, half that shared."""
    step = 1 / rate if cell.mode == "exclusive" else 2 / rate
    jobs = [
        Job(slot=s, spec=j.spec, phases=((12.0, step),), start=i * 1.0, seed=i)
        for i, (s, j) in enumerate(zip("AB", cell.jobs))
    ]
    # a cell run again records a new run directory, as `gpumon run` does (the recorder never reopens a table)
    shutil.rmtree(directory / "runs" / cell.id, ignore_errors=True)
    path = write_run(directory / "runs" / cell.id, jobs, label=cell.id)
    return str(path.relative_to(directory))


class FakeExecutor:
    """Stands in for ``gpumon run``: records calls; an interrupt arrives during cell number ``interrupt_at``."""

    def __init__(
        self,
        directory: Path,
        scheduler_box: list,
        interrupt_at: int | None = None,
        fail: str | None = None,
    ):
        self.directory = directory
        self.scheduler_box = scheduler_box
        self.interrupt_at = interrupt_at
        self.fail = fail
        self.calls: list[str] = []

    def __call__(self, cell: Cell, progress: Progress) -> CellRecord:
        self.calls.append(cell.id)
        if len(self.calls) == self.interrupt_at:
            self.scheduler_box[0].signal_received = signal.SIGINT
            return CellRecord(
                id=cell.id, status=INTERRUPTED, config=cell.config(), reason="stopped by a signal"
            )
        if cell.id == self.fail:
            return CellRecord(
                id=cell.id,
                status=FAILED,
                config=cell.config(),
                reason="OOM: A (fcn): out of memory",
            )
        return CellRecord(
            id=cell.id,
            status=OK,
            config=cell.config(),
            run=fake_run(self.directory, cell),
            elapsed_s=1.0,
        )


def run_with(
    directory: Path,
    cells: list[Cell],
    executor_args: dict,
    retry_failed: bool = False,
    name: str = "pairs",
) -> tuple[FakeExecutor, int | None, str]:
    manifest = Manifest.open(directory, {"name": name})
    box: list = []
    executor = FakeExecutor(directory, box, **executor_args)
    stream = io.StringIO()
    scheduler = CellScheduler(
        manifest, lambda: NO_CUDA, retry_failed=retry_failed, stream=stream, execute=executor
    )
    box.append(scheduler)
    return executor, scheduler.run(cells), stream.getvalue()


def test_resume_after_an_interrupt_skips_completed_cells(tmp_path):
    spec = spec_of(PAIRWISE, tmp_path)
    cells = expand(spec, spec.presets["tiny"], "cpu")
    out = tmp_path / "exp"
    first, signum, _ = run_with(out, cells, {"interrupt_at": 3})
    assert signum == signal.SIGINT and first.calls == ["x-fcn-r1", "x-gemm-r1", "s-fcn+gemm-r1"]
    saved = json.loads((out / "cells.json").read_text())
    assert [(c["id"], c["status"]) for c in saved["cells"]] == [
        ("x-fcn-r1", OK),
        ("x-gemm-r1", OK),
        ("s-fcn+gemm-r1", INTERRUPTED),
    ]
    assert saved["cells"][0]["run"] == "runs/x-fcn-r1"

    second, signum, log = run_with(out, cells, {})
    assert signum is None and second.calls == [
        "s-fcn+gemm-r1",
        "x-fcn-r2",
        "x-gemm-r2",
        "s-fcn+gemm-r2",
    ]
    assert "[1/6] x-fcn-r1: ok: done earlier" in log and "[6/6] s-fcn+gemm-r2: ok in 0:01" in log
    assert "\x1b[" not in log

    third, _, _ = run_with(out, cells, {})
    assert third.calls == []


def test_failed_cells_are_recorded_and_the_sweep_goes_on(tmp_path):
    spec = spec_of(PAIRWISE, tmp_path)
    cells = expand(spec, spec.presets["tiny"], "cpu")[:3]
    out = tmp_path / "exp"
    first, _, log = run_with(out, cells, {"fail": "x-gemm-r1"})
    assert first.calls == ["x-fcn-r1", "x-gemm-r1", "s-fcn+gemm-r1"]
    assert (
        "x-gemm-r1: failed in 0:01: OOM" not in log
        and "x-gemm-r1: failed: OOM: A (fcn): out of memory" in log
    )
    again, _, _ = run_with(out, cells, {})
    assert again.calls == []
    retried, _, _ = run_with(out, cells, {}, retry_failed=True)
    assert retried.calls == ["x-gemm-r1"]


def test_a_changed_setting_runs_the_cells_again(tmp_path):
    spec = spec_of(PAIRWISE, tmp_path)
    out = tmp_path / "exp"
    run_with(out, expand(spec, spec.presets["tiny"], "cpu")[:3], {})
    longer = spec_of(PAIRWISE.replace("seconds = 4", "seconds = 5"), tmp_path)
    again, _, _ = run_with(out, expand(longer, longer.presets["tiny"], "cpu")[:3], {})
    assert again.calls == ["x-fcn-r1", "x-gemm-r1", "s-fcn+gemm-r1"]


def test_a_manifest_of_another_experiment_is_refused(tmp_path):
    Manifest(tmp_path, {"name": "other"}).save()
    with pytest.raises(UsageError, match="holds experiment 'other'"):
        Manifest.open(tmp_path, {"name": "pairs"})


def test_cuda_cells_are_skipped_without_cuda(tmp_path):
    spec = spec_of(COST, tmp_path)
    cells = expand(spec, spec.presets["default"], "cpu")
    executor, _, log = run_with(tmp_path / "exp", cells, {}, name=spec.name)
    assert executor.calls == ["x-fcn-cpu-r1"]
    assert "x-fcn-cuda-r1: skipped: needs CUDA: no NVIDIA driver" in log
    saved = json.loads((tmp_path / "exp" / "cells.json").read_text())
    assert saved["cells"][1]["status"] == SKIPPED


def test_progress_on_a_terminal_redraws_one_line_and_honours_no_color(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("NO_COLOR", "1")
    stream = Tty()
    progress = Progress(2, 10.0, stream)
    progress.start("x-fcn-r1", 5.0)
    progress.finish("ok", 9.0)
    text = stream.getvalue()
    assert (
        "\r" in text
        and "ETA" in text
        and "[1/2] x-fcn-r1: ok in 0:09" in text
        and "\x1b[32m" not in text
    )
    assert progress.extra == 4.0 and progress.eta() == pytest.approx(5.0 + 4.0)


# --- pieces the cell scheduler and reports rely on -----------------------------------------------------


def test_steps_tail_reads_only_complete_lines_and_measures_the_overlap(tmp_path):
    path = tmp_path / "steps.csv"
    header = "process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s\n"
    path.write_text(
        header
        + "A,1,0,1.0,0.1,64,1,0,\nA,1,1,2.0,0.1,64,0,0,\nA,1,2,5.0,0.1,64,0,0,\nB,2,0,3.0,0.1,,0"
    )
    tail = StepsTail(path)
    tail.poll()
    assert tail.measured(("A",)) == 3.0 and not tail.started(("A", "B"))
    with open(path, "a") as f:
        f.write(",0,\nB,2,1,6.5,0.1,,0,0,\nA,1,3,7.0,0.1,64,0,0,\n")
    tail.poll()
    assert tail.started(("A", "B")) and tail.measured(("A", "B")) == pytest.approx(6.5 - 3.0)


def test_failure_reason_names_out_of_memory():
    oom = WorkloadRecord(
        "A",
        spec="resnet50",
        exit_status=1,
        tail="Traceback...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB",
    )
    assert failure_reason(oom).startswith("OOM: A (resnet50): torch.OutOfMemoryError")
    assert (
        failure_reason(WorkloadRecord("B", spec="fcn", exit_status=-9, tail=""))
        == "B (fcn) exited with status -9"
    )


def test_similarities():
    assert weighted_jaccard({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}) == 1.0
    assert weighted_jaccard({"a": 1.0}, {"b": 1.0}) == 0.0
    assert weighted_jaccard({"a": 0.75, "b": 0.25}, {"a": 0.25, "b": 0.75}) == pytest.approx(
        0.5 / 1.5
    )
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)


def test_speedscope_and_operator_profiles_are_read(tmp_path):
    speedscope = {
        "shared": {
            "frames": [
                {"name": "main", "file": "/x/train.py", "line": 1},
                {"name": "step", "file": "/x/train.py", "line": 9},
            ]
        },
        "profiles": [
            {"type": "sampled", "samples": [[0, 1], [0, 1], [0]], "weights": [0.01, 0.01, 0.01]}
        ],
    }
    (tmp_path / "p.json").write_text(json.dumps(speedscope))
    rec = read_speedscope(tmp_path / "p.json", "fcn", None)
    assert rec.self_s == pytest.approx({"step (train.py:9)": 0.02, "main (train.py:1)": 0.01})
    assert rec.total_s["main (train.py:1)"] == pytest.approx(0.03)
    ops = {
        "steps": 10,
        "device_times": False,
        "device_note": "device times need CUDA",
        "ops": [
            {"name": "aten::mm", "calls": 30, "self_cpu_us": 900.0, "self_device_us": 0.0},
            {"name": "Optimizer.step", "calls": 10, "self_cpu_us": 50.0, "self_device_us": 0.0},
        ],
    }
    (tmp_path / "o.json").write_text(json.dumps(ops))
    profile = read_profile(tmp_path / "o.json", "fcn", "gemm")
    assert (
        profile.cpu_us == {"aten::mm": 900.0} and profile.steps == 10 and profile.partner == "gemm"
    )


# --- reports from synthetic runs with known answers ---------------------------------------------


def context_for(directory: Path, spec, preset: str, cells: list[Cell]) -> Context:
    return Context(
        spec,
        spec.presets[preset],
        preset,
        "cpu",
        cells,
        Manifest.open(directory, {"name": spec.name}),
    )


def test_pairwise_report_fills_the_matrix_and_traces_every_value(tmp_path):
    spec = spec_of(PAIRWISE.replace("repeats = 2", "repeats = 1"), tmp_path)
    cells = expand(spec, spec.presets["tiny"], "cpu")
    out = tmp_path / "exp"
    run_with(out, cells, {})
    ctx = context_for(out, spec, "tiny", cells)
    text = write_results(ctx).read_text()
    assert "| **fcn** | – | [2.00 (" in text and "](pairs/fcn+gemm/report.md)" in text
    assert "| [fcn+gemm](pairs/fcn+gemm/report.md) | 2.00 (" in text and "1.00 (" in text
    assert "4.00 vs 4.00" in text
    for cell in cells:
        assert f"| {cell.id} | ok | [{cell.id}](runs/{cell.id}) |" in text
    for name in (
        "slowdown_heatmap.png",
        "stp.png",
        "slowdown_matrix.csv",
        "stp.csv",
        "pairs/fcn+gemm/report.md",
    ):
        assert (out / name).is_file(), name
    matrix = pd.read_csv(out / "slowdown_matrix.csv")
    assert matrix["slowdown"].round(2).tolist() == [2.0, 2.0]
    assert matrix["shared_runs"].tolist() == ["runs/s-fcn+gemm-r1"] * 2
    # r = 2 for both, so STP = 1/2 + 1/2 = 1 exactly: an interval on 1 cannot say that sharing pays or loses
    assert (
        "- **fcn+gemm**: cannot tell whether sharing pays: together they do 1.00× the work of one alone "
        "(STP 1.00 [1.00, 1.00]), an interval that straddles 1; fcn runs 2.0× slower"
    ) in text
    assert (
        "fcn runs 2.0× slower" in text and "Intervals cover the noise within one run only" in text
    )
    assert {
        "cause",
        "gpu_share",
        "link_share",
        "cpu_share",
        "unexplained_share",
        "evidence",
    } <= set(matrix.columns)


def test_sweep_report_shows_failed_points_and_rates(tmp_path):
    spec = spec_of(SWEEP, tmp_path)
    cells = expand(spec, spec.presets["default"], "cpu")
    out = tmp_path / "exp"
    run_with(out, cells, {"fail": cells[1].id}, name=spec.name)
    text = write_results(context_for(out, spec, "default", cells)).read_text()
    assert "| synthetic |  | 16 | 10.00 (" in text and "| 100.0 (" in text
    assert "| synthetic |  | 64 | failed: OOM: A (fcn): out of memory |" in text
    assert (out / "sweep.png").is_file() and (out / "sweep.csv").is_file()


def test_device_cost_report_prices_the_cpu_and_says_the_gpu_needs_a_gpu(tmp_path):
    spec = spec_of(COST, tmp_path)
    cells = expand(spec, spec.presets["default"], "cpu")
    out = tmp_path / "exp"
    run_with(out, cells, {}, name=spec.name)
    text = write_results(context_for(out, spec, "default", cells)).read_text()
    assert (
        "| fcn | cpu | 10.00 (" in text
        and "| 100.0 (" in text
        and "| 0.5 | 0.0139 (0.0139–0.0139) |" in text
    )
    assert (
        "the GPU side needs a GPU (skipped: needs CUDA: no NVIDIA driver on this machine)" in text
    )


def test_the_experiment_process_never_imports_torch_or_textual():
    modules = [
        *(
            f"runner.{m}"
            for m in ("cellrun", "cells", "spec", "manifest", "pyspy", "device", "progress")
        ),
        "study.report",
    ]
    code = "; ".join(
        ["import gpumon.commands.experiment", *(f"import gpumon.experiments.{m}" for m in modules)]
    )
    code += "; import sys; print('torch' in sys.modules, 'textual' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "False False", done.stderr


def test_missing_ptrace_permission_is_a_clear_reason_not_a_crash(tmp_path, monkeypatch):
    fake = tmp_path / "py-spy"
    fake.write_text(
        "#!/bin/sh\necho 'Error: Permission Denied: Try running again with elevated permissions' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(pyspy, "find_py_spy", lambda: str(fake))
    found = pyspy.check_pyspy()
    assert not found.usable and "SYS_PTRACE" in found.problem and "ptrace_scope=0" in found.problem
    monkeypatch.setattr(pyspy, "find_py_spy", lambda: None)
    assert pyspy.check_pyspy().problem == "py-spy is not installed (pip install py-spy)"
