"""A line of text that fits is drawn in one pass, into exactly the segments Rich's truncate and render give it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.style import Style
from rich.text import Span, Text

from gpumon.tui.widgets.lines import fitting_segments, rich_strip
from gpumon.tui.widgets.workload import _pair

CONSOLE = Console(width=200, color_system="truecolor", force_terminal=True)
WIDGET = Style(color="white", bgcolor="#121212")
STYLES = ["", "dim", "bold", "bold cyan", "italic", Style(color="red"), Style(bgcolor="blue")]
PIECES = st.text(alphabet=st.sampled_from("ab ·…%0:é漢"), max_size=12)


@st.composite
def texts(draw) -> Text:
    """A text as the monitor builds its lines (pieces appended, each with a style or none), with now and then a span
    laid over others (overlapping: Rich's way only) or a style of the whole text."""
    text = Text(style=draw(st.sampled_from(STYLES)))
    for _ in range(draw(st.integers(0, 6))):
        text.append(draw(PIECES), style=draw(st.sampled_from(STYLES)) or None)
    if draw(st.booleans()) and text.plain:
        start = draw(st.integers(0, len(text.plain)))
        end = draw(st.integers(start, len(text.plain)))
        text.spans.append(Span(start, end, draw(st.sampled_from(STYLES))))
    return text


@settings(max_examples=400, deadline=None)
@given(texts(), st.integers(1, 60), st.booleans())
def test_a_fitting_line_is_the_segments_rich_gives_it(text: Text, width: int, pad: bool):
    fitted = fitting_segments(text, width, pad, CONSOLE, WIDGET)
    rich = rich_strip(text, width, pad, CONSOLE, WIDGET)
    if fitted is None:  # cut, wide characters or overlapping spans: Rich draws it
        return
    segments, cells = fitted
    assert [(s.text, s.style) for s in segments] == [(s.text, s.style) for s in rich]
    assert cells == rich.cell_length


def test_the_monitors_lines_take_the_one_pass():
    detail = _pair("copy", "1.20 GB/s", "3.40 MB/s wall")
    assert fitting_segments(detail, 56, True, CONSOLE, WIDGET) is not None
    assert fitting_segments(Text("gpumon  t 12.0 s"), 118, True, CONSOLE, WIDGET) is not None
    # too long: Rich cuts it with its ellipsis
    assert fitting_segments(detail, 10, True, CONSOLE, WIDGET) is None
