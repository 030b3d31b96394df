"""Runs screen (replay, mark, compare), replay playback, pause, output toggle and NO_COLOR, on generated runs."""

from __future__ import annotations

from gpumon.tui.app import ViewerApp
from gpumon.tui.screens.compare import CompareScreen
from gpumon.tui.screens.replay import ReplayScreen, open_replay
from gpumon.tui.screens.runs import MARK, RunsScreen
from gpumon.tui.widgets.output import ChildOutput
from tests.tui.conftest import run_async
from tests.helpers import wait_until
from tests.tracegen import exclusive, staggered_pair


def _runs(root):
    exclusive(root / "20261122-113000-fcn-alone", "A", 40.0)
    exclusive(root / "20261122-113100-gemm-alone", "A", 25.0, "gemm:preset=tiny")
    staggered_pair(root / "20261122-114000-fcn-gemm")
    return root


@run_async
async def test_runs_screen_replays_a_run_and_compares_the_marked_ones(tmp_path):
    runs = _runs(tmp_path / "runs")
    source, feed = open_replay(runs / "20261122-114000-fcn-gemm")
    source.seek(1.0)
    app = ViewerApp(ReplayScreen(source, feed, play=False))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = RunsScreen(runs)
        await app.push_screen(screen)
        await wait_until(pilot, lambda: len(screen.summaries) == 3, what="the runs")
        await pilot.press("c")
        assert "mark at least two runs" in str(screen.query_one("#runs-message").render())
        await pilot.press("m", "down", "m", "down", "m")
        assert screen.marked == set(screen.summaries)
        assert screen.query_one("#runs-table").get_cell("20261122-113000-fcn-alone", "mark") == MARK
        await pilot.press("c")
        compare = await wait_until(
            pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen, what="compare"
        )
        await wait_until(pilot, lambda: compare.lines, 60, "the analysis")
        assert any("STP" in line for line in compare.lines), compare.lines
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, what="back to the runs")

        await pilot.press("enter")
        replay = await wait_until(
            pilot,
            lambda: (
                isinstance(app.screen, ReplayScreen) and app.screen is not screen and app.screen
            ),
            what="replay",
        )
        await pilot.press("end")
        await wait_until(
            pilot,
            lambda: (
                replay.source.finished
                and replay.latest is not None
                and replay.latest.t == replay.source.end_t
            ),
            30,
            "the end",
        )
        await wait_until(
            pilot, lambda: replay.latest.workload("B").state == "exited 0", what="B's end"
        )
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, what="back to the runs")


@run_async
async def test_pause_freezes_the_display_and_o_hides_the_output(tmp_path):
    source, feed = open_replay(staggered_pair(tmp_path / "run"))
    source.seek(5.0)
    app = ViewerApp(ReplayScreen(source, feed, play=False))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await wait_until(pilot, lambda: screen.frames > 0, what="a frame")
        await pilot.press("p")
        assert "PAUSED" in screen.query_one("#status").plain
        frames = screen.frames
        source.seek(20.0)
        screen.pump.poke()
        await wait_until(pilot, lambda: screen.latest.t == 20.0, what="a new view")
        assert screen.frames == frames, "a paused screen does not draw"
        await pilot.press("p")
        assert screen.frames == frames + 1 and "PAUSED" not in screen.query_one("#status").plain
        await pilot.press("o")
        assert not screen.query_one(ChildOutput).display


def test_no_color_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    source, feed = open_replay(staggered_pair(tmp_path / "run"))
    assert ViewerApp(ReplayScreen(source, feed, play=False)).no_color
