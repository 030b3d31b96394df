"""MetricRow repaints only the lines that changed, and what is on screen is always the latest value and history;
the line widgets' cells and styles, written out by hand; set_titles assigns only what changed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.color import Color
from textual.filter import ANSIToTruecolor, DimFilter, LineFilter, Monochrome, NoColor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from gpumon.tui.app import ViewerApp
from gpumon.tui.screens.replay import ReplayScreen, open_replay
from gpumon.tui.view import Series
from gpumon.tui.widgets.graph import axis_row
from gpumon.tui.widgets.lines import (
    LineWidget,
    Metric,
    MetricRow,
    TextBlock,
    TextLine,
    set_titles,
)
from tests.helpers import wait_until
from tests.tracegen import staggered_pair
from tests.tui.conftest import run_async
from tests.tui.test_text_strip import texts


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


# -- The cells and styles the line widgets draw, and what they repaint (gpumon/tui/widgets/lines.py) ------------------

CSS = """
TextLine { width: 10; height: 2; background: #102030; color: #c0c0c0; }
MetricRow { width: 40; height: 2; background: #000040; color: #ffffff; }
MetricRow > .metric--label { color: #808080; }
MetricRow > .metric--value { text-style: bold; }
MetricRow > .metric--graph { color: #00ff00; }
Static { border: round white; height: 3; }
MetricRow.alert { background: #400000; }
"""
LABEL, VALUE, BASE, GRAPH = (
    "#808080 on #000040",
    "bold #ffffff on #000040",
    "#ffffff on #000040",
    "#00ff00 on #000040",
)


class _StyledApp(App):
    CSS = CSS

    def compose(self) -> ComposeResult:
        yield TextLine(id="empty")
        yield TextLine(Text("ab", style="on #0000ff"), id="line")
        yield MetricRow("iter/s", id="row")
        yield MetricRow("SM clock", id="low")
        yield Static("box")


def _cells(strip) -> list[tuple[str, str]]:
    return [(segment.text, str(segment.style)) for segment in strip]


def _regions(widget) -> list:
    """Every region the widget asks to repaint from now on (all of them at once: the whole widget)."""
    asked: list = []
    refresh = widget.refresh
    widget.refresh = lambda *regions, **kw: (
        asked.extend(regions or ["all"]),
        refresh(*regions, **kw),
    )[1]
    return asked


@run_async
async def test_titles_are_set_only_when_they_change():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)) as pilot:
        box = app.query_one(Static)
        asked = _regions(box)  # each assignment repaints the whole widget
        set_titles(box, "A · fcn", "running")
        assert (box.border_title, box.border_subtitle, len(asked)) == ("A · fcn", "running", 2)
        set_titles(box, "A · fcn", "running")
        set_titles(box, "A · fcn")  # no subtitle: the one shown stays
        assert (box.border_title, box.border_subtitle, len(asked)) == ("A · fcn", "running", 2)
        set_titles(box, "B · gemm")
        assert (box.border_title, box.border_subtitle, len(asked)) == ("B · gemm", "running", 3)
        set_titles(box, "B · gemm", "")
        assert (box.border_title, box.border_subtitle, len(asked)) == ("B · gemm", "", 4)
        await pilot.pause()
        assert _screen_lines(app)[8].startswith("╭─ B · gemm ─")


@run_async
async def test_a_text_line_pads_with_its_texts_style_and_its_second_line_is_blank():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)) as pilot:
        empty, line = app.query_one("#empty", TextLine), app.query_one("#line", TextLine)
        assert empty.plain == "" and _cells(empty.render_line(0)) == [
            (" " * 10, "#c0c0c0 on #102030")
        ]
        assert (
            line.plain == "ab"
        )  # a Text given to the constructor is kept as it is, with its style
        assert _cells(line.render_line(0)) == [
            ("ab        ", "#c0c0c0 on #0000ff")
        ]  # the text's own background
        assert _cells(line.render_line(1)) == [(" " * 10, "#c0c0c0 on #102030")]  # the widget's
        asked = _regions(line)
        line.show(Text("ab", style="on #0000ff"))  # the same text: nothing to repaint
        assert asked == []
        line.show("plain words that run on")  # a str is made a Text
        assert asked == ["all"] and line.plain == "plain words that run on"
        await pilot.pause()
        assert _cells(line.render_line(0)) == [
            ("plain wor…", "#c0c0c0 on #102030")
        ]  # no end of line after it
        assert _screen_lines(app)[2][:10] == "plain wor…"


@run_async
async def test_a_metric_row_before_its_first_value_shows_its_label_and_scale():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)):
        row = app.query_one("#row", MetricRow)
        assert row.value == ""
        assert [line[:40] for line in _screen_lines(app)[4:6]] == [
            "iter/s".ljust(40),
            "0–1 · 18 s".rjust(21).ljust(40),  # its scale, and the 18 s its 18 columns show
        ]
        asked = _regions(row)
        row.show("")  # no value and no history, as before: nothing to repaint
        assert asked == []


@run_async
async def test_a_metric_row_draws_each_part_in_its_style():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)) as pilot:
        row = app.query_one("#row", MetricRow)
        row.show(
            "7", Series((5.0, 10.0), 10.0, "it/s")
        )  # 5 of 10 on two rows: half, the bottom row full
        await pilot.pause()
        assert _cells(row.render_line(0)) == [
            ("iter/s    ", LABEL),
            ("          7", VALUE),
            (" ", BASE),
            (" " * 17 + "█", GRAPH),
        ]
        assert _cells(row.render_line(1)) == [
            ("0–10 it/s · 18 s".rjust(21), LABEL),
            (" ", BASE),
            (" " * 16 + "██", GRAPH),
        ]
        assert _cells(row.render_line(2)) == [
            (" " * 40, BASE)
        ]  # past its rows: blank, in its own style
        row.styles.height = 3
        await pilot.pause()
        # 5 of 10 on three rows is 12 eighths: the bottom row full, the middle one half; 10 of 10 fills all three
        assert _cells(row.render_line(0))[3] == (" " * 17 + "█", GRAPH)
        assert _cells(row.render_line(1))[2] == (" " * 16 + "▄█", GRAPH)
        assert _cells(row.render_line(2)) == [
            ("last 18 s".rjust(21), LABEL),
            (" ", BASE),
            (" " * 16 + "██", GRAPH),
        ]
        assert _screen_lines(app)[6][:40] == "last 18 s".rjust(21) + " " + " " * 16 + "██"
        row.styles.height = 4  # room for a time axis: the last row, under three rows of graph
        await pilot.pause()
        assert row.render_line(2).text[:22] == " " * 22  # the axis says the time: no "last 18 s"
        assert _cells(row.render_line(3)) == [(" " * 22, BASE), (axis_row(18, 1.0), LABEL)]
        assert row.render_line(3).text == " " * 22 + "    -10s       now"


@run_async
async def test_a_metric_row_one_line_high_draws_its_graph_on_that_line():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)) as pilot:
        low = app.query_one("#low", MetricRow)
        low.styles.height = 1
        low.show(
            "1.98 GHz", Series((5.0,), 10.0, "MHz")
        )  # half of the top: four eighths of the one row
        await pilot.pause()
        assert _cells(low.render_line(0)) == [
            ("SM clock  ", LABEL),
            ("   1.98 GHz", VALUE),
            (" ", BASE),
            (" " * 17 + "▄", GRAPH),
        ]


@run_async
async def test_a_metric_row_narrower_than_its_label_and_value_is_cut_to_its_width():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)) as pilot:
        row = app.query_one("#row", MetricRow)
        row.show("123", Series((10.0,), 10.0, "it/s"))  # the top: both rows full
        row.styles.width = 15
        await pilot.pause()
        strip = row.render_line(0)
        assert strip.cell_length == 15 and strip.text == "iter/s         "
        assert row.render_line(1).text == "            0–1"
        row.styles.width = (
            30  # wider again: redrawn at the new width, the graph in the 8 cells after the value
        )
        await pilot.pause()
        assert row.render_line(0).text == "iter/s            123        █"
        assert _screen_lines(app)[4][:30] == "iter/s            123        █"


@run_async
async def test_a_metric_row_redraws_in_its_new_style():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)) as pilot:
        row = app.query_one("#row", MetricRow)
        row.show("7", Series((10.0,), 10.0, "it/s"))
        await pilot.pause()
        row.add_class("alert")  # a CSS rule now gives it another background
        await pilot.pause()
        assert _cells(row.render_line(0)) == [
            ("iter/s    ", "#808080 on #400000"),
            ("          7", "bold #ffffff on #400000"),
            (" ", "#ffffff on #400000"),
            (" " * 17 + "█", "#00ff00 on #400000"),
        ]


@run_async
async def test_a_metric_row_repaints_exactly_the_lines_that_changed():
    app = _StyledApp()
    async with app.run_test(size=(50, 12)) as pilot:
        row = app.query_one("#row", MetricRow)  # 40 wide, 2 high: a graph of 18 columns on 2 rows
        nan = float("nan")
        row.show("7", Series((nan,), 10.0, "it/s"))
        await pilot.pause()
        asked = _regions(row)

        def step(value: str, series: Series) -> list[Region]:
            asked.clear()
            row.show(value, series)
            return list(asked)

        assert step("8", Series((nan,), 10.0, "it/s")) == [Region(0, 0, 40, 1)]  # the value only
        assert step("8", Series((nan,), 20.0, "it/s")) == [Region(0, 1, 40, 1)]  # the scale only
        assert step("8", Series((nan,), 20.0, "it/s")) == []  # nothing
        assert step("8", Series((nan, 20.0), 20.0, "it/s")) == [
            Region(0, 0, 40, 1),
            Region(0, 1, 40, 1),
        ]  # the graph
        assert step("9", Series((nan, 5.0), 20.0, "it/s")) == [
            Region(0, 0, 40, 1),
            Region(0, 1, 40, 1),
        ]  # both
        assert step("9", Series((nan, 5.0), 40.0, "it/s")) == [
            Region(0, 1, 40, 1)
        ]  # the bottom row and the scale
        assert step("10", Series((nan, 10.0), 40.0, "it/s")) == [
            Region(0, 1, 40, 1),
            Region(0, 0, 40, 1),
        ]  # and the value
        await pilot.pause()
        assert [line[:40] for line in _screen_lines(app)[4:6]] == [
            "iter/s             10 " + " " * 18,
            "0–40 it/s · 18 s".rjust(21) + " " + " " * 17 + "▄",
        ]
        low = app.query_one("#low", MetricRow)
        low.styles.height = 1
        low.show("1", Series((nan,), 10.0, "MHz"))
        await pilot.pause()
        asked = _regions(low)
        low.show(
            "1", Series((nan,), 20.0, "MHz")
        )  # a one-line row shows no scale: nothing to repaint
        assert asked == []


@run_async
async def test_a_metric_row_rebuilds_only_the_rows_that_changed():
    """A frame where only the value changed builds the top row again, not the graph's other rows and its axis."""
    app = _RowApp()
    async with app.run_test(size=(40, 6)) as pilot:
        row = app.query_one(MetricRow)
        series = Series((10.0,) * 19, 20.0, "it/s")
        row.show("10", series)
        await pilot.pause()
        built: list[int] = []
        strip = row.metric.strip
        row.metric.strip = lambda y, styles: (built.append(y), strip(y, styles))[1]
        row.show("11", series)
        await pilot.pause()
        assert built == [0]
        assert _screen_lines(app)[0].startswith("iter/s             11")


class _BlockApp(App):
    CSS = "TextBlock { width: 10; height: 3; background: #102030; color: #c0c0c0; }"

    def compose(self) -> ComposeResult:
        yield TextBlock(pad_text=True, id="padded")
        yield TextBlock(id="plain")


@run_async
async def test_a_text_block_pads_each_line_as_a_text_line_and_repaints_only_the_lines_that_changed():
    """The workload panel's detail lines are one TextBlock (one widget for the compositor to render a frame), drawn
    as the TextLines they replaced were."""
    app = _BlockApp()
    async with app.run_test(size=(20, 8)) as pilot:
        padded, plain = app.query_one("#padded", TextBlock), app.query_one("#plain", TextBlock)
        lines = [Text("ab", style="on #0000ff"), Text("cd")]
        padded.show_lines(lines)
        plain.show_lines(lines)
        await pilot.pause()
        assert _cells(padded.render_line(0)) == [
            ("ab        ", "#c0c0c0 on #0000ff")
        ]  # as a TextLine
        assert _cells(plain.render_line(0))[-1] == ("        ", "on #102030")  # as a Static
        assert (padded.line(1), padded.line(2)) == ("cd", "")
        assert _cells(padded.render_line(2)) == [(" " * 10, "#c0c0c0 on #102030")]

        asked = _regions(padded)
        padded.show_lines([Text("ab", style="on #0000ff"), Text("cd")])  # the same: nothing
        padded.show_lines([Text("ab", style="on #0000ff"), Text("ce")])
        assert asked == [Region(0, 1, 10, 1)]  # the changed line, all of its width
        await pilot.pause()
        assert _screen_lines(app)[1][:10] == "ce        "


class _CountingBlock(TextBlock):
    looked_up = 0

    @property
    def rich_style(self):  # every ancestor's styles, walked again after each refresh
        self.looked_up += 1
        return super().rich_style


class _CountingApp(App):
    CSS = """
    TextBlock { width: 10; height: 3; background: #102030; }
    Screen.alert TextBlock { background: #400000; }
    """

    def compose(self) -> ComposeResult:
        yield _CountingBlock()


@run_async
async def test_the_style_is_looked_up_once_a_style_change_not_once_a_content_change():
    """A change of lines draws them without looking the style up again (most of what drawing a line of text cost); a
    change of style (here an ancestor's class; gpumon sets no style of a line widget in code) looks it up once, and the lines are drawn in it."""
    app = _CountingApp()
    async with app.run_test(size=(20, 5)) as pilot:
        block = app.query_one(_CountingBlock)
        block.show_lines([Text("a"), Text("b"), Text("c")])
        await pilot.pause()
        block.looked_up = 0
        block.show_lines([Text("d"), Text("e"), Text("f")])
        await pilot.pause()
        assert [block.render_line(y).text for y in range(3)] == [
            "d" + " " * 9,
            "e" + " " * 9,
            "f" + " " * 9,
        ]
        assert block.looked_up == 0
        app.screen.add_class("alert")  # an ancestor's class
        await pilot.pause()
        assert block.looked_up == 1
        assert _cells(block.render_line(0))[-1][1].endswith("on #400000")


class _BoxApp(App):
    CSS = """
    Screen { background: #000040; }
    #plain { width: 12; height: 3; background: #102030 50%; color: #c0c0c0; }
    #padded { width: 12; height: 3; padding: 0 1; background: #203040; }
    #boxed { width: 12; height: 3; padding: 1 1; }
    """

    def compose(self) -> ComposeResult:
        yield TextBlock(pad_text=True, id="plain")
        yield TextBlock(id="padded")
        yield TextBlock(id="boxed")


@run_async
async def test_a_line_widget_without_a_box_gives_its_lines_straight_and_as_textual_would():
    """No border, and padding at most left and right: the compositor gets ``render_line``'s strips, padded and
    filtered, without Textual's styles cache (its work on each line was half of a changed graph line's cost), and they
    are what that cache would have made. With padding above or below, Textual's cache draws it as before."""
    app = _BoxApp()
    async with app.run_test(size=(30, 12)) as pilot:
        blocks = [app.query_one(f"#{name}", TextBlock) for name in ("plain", "padded", "boxed")]
        for block in blocks:
            block.show_lines([Text("ab", style="bold"), Text("a longer line than fits")])
        await pilot.pause()
        cached: list[str | None] = []
        for block in blocks:
            render_widget = block._styles_cache.render_widget
            block._styles_cache.render_widget = lambda widget, crop, f=render_widget: (
                cached.append(widget.id),
                f(widget, crop),
            )[1]
        region = Region(0, 0, 12, 3)
        ours = [block.render_lines(region) for block in blocks]
        assert cached == [
            "boxed"
        ]  # the others straight from render_line; a box above or below: Textual's way
        for block, strips in zip(blocks, ours):
            textual = Widget.render_lines(block, region)
            assert [_cells(strip) for strip in strips] == [_cells(strip) for strip in textual], (
                block.id
            )
        assert [strip.text for strip in blocks[0].render_lines(Region(2, 1, 5, 1))] == ["longe"]
        assert [strip.text for strip in blocks[1].render_lines(Region(0, 1, 12, 1))] == [
            " a longer … "
        ]


@run_async
async def test_every_line_widget_of_the_monitor_draws_its_own_lines(tmp_path):
    """The monitor's graphs, detail lines, process table and one-line texts all skip Textual's styles cache (a padding
    above or below, a border or a tint given to one in CSS would silently put it back: observer_cost)."""
    source, feed = open_replay(staggered_pair(tmp_path / "run", gpu=True, others=True))
    source.seek(30.0)
    app = ViewerApp(ReplayScreen(source, feed, play=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot, lambda: getattr(app.screen, "frames", 0) > 0, what="the first frame"
        )
        shown = [widget for widget in app.screen.query(LineWidget) if widget.display]
        assert {type(widget).__name__ for widget in shown} >= {
            "TextLine",
            "MetricGrid",
            "MetricRow",
            "TextBlock",
            "ProcessTable",
            "InterferenceLine",
        }
        assert [widget for widget in shown if widget._plain_box() is None] == []


def _each_cell(strip) -> list[tuple[str, str]]:
    """Each cell's character and style (however the strip's segments split them)."""
    return [(char, str(segment.style)) for segment in strip for char in segment.text]


class _ShortLines(LineWidget):
    """A line widget whose lines are shorter than it is wide (a subclass may draw them so)."""

    def render_line(self, y: int) -> Strip:
        return Strip([Segment(f"l{y}", Style(bold=True))])


class _EveryBoxApp(App):
    CSS = """
    Screen { background: #000040; }
    LineWidget { width: 12; height: 3; background: #203040; color: #c0c0c0; }
    #left { padding: 0 0 0 2; }
    #right { padding: 0 3 0 0; }
    #top { padding: 1 0 0 0; }
    #bottom { padding: 0 0 1 0; }
    #hatched { hatch: right #ff0000; }
    #boxed { padding: 1 1; }
    """
    NAMES = ("plain", "left", "right", "top", "bottom", "hatched", "boxed")

    def compose(self) -> ComposeResult:
        for name in self.NAMES:
            yield TextBlock(pad_text=name != "hatched", id=name)
        yield _ShortLines(id="short")


@run_async
async def test_every_crop_of_a_line_widget_is_what_textual_would_draw():
    """Whatever part of it the compositor asks for (a widget scrolled or clipped), a line widget draws what Textual's
    styles cache would: padding on one side only, padding above or below, a hatch, lines shorter than the widget."""
    app = _EveryBoxApp()
    async with app.run_test(size=(40, 40)) as pilot:
        widgets = list(app.query(LineWidget))
        for widget in widgets:
            if isinstance(widget, TextBlock):
                widget.show_lines([Text("ab", style="bold"), Text("a longer line than fits")])
        await pilot.pause()
        for widget in widgets:
            width, height = widget.outer_size
            for x1 in range(width):
                for x2 in range(x1 + 1, width + 1):
                    for y1, y2 in ((0, height), (1, 2), (height - 1, height)):
                        crop = Region(x1, y1, x2 - x1, y2 - y1)
                        ours = [_each_cell(strip) for strip in widget.render_lines(crop)]
                        textual = [_each_cell(strip) for strip in Widget.render_lines(widget, crop)]
                        assert ours == textual, (widget.id, crop)


def test_a_metric_says_the_time_its_columns_span_at_its_bin():
    """Columns of 5 s: 20 columns read "last 100 s"; the scale and the span side by side where they fit exactly."""
    styles = (Style(),) * 4
    metric = Metric("iter/s", bin_s=5.0)
    metric.shape = (42, 3)  # a graph 20 columns wide, three rows: no axis
    metric.show("7", Series((5.0,), 10.0, "it/s"))
    assert metric.strip(2, styles).text.startswith("last 100 s".rjust(21) + " ")
    spanned = "0–10 it/s · 90 s"  # 18 columns of 5 s beside the scale: exactly the label and value's 16 cells
    metric = Metric("x", 6, len(spanned) - 6, bin_s=5.0)
    metric.shape = (len(spanned) + 1 + 18, 2)
    metric.show("7", Series((5.0,), 10.0, "it/s"))
    assert metric.strip(1, styles).text.startswith(spanned + " ")


class _SlowBinApp(App):
    CSS = "MetricRow { height: 4; width: 40; }"

    def compose(self) -> ComposeResult:
        yield MetricRow("iter/s", bin_s=5.0)


@run_async
async def test_a_metric_rows_time_axis_is_in_its_own_bins():
    app = _SlowBinApp()
    async with app.run_test(size=(50, 6)) as pilot:
        row = app.query_one(MetricRow)
        row.show("7", Series((5.0,), 10.0, "it/s"))
        await pilot.pause()
        assert row.render_line(3).text == " " * 22 + axis_row(18, 5.0)
        assert axis_row(18, 5.0) == "  -60s         now"  # 18 columns of 5 s, not of 1 s


class _Upper(LineFilter):
    """A filter that is not Textual's: it changes the text (a line widget must leave it to Textual's way)."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text.upper(), style, control) for text, style, control in segments]


class _FilterApp(App):
    CSS = """
    TextBlock { width: 24; height: 2; background: #203040; color: #c0c0c0; }
    #padded { padding: 0 2 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield TextBlock(pad_text=True, id="plain")
        yield TextBlock(id="padded")


@run_async
async def test_a_line_widget_filters_each_style_as_textuals_filters_filter_each_line():
    """Where the app's line filters map styles alone (Textual's: ANSI colours to the theme's, dim, NO_COLOR's), a line
    widget applies them once a style, and its lines are cell for cell what Textual's filters make of each line; with
    any other filter it filters each line Textual's way."""
    app = _FilterApp()
    async with app.run_test(size=(30, 6)) as pilot:
        await pilot.pause()
        ansi = app._filters[0]
        assert isinstance(ansi, ANSIToTruecolor)
        filter_sets = [
            [ansi],
            [ansi, Monochrome()],
            [ansi, NoColor()],
            [ansi, DimFilter()],
            [ansi, _Upper()],
            [],
        ]
        blocks = list(app.query(TextBlock))

        @settings(max_examples=120, deadline=None)
        @given(
            lines=st.lists(texts(), min_size=1, max_size=2), filters=st.sampled_from(filter_sets)
        )
        def check(lines: list[Text], filters: list[LineFilter]) -> None:
            app._filters[:] = filters
            for block in blocks:
                block.show_lines(lines)
                block._styles_cache.clear()  # Textual's own lines, drawn with these filters
                region = Region(0, 0, block.outer_size.width, 2)
                ours = [_each_cell(strip) for strip in block.render_lines(region)]
                textual = [_each_cell(strip) for strip in Widget.render_lines(block, region)]
                assert ours == textual, (block.id, filters)
                assert (block._filtered is None) == any(isinstance(f, _Upper) for f in filters)

        check()
