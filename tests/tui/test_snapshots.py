"""Snapshots of the main screens at 80x24 and 120x40, fed by replays of generated runs (deterministic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumon.tui.app import ViewerApp
from gpumon.tui.screens.replay import ReplayScreen, open_replay
from gpumon.tui.screens.runs import RunsScreen
from tests.tui.conftest import feed_four_gpus
from tests.helpers import wait_until
from tests.tracegen import exclusive, staggered_pair

SIZES = [(80, 24), (120, 40)]


def _replay(root: Path, t: float) -> ViewerApp:
    source, feed = open_replay(root)
    source.seek(t)
    return ViewerApp(ReplayScreen(source, feed, play=False))


async def _first_frame(pilot) -> None:
    await wait_until(
        pilot, lambda: getattr(pilot.app.screen, "frames", 0) > 0, what="the first frame"
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_host_only(snap_compare, tmp_path, size):
    app = _replay(staggered_pair(tmp_path / "run", crash_b=True), 45.0)
    assert snap_compare(app, terminal_size=size, run_before=_first_frame)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_gpu_box(snap_compare, tmp_path, size):
    app = _replay(staggered_pair(tmp_path / "run", gpu=True), 30.0)
    assert snap_compare(app, terminal_size=size, run_before=_first_frame)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help(snap_compare, tmp_path, size):
    app = _replay(staggered_pair(tmp_path / "run"), 20.0)

    async def open_help(pilot) -> None:
        await _first_frame(pilot)
        await pilot.press("question_mark")
        await wait_until(
            pilot, lambda: type(pilot.app.screen).__name__ == "HelpScreen", what="help"
        )

    assert snap_compare(app, terminal_size=size, run_before=open_help)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_runs(snap_compare, tmp_path, monkeypatch, size):
    """The runs screen over a runs directory in this test's own tmp dir (named relatively, so the title is stable)."""
    monkeypatch.chdir(tmp_path)
    runs = Path("runs")
    exclusive(runs / "20261122-113000-fcn-alone", "A", 40.0)
    exclusive(runs / "20261122-113100-gemm-alone", "A", 25.0, "gemm:preset=tiny")
    staggered_pair(runs / "20261122-114000-fcn-gemm")
    app = _replay(runs / "20261122-114000-fcn-gemm", 1.0)

    async def open_runs(pilot) -> None:
        await _first_frame(pilot)
        screen = RunsScreen(runs)
        await pilot.app.push_screen(screen)
        await wait_until(pilot, lambda: len(screen.summaries) == 3, what="the runs")
        await pilot.press("m", "down", "m")

    assert snap_compare(app, terminal_size=size, run_before=open_runs)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_shared_box(snap_compare, tmp_path, size):
    """A colleague's job and a process a PID namespace hides share the GPU: the process table and the status mark."""
    app = _replay(staggered_pair(tmp_path / "run", gpu=True, others=True), 30.0)
    assert snap_compare(app, terminal_size=size, run_before=_first_frame)


def _four_gpus(root: Path, t: float) -> ViewerApp:
    source, feed = open_replay(root)
    source.seek(t)
    feed_four_gpus(feed.model, t)
    return ViewerApp(ReplayScreen(source, feed, play=False))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_four_gpus(snap_compare, tmp_path, size):
    """A box with four GPUs: one overview line each above the jobs' GPU's panel (the replayed run, plus the overview
    records the sampler publishes on such a box: they are shown live, not recorded), g offered in the footer."""
    app = _four_gpus(staggered_pair(tmp_path / "run", gpu=True), 30.0)
    assert snap_compare(app, terminal_size=size, run_before=_first_frame)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_monitor_four_gpus_another_shown(snap_compare, tmp_path, size):
    """g twice: GPU 2's panel (the overview's readings of it, its note instead of GPM, no process table)."""
    app = _four_gpus(staggered_pair(tmp_path / "run", gpu=True), 30.0)

    async def press_g(pilot) -> None:
        await _first_frame(pilot)
        await pilot.press("g", "g")
        await wait_until(
            pilot,
            lambda: "GPU 2" in str(pilot.app.screen.query_one("#device").border_title),
            what="GPU 2",
        )

    assert snap_compare(app, terminal_size=size, run_before=press_g)
