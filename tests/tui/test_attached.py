"""The attached viewer (``gpumon attach``) driven by Pilot: a run being written, its runner a real process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpumon.core.store.recorder import create_run_dir
from gpumon.core.store.runmeta import WorkloadRecord
from gpumon.core.store.runner import RunnerInfo
from gpumon.core.store.trace import TABLES
from gpumon.tui.app import ViewerApp
from gpumon.tui.screens.attached import AttachedScreen, open_follow
from gpumon.tui.screens.confirm import ConfirmScreen
from gpumon.tui.widgets.lines import TextLine
from tests.tracegen import cpu_run_meta, exclusive
from tests.tui.conftest import run_async
from tests.helpers import wait_until


RUNNER = """
import signal, sys, time
from pathlib import Path
from gpumon.core.store.runner import RunnerLock
signal.signal(signal.SIGTERM, lambda *_: print("SIGTERM", flush=True))  # a runner finalises before it exits
print("up", flush=True)
lock = RunnerLock.take(Path(sys.stdin.readline().strip()))  # what proves a runner: it holds the run's lock
print("locked", flush=True)
time.sleep(120)
"""


@pytest.fixture
def runner():
    """A real process standing in for the runner (the viewer must signal it only on x, y): prints what it gets."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "up\n"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _live_run(tmp_path: Path, runner: subprocess.Popen) -> Path:
    """A run mid-capture: run.json "recording" with A running, its runner ``runner`` (holding its lock), a baseline
    for A."""
    runner_pid = runner.pid
    baseline = exclusive(tmp_path / "baseline", "A", rate=40.0, spec="gemm")
    run_dir = create_run_dir(tmp_path / "runs", "gemm", time.localtime())
    runner.stdin.write(f"{run_dir}\n")
    runner.stdin.flush()
    assert runner.stdout.readline() == "locked\n"
    t0 = time.monotonic_ns() - 5_000_000_000  # the runner started 5 s ago
    workload = WorkloadRecord(
        "A", spec="gemm", kind="builtin", argv=[], pid=runner_pid, start_t=0.5, state="running"
    )
    meta = cpu_run_meta("gemm", t0, workload)
    meta.runner = RunnerInfo(
        runner_pid,
        psutil.Process(runner_pid).create_time(),
        0,
        "me",
        RunnerInfo.current().host,
        True,
    )
    meta.baselines = {"A": str(baseline)}
    (run_dir / "run.json").write_text(json.dumps(meta.to_json()))
    for table, columns in TABLES.items():
        (run_dir / f"{table}.csv").write_text(",".join(columns) + "\n")
    with open(run_dir / "steps.csv", "a") as f:
        f.writelines(
            f"A,{runner_pid},{i},{0.5 + 0.05 * i},0.05,256,{int(i <= 5)},0,\n" for i in range(1, 81)
        )
    return run_dir


def _finish(run_dir: Path) -> None:
    meta = json.loads((run_dir / "run.json").read_text())
    meta.update(status="complete", duration_s=4.6)
    meta["workloads"][0].update(state="stopped", stop_t=4.6, exit_status=-15)
    (run_dir / "run.json").write_text(json.dumps(meta))


def _viewer(run_dir: Path, **kw):
    """The attach viewer's app on ``run_dir``, its screen, and the follow source and feed it reads."""
    source, feed = open_follow(run_dir)
    screen = AttachedScreen(source, feed, **kw)
    return ViewerApp(screen), screen, source, feed


@run_async
async def test_the_viewer_follows_asks_before_stopping_and_stays_on_the_final_picture(
    tmp_path, runner
):
    run_dir = _live_run(tmp_path, runner)
    app, screen, source, feed = _viewer(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        status = lambda: screen.query_one("#status", TextLine).plain  # noqa: E731
        await wait_until(
            pilot,
            lambda: (
                f"runner pid {runner.pid}" in status()
                and screen.latest is not None
                and screen.latest.workloads[0].figures is not None
            ),
            what="the run followed",
        )
        assert "gpumon attach" in status()
        assert feed.model.baselines["A"][0] == pytest.approx(
            40.0, rel=0.05
        )  # run.json's --baseline, read back

        await pilot.press("x")
        await wait_until(
            pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation"
        )
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is screen, what="back without stopping")
        assert runner.poll() is None, "the viewer signalled the runner without a yes"

        await pilot.press("x")
        await wait_until(
            pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation"
        )
        await pilot.press("y")
        assert runner.stdout.readline() == "SIGTERM\n"

        _finish(run_dir)  # what the runner writes when it stops
        await wait_until(
            pilot, lambda: "ended: complete" in status(), what="the end of the run shown"
        )
        assert source.ended and source.now() == 4.6
        await pilot.press("q")
    assert app.return_value == 0


@run_async
async def test_quitting_the_viewer_never_signals_the_runner(tmp_path, runner):
    run_dir = _live_run(tmp_path, runner)
    app, _, source, feed = _viewer(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(
            pilot,
            lambda: source.status == "running" and feed.model.live.figures("A", 5.0).steps,
            what="steps",
        )
        await pilot.press("q")
    assert runner.poll() is None


@run_async
async def test_an_mps_run_is_predicted_and_labelled_as_mps(tmp_path, runner, monkeypatch):
    run_dir = _live_run(tmp_path, runner)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["share"] = {"mode": "mps", "threads": [30, 70], "existing_daemon": False}
    (run_dir / "run.json").write_text(json.dumps(meta))
    asked = []
    monkeypatch.setattr(
        "gpumon.tui.screens.attached.load_baselines", lambda model, runs, share: asked.append(share)
    )
    app, screen, _, _ = _viewer(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        status = lambda: screen.query_one("#status", TextLine).plain  # noqa: E731
        await wait_until(
            pilot, lambda: asked and "runner pid" in status(), what="the baselines loaded"
        )
        assert asked == ["mps"]  # the mode the prediction models, not the label "mps 30/70"
        assert "mps 30/70" in status()
        await pilot.press("q")


@run_async
async def test_the_viewers_own_baseline_replaces_the_runs_for_its_slot(tmp_path, runner):
    """``gpumon attach --baseline A=RUN``: a run started without (or with another) exclusive run is compared here."""
    run_dir = _live_run(tmp_path, runner)  # its own --baseline for A: 40 it/s
    mine = exclusive(tmp_path / "mine", "A", rate=80.0, spec="gemm")
    app, _, _, feed = _viewer(run_dir, baselines=(("A", str(mine)),))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "A" in feed.model.baselines, what="the baselines loaded")
        rate, label = feed.model.baselines["A"]
        assert rate == pytest.approx(80.0, rel=0.05) and label == f"baseline {mine.name}"
        await pilot.press("q")
    assert json.loads((run_dir / "run.json").read_text())["baselines"] == {
        "A": str(tmp_path / "baseline")
    }
