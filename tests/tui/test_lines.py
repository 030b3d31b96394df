"""MetricRow repaints only the lines that changed, and what is on screen is always the latest value and history."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gpumon.tui.view import Series
from gpumon.tui.widgets.lines import MetricRow
from tests.tui.conftest import run_async


class _RowApp(App):
    CSS = "MetricRow { height: 4; width: 40; }"

    def compose(self) -> ComposeResult:
        yield MetricRow("iter/s")


def _screen_lines(app: App) -> list[str]:
    """The screen as the terminal would get it now, from the widgets' cached lines where they are clean."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


@run_async
async def test_only_changed_lines_repaint_and_the_screen_shows_the_latest_history():
    app = _RowApp()
    async with app.run_test(size=(40, 6)) as pilot:
        row = app.query_one(MetricRow)
        row.show("10", Series((10.0,) * 19, 20.0, "it/s"))
        await pilot.pause()
        before = _screen_lines(app)
        assert "10" in before[0] and "0–20 it/s" in before[1]

        repainted: list[tuple] = []
        refresh = row.refresh
        row.refresh = lambda *regions, **kw: (repainted.append(regions), refresh(*regions, **kw))[1]
        row.show("10", Series((10.0,) * 18 + (20.0,), 20.0, "it/s"))  # only the newest column grows
        await pilot.pause()
        lines = [region.y for regions in repainted for region in regions]
        assert lines == [0, 1], f"the top two graph lines changed, nothing else: {lines}"
        after = _screen_lines(app)
        assert after[0][-1] == "█" and before[0][-1] == " ", "the new column reached the screen"
        assert after[2:4] == before[2:4]

        repainted.clear()
        row.show("12", Series((10.0,) * 18 + (20.0,), 50.0, "it/s"))  # new value and scale
        await pilot.pause()
        after = _screen_lines(app)
        assert "12" in after[0] and "0–50 it/s" in after[1], after
