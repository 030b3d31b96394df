"""A shared GPU: a real process gpumon did not start, listed by the fake NVML, is recorded as another GPU process."""

from __future__ import annotations

import getpass
import json
import signal
import subprocess
import sys
from pathlib import Path

import shlex
import textwrap

import psutil
import pytest

from gpumon.core.records.model import OTHER_COLUMNS
from gpumon.core.store.trace import load_run
from tests.fakenvml import build as fake
from tests.helpers import gpumon, only_run, recorded, run_until, steps_span

needs_cc = pytest.mark.skipif(
    fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml"
)
# Someone else's job: it steps forever until the test ends it (gpumon never signals it).
STEPPER = "import time\nwhile True:\n    sum(range(2000))\n    time.sleep(0.01)\n"
DATA = Path(__file__).resolve().parents[1] / "data"
# The pair: probe steppers that start in a fraction of a second, so the shared window has steps on any machine
# (a torch workload started at the stagger on a loaded 2-core box can spend the whole rest of the run warming up).
JOB = textwrap.dedent(
    """
    import time
    from gpumon import probe
    while True:
        time.sleep(0.02)
        probe.step(samples=8)
    """
)


@pytest.fixture(scope="module")
def stepper():
    proc = subprocess.Popen([sys.executable, "-c", STEPPER])
    yield proc
    proc.kill()
    proc.wait()


def scenario(foreign: int) -> str:
    return f"""
        driver 550.54.15
        device name="NVIDIA Fake H100" uuid=GPU-shared mem_total_mib=81559 gpu_util=100 mem_used_mib=9000
        proc children_of=self mem_mib=321 sm_util=40
        proc pid={foreign} mem_mib=2048 sm_util=30
    """


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory, stepper: subprocess.Popen) -> Path:
    """One staggered pair captured while the stepper, which gpumon did not start, uses the (fake) GPU."""
    if fake.compiler() is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml")
    tmp = tmp_path_factory.mktemp("shared_box")
    lib = fake.build(tmp / "lib")
    env = fake.environment(lib, fake.write_scenario(tmp / "scenario.txt", scenario(stepper.pid)))
    runs = tmp / "runs"
    job = shlex.join([sys.executable, "-c", JOB])
    # until B has stepped beside A for 2 s and the other process was seen at 5 process ticks
    result = run_until(
        ["--cmd", job, "--cmd", job, "--stagger", "4", "--headless"],
        runs,
        env=env,
        what="2 s of B's steps and 5 ticks of the other process",
        enough=lambda: steps_span(runs, "B")[1] >= 2.0 and len(recorded(runs, "gpu_others")) >= 5,
    )
    assert result.returncode == 128 + signal.SIGINT, result.stderr
    (tmp / "stderr.txt").write_text(result.stderr)
    return only_run(runs)


def test_capture_records_the_other_gpu_process(
    capture: Path, stepper: subprocess.Popen, tmp_path: Path
) -> None:
    run = load_run(capture)
    others = run.others()
    assert len(others) >= 5 and set(others["pid"]) == {
        stepper.pid
    }  # the jobs' own PIDs are not "others"
    assert set(others["user"]) == {getpass.getuser()}
    assert set(others["command"]) == {psutil.Process(stepper.pid).name()}
    assert (others["gpu_mem_mib"] == 2048).all()
    assert (
        (others["rss_mib"] > 1).all()
        and (others["elapsed_s"] > 0).all()
        and others["cpu_pct"].notna().all()
    )
    assert (
        others["sm_pct"].notna().all()
        and (others["sm_pct"] <= 30).all()
        and (others["sm_pct"] > 0).all()
    )
    procs = run.processes()
    jobs = procs[procs.process.isin(["A", "B"])]["gpu_sm_util"]
    assert (
        jobs.notna().all() and (jobs <= 40).all()
    )  # 40 + 40 + 30 > 100: all three scaled together
    assert stepper.poll() is None  # gpumon left it running
    stderr = (capture.parents[1] / "stderr.txt").read_text()
    notice = f"gpumon: another process is on the GPU: pid {stepper.pid} ({getpass.getuser()}, "
    assert stderr.count(notice) == 1, stderr  # said once, live

    exported = gpumon("export", str(run.path), "--csv", str(tmp_path / "csv"))
    assert exported.returncode == 0, exported.stderr
    import pandas as pd

    others = pd.read_csv(
        tmp_path / "csv" / "gpu_others.csv"
    )  # the export adds the wall clock beside t
    assert others.drop(columns="wall_epoch_s").equals(pd.read_csv(run.path / "gpu_others.csv"))


def test_compare_says_the_pair_is_not_clean(capture: Path, stepper: subprocess.Popen) -> None:
    command = psutil.Process(stepper.pid).name()
    text = gpumon("compare", "--shared", str(capture))
    assert text.returncode == 0, text.stderr
    assert f"pid {stepper.pid} ({getpass.getuser()}, {command}) on the GPU for" in text.stdout
    assert "so the pair is not clean" in text.stdout
    assert "so the baseline is not clean" in text.stdout  # A's exclusive phase had it too
    assert (
        f"disturbed: pid {stepper.pid} ({getpass.getuser()}, {command}) also used the GPU"
        in text.stdout
    )

    as_json = gpumon("compare", "--shared", str(capture), "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    found = {d["role"]: d for d in data["pair"]["disturbed_by"]}
    assert set(found) == {"baseline", "pair"}
    other = found["pair"]
    assert (
        other["pid"] == stepper.pid
        and other["command"] == command
        and other["user"] == getpass.getuser()
    )
    assert other["gpu_mem_mib"] == 2048 and other["share"] >= 0.9 and other["seconds"] > 0
    assert "disturbed:" in data["summary"]


def test_a_run_recorded_before_gpu_others_still_reads() -> None:
    run = load_run(DATA / "cpu_same_core" / "x-fcn")
    assert not (run.path / "gpu_others.csv").exists()
    assert run.others().empty and list(run.others().columns) == list(OTHER_COLUMNS)


@needs_cc
@pytest.mark.parametrize("gpu", ["99", "GPU-not-here"])
def test_a_gpu_the_box_lacks_is_refused_before_anything_starts(tmp_path: Path, gpu: str) -> None:
    lib = fake.build(tmp_path / "lib")
    env = fake.environment(lib, fake.write_scenario(tmp_path / "scenario.txt", scenario(999999)))
    runs = tmp_path / "runs"
    result = gpumon(
        "run",
        "gemm",
        "--headless",
        "--duration",
        "2",
        "--device",
        "cpu",
        "--gpu",
        gpu,
        "--out",
        str(runs),
        env=env,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        f"gpumon: error: --gpu {gpu}"
    ), result.stderr
    assert "1 GPU(s) found by NVML" in result.stderr
    assert not runs.exists()


def test_monitor_table_lists_it(capture: Path, stepper: subprocess.Popen) -> None:
    """The process table drawn from that capture: the stepper dimmed among our marked jobs, and the status mark."""
    from gpumon.tui.screens.replay import open_replay
    from gpumon.tui.widgets.processes import render_table

    source, feed = open_replay(capture)
    source.seek(6.0)  # both jobs running, the stepper beside them
    view = feed.model.view(feed.now())
    marks = {row.mark: row for row in view.processes}
    assert set(marks) == {"A", "B", ""} and view.others_on_gpu == 1
    other = marks[""]
    assert (
        other.pid == stepper.pid
        and other.gpu_mem_mib == 2048
        and other.command == psutil.Process(stepper.pid).name()
    )
    text = render_table(view.processes, 120)
    line = next(span for span in text.split("\n") if str(stepper.pid) in span.plain)
    assert (
        [s.style for s in line.spans] == ["dim"]
        and "2.0G" in line.plain
        and getpass.getuser() in line.plain
    )


def test_an_experiment_marks_the_pair(capture: Path, stepper: subprocess.Popen) -> None:
    """The experiments' pair table (as `gpumon experiment` writes it) marks the pair the stepper disturbed."""
    from gpumon.analysis.compare import compare
    from gpumon.experiments.study.pairwise import Pair, pair_rows

    comparison = compare([], [load_run(capture)])
    (row,) = pair_rows([Pair("fcn", "gemm", [], [], comparison=comparison)])
    assert (
        f"⚠ disturbed by pid {stepper.pid} ({getpass.getuser()}, {psutil.Process(stepper.pid).name()})"
        in row[-1]
    )
