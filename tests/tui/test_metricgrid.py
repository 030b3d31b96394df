"""MetricGrid (the device panel's graphs in one widget): two cells a line as a two-column grid lays them out, and a
frame renders only the lines whose cells changed."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gpumon.tui.view import Series
from gpumon.tui.widgets.lines import MetricRow
from gpumon.tui.widgets.metricgrid import MetricGrid, column_widths
from tests.tui.conftest import run_async

CELLS = (("util", "GPU util"), ("mem", "Mem util"), ("power", "Power"))


class _GridApp(App):
    CSS = "MetricGrid { width: 61; } MetricRow { height: 1; }"

    def compose(self) -> ComposeResult:
        yield MetricGrid(CELLS)
        yield MetricRow("GPU util", id="alone")


def test_columns_split_as_a_two_column_grid_does():
    assert column_widths(120) == (59, 59)
    assert column_widths(61) == (29, 30)  # the left one rounded down
    assert column_widths(1) == (0, 0)


@run_async
async def test_cells_two_to_a_line_as_a_metric_row_draws_each():
    app = _GridApp()
    async with app.run_test(size=(70, 4)) as pilot:
        grid = app.query_one(MetricGrid)
        alone = app.query_one("#alone", MetricRow)
        alone.styles.width = 29  # the left column's width: the same cell drawn by a MetricRow
        series = Series((10.0, 50.0, 100.0), 100.0, "%")
        grid.show("util", "90%", series)
        grid.show("mem", "30%")
        grid.show("power", "299 W", series)
        alone.show("90%", series)
        await pilot.pause()
        assert grid.size.height == 2
        first, second = grid.render_line(0).text, grid.render_line(1).text
        assert first[:29] == alone.render_line(0).text
        assert first[29:31] == "  " and first[31:].startswith("Mem util") and len(first) == 61
        assert second.startswith("Power") and second[29:] == " " * 32  # no cell right of the last
        assert grid.value("power") == "299 W"


@run_async
async def test_a_frame_renders_only_the_lines_whose_cells_changed():
    app = _GridApp()
    async with app.run_test(size=(70, 4)) as pilot:
        grid = app.query_one(MetricGrid)
        series = Series((10.0, 50.0), 100.0, "%")
        for key, _ in CELLS:
            grid.show(key, "1", series)
        await pilot.pause()
        rendered: list[
            int
        ] = []  # the lines built again (a line that did not change is its cached strip)
        build_line = grid._build_line
        grid._build_line = lambda y, width: (rendered.append(y), build_line(y, width))[1]

        for key, _ in CELLS:  # the same again: nothing to draw
            grid.show(key, "1", series)
        await pilot.pause()
        assert rendered == []

        grid.show("power", "2", series)  # the second line's cell only
        await pilot.pause()
        assert rendered == [1]
        assert "2" in grid.render_line(1).text[:29]


@run_async
async def test_cells_shown_together_repaint_their_changed_lines_with_one_refresh():
    app = _GridApp()
    async with app.run_test(size=(70, 4)) as pilot:
        grid = app.query_one(MetricGrid)
        series = Series((10.0, 50.0), 100.0, "%")
        grid.show_all([(key, "1", series) for key, _ in CELLS])
        await pilot.pause()
        refreshed: list[tuple[int, ...]] = []
        refresh = grid.refresh
        grid.refresh = lambda *regions, **kw: (  # type: ignore[method-assign]
            refreshed.append(tuple(r.y for r in regions)),
            refresh(*regions, **kw),
        )[1]

        grid.show_all([(key, "1", series) for key, _ in CELLS])  # nothing changed: no refresh
        assert refreshed == []
        grid.show_all(
            [(key, "2", series) for key, _ in CELLS]
        )  # every cell: both lines, one refresh
        assert refreshed == [(0, 1)]
        await pilot.pause()
        assert "2" in grid.render_line(0).text[:29] and "2" in grid.render_line(1).text[:29]
