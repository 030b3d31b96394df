"""A container's own lines (border, titles, background) are kept between frames, and drawn again, exactly as Textual
draws them, when anything they depend on changes; a line widget gives a line unchanged since the last frame as it was
finished then."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widget import Widget

from gpumon.tui.widgets.box import CachedBox
from gpumon.tui.widgets.lines import TextBlock
from tests.tui.conftest import run_async


class _Panel(CachedBox):
    DEFAULT_CSS = """
    _Panel { border: round green; height: 6; width: 24; }
    _Panel.-alarm { border: heavy red; }
    """


class _Note(CachedBox):
    """A kept box with content of its own (as the output tails): a change of it comes with a ``refresh``."""

    DEFAULT_CSS = "_Note { height: 1; width: 20; }"
    text = "before"

    def render(self) -> str:
        return self.text


class _PanelApp(App):
    CSS = "TextBlock { padding: 0 1; height: 3; }"

    def compose(self) -> ComposeResult:
        yield _Panel()
        yield TextBlock(id="block")
        yield _Note()


def _cells(strips) -> list[list[tuple[str, object]]]:
    return [[(segment.text, segment.style) for segment in strip] for strip in strips]


def _textual(widget: Widget, crop: Region) -> list:
    """What Textual's own render_lines draws now (its styles cache, dirty lines drawn again)."""
    return Widget.render_lines(widget, crop)


@run_async
async def test_a_kept_box_draws_again_on_each_change_of_what_its_lines_show():
    app = _PanelApp()
    async with app.run_test(size=(40, 12)) as pilot:
        panel = app.query_one(_Panel)
        panel.border_title = "A · fcn"
        await pilot.pause()
        crop = Region(0, 0, 24, 6)
        drawn: list[int] = []
        styles_cache = panel._styles_cache
        render_widget = styles_cache.render_widget
        styles_cache.render_widget = lambda widget, region: (  # type: ignore[method-assign]
            drawn.append(1),
            render_widget(widget, region),
        )[1]

        first = panel.render_lines(crop)  # as the last frame drew them
        again = panel.render_lines(crop)
        assert (
            again is first and drawn == []
        )  # nothing changed: the lines as they were, Textual not asked

        changes = [
            lambda: setattr(panel, "border_title", "A · gemm"),  # a title: a refresh of its own
            lambda: setattr(panel, "border_subtitle", "running"),
            lambda: panel.add_class("-alarm"),  # a style: notify_style_update
            lambda: setattr(panel.styles, "width", 30),  # a size
        ]
        for change in changes:
            before = len(drawn)
            change()
            await pilot.pause()  # the frame draws it again
            assert len(drawn) == before + 1
            crop = Region(0, 0, panel.outer_size.width, panel.outer_size.height)
            kept = panel.render_lines(crop)
            assert len(drawn) == before + 1  # and keeps what it drew
            assert _cells(kept) == _cells(_textual(panel, crop))
        text = "\n".join(strip.text for strip in kept)
        assert "A · gemm" in text and "running" in text and "┏" in text and len(kept[0].text) == 30


@run_async
async def test_an_unchanged_line_is_given_as_finished_last_frame_and_a_changed_one_finished_again():
    app = _PanelApp()
    async with app.run_test(size=(40, 12)) as pilot:
        block = app.query_one("#block", TextBlock)
        block.show_lines([Text("one", style="bold"), Text("two")])
        await pilot.pause()
        crop = Region(0, 0, block.outer_size.width, 2)
        first = block.render_lines(crop)
        assert [a is b for a, b in zip(block.render_lines(crop), first)] == [True, True]
        block.show_lines([Text("one", style="bold"), Text("three")])
        await pilot.pause()
        second = block.render_lines(crop)
        assert second[0] is first[0] and second[1] is not first[1]
        assert [strip.text for strip in second] == [" one".ljust(40), " three".ljust(40)]
        assert _cells(second) == _cells(_textual(block, crop))


@run_async
async def test_a_kept_box_with_content_draws_it_again_when_it_is_refreshed():
    app = _PanelApp()
    async with app.run_test(size=(40, 12)) as pilot:
        note = app.query_one(_Note)
        crop = Region(0, 0, 20, 1)
        assert note.render_lines(crop)[0].text.startswith("before")
        note.text = "after"
        note.refresh()
        await pilot.pause()
        assert note.render_lines(crop)[0].text.startswith("after")
