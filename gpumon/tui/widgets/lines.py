"""Small widgets that repaint only when what they show has changed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Literal, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.color import Color
from textual.geometry import Region, Size
from textual.filter import ANSIToTruecolor, DimFilter, LineFilter, Monochrome, NoColor
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.widget import Widget

from gpumon.core.records.printable import printable
from gpumon.core.records.units import num
from gpumon.tui.model import BIN_S
from gpumon.tui.view import Series
from gpumon.tui.widgets.graph import axis_row, graph_rows, span_text

LABEL_WIDTH = 10
VALUE_WIDTH = 11
AXIS_ROWS = 4  # a graph this many rows high gives its last to a time axis
EMPTY = Series((), 1.0)
# Textual's line filters that map each segment's style alone (text and cells unchanged): a line widget that draws its
# own lines applies them to each style once, not to each line (``LineWidget._filter_style``)
STYLE_FILTERS = (ANSIToTruecolor, DimFilter, Monochrome, NoColor)


def set_titles(widget: Widget, title: str, subtitle: str | None = None) -> None:
    """Set a border title (and subtitle) only when it changed: every assignment repaints the whole widget.

    Both are printable (a spec's or a label's control characters escaped)."""
    title = printable(title)
    subtitle = None if subtitle is None else printable(subtitle)
    if widget.border_title != title:
        widget.border_title = title
    if subtitle is not None and widget.border_subtitle != subtitle:
        widget.border_subtitle = subtitle


@dataclass(frozen=True)
class PlainBox:
    """What a ``LineWidget`` without a box of its own needs to draw its lines itself: its padding left and right, the
    style Textual pads with (the background), the background its line filters are given."""

    left: int
    right: int
    inner: Style
    background: Color


class LineWidget(Widget):
    """A widget drawn through the line API that looks its style up once per style change: ``rich_style`` walks every
    ancestor on each call, which was most of what a changed line of text cost to draw (observer_cost). Textual calls
    ``notify_style_update`` on a widget whenever its styles may have changed (its CSS rules, a class or pseudo-class of
    it or of an ancestor, the theme), as it does to drop its own cached styles.

    Where it has no box of its own (no border, outline or padding above or below, no tint, opacity, hatch or border
    title), the compositor takes its lines straight from ``render_line``, padded left and right as Textual pads them
    and with the app's line filters, not through Textual's styles cache: that cache's work on each line (a box,
    padding, opacity, tint) is for widgets that have one, and was half of what a changed line of a graph cost
    (observer_cost, docs/tui.md)."""

    _base: Style | None = None
    # how this widget draws its lines itself (False: through Textual's styles cache), as of the last style change
    _plain: PlainBox | Literal[False] | None = None
    # each line's last strip from render_line and what it became (padded, filtered), at the width and filters of the key
    # (set with the key, on the first render)
    _finished: dict[int, tuple[Strip, Strip]]
    _finished_key: tuple | None = None
    # each style as the key's filters make it, where they are all STYLE_FILTERS (else None: filtered a line at a time)
    _filtered: dict[Style | None, Style | None] | None = None
    _drawing_size: Size | None = None

    @property
    def base_style(self) -> Style:
        """``rich_style``, as of the last style change."""
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def changed(self, *regions: Region) -> None:
        """The content changed: repaint ``regions`` (all of it without)."""
        self.refresh(*regions)

    def notify_style_update(self) -> None:
        self._base = None
        self._plain = None
        self._finished_key = None
        super().notify_style_update()

    def _plain_box(self) -> PlainBox | None:
        if self._plain is None:
            styles = self.styles
            top, right, bottom, left = styles.padding
            plain = (
                not any(edge for edge, _ in styles.border)
                and not any(edge for edge, _ in styles.outline)
                and not (top or bottom)
                and self.opacity == 1
                and styles.text_opacity == 1
                and not styles.tint.a
                and not (styles.has_rule("hatch") and styles.hatch != "none")
                and self._border_title is None
                and self._border_subtitle is None
            )
            base_background, background = self.background_colors
            # what Textual's styles cache pads with: the background alone
            inner = VisualStyle(background=base_background + background).rich_style
            self._plain = PlainBox(left, right, inner, background) if plain else False
        return self._plain or None

    @property
    def line_size(self) -> Size:
        """The content's size: while ``render_lines`` draws, the size it draws at (``size`` looks the widget up in the
        compositor's map each time: a line cost more than its cached strip), else ``size``."""
        return self._drawing_size if self._drawing_size is not None else self.size

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines of ``crop`` for the compositor: ``render_line``'s, padded left and right and filtered, where the
        widget has no box. A line whose strip is the one it gave last is given as it was padded and filtered then: the
        compositor asks for every line of every widget in the frame's changed area, most of them unchanged."""
        box = self._plain_box()
        if box is None:
            return super().render_lines(crop)
        filters = self.get_line_filters()
        size = self.size
        width = size.width
        key = (width, *filters)
        if self._finished_key != key:
            self._finished_key = key
            self._finished = {}
            self._filtered = {} if all(type(f) in STYLE_FILTERS for f in filters) else None
        finished = self._finished
        strips = []
        self._drawing_size = size
        try:
            for y in crop.line_range:
                strip = self.render_line(y)
                done = finished.get(y)
                if done is None or done[0] is not strip:
                    done = finished[y] = (strip, self._finish(strip, width, box, filters))
                strips.append(done[1])
        finally:
            self._drawing_size = None
        if crop.column_span != (0, width + box.left + box.right):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _finish(
        self, strip: Strip, width: int, box: PlainBox, filters: Sequence[LineFilter]
    ) -> Strip:
        """``strip`` as Textual would give it: at ``width``, padded left and right, through the line filters; where
        they map styles alone, in one new strip (Textual's way makes one for the padding and one a filter: ~0.5 ms of a
        ~5 ms frame, frame_cost.py)."""
        if strip.cell_length != width:
            strip = strip.adjust_cell_length(width, box.inner)
        if not (filters or box.left or box.right):
            return strip
        if self._filtered is not None:
            segments = list(strip)
            if box.left:
                segments.insert(0, Segment(" " * box.left, box.inner))
            if box.right:
                segments.append(Segment(" " * box.right, box.inner))
            if filters:
                known = self._filtered
                segments = [
                    Segment(
                        text,
                        known[style]
                        if style in known
                        else self._filter_style(style, filters, box.background),
                    )
                    for text, style, _ in segments
                ]
            return Strip(segments, width + box.left + box.right)
        if box.left or box.right:
            strip = Strip(
                [
                    Segment(" " * box.left, box.inner),
                    *strip,
                    Segment(" " * box.right, box.inner),
                ],
                width + box.left + box.right,
            )
        for line_filter in filters:
            strip = strip.apply_filter(line_filter, box.background)
        return strip

    def _filter_style(
        self, style: Style | None, filters: Sequence[LineFilter], background: Color
    ) -> Style | None:
        """``style`` as ``filters`` (all STYLE_FILTERS) make it on ``background``, kept until the next style change."""
        segment = Segment("", style)
        for line_filter in filters:
            segment = line_filter.apply([segment], background)[0]
        assert self._filtered is not None
        self._filtered[style] = segment.style
        return segment.style


class TextLine(LineWidget):
    """One line of styled text, cut with an ellipsis to the width; ``show`` repaints only on change.

    Drawn through Textual's line API from segments built once per change (rich Text rendered
    straight to segments), not re-parsed into Content on every repaint.
    """

    DEFAULT_CSS = """
    TextLine { height: 1; }
    """

    def __init__(self, text: str | Text = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self._text = text if isinstance(text, Text) else Text(text)
        self._strip: Strip | None = None

    def show(self, text: str | Text) -> None:
        text = text if isinstance(text, Text) else Text(text)
        if text == self._text:
            return
        self._text = text
        self._strip = None
        self.changed()

    @property
    def plain(self) -> str:
        return self._text.plain

    def on_resize(self) -> None:
        self._strip = None

    def notify_style_update(self) -> None:
        self._strip = None
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = self.line_size.width
        if y > 0:
            return Strip.blank(width, self.base_style)
        if self._strip is None or self._strip.cell_length != width:
            self._strip = text_strip(self, self._text, width)
        return self._strip


def text_strip(widget: LineWidget, text: Text, width: int, pad_text: bool = True) -> Strip:
    """One line of ``text`` in ``widget``'s style, cut with an ellipsis to ``width`` cells and padded to it (in the
    text's style, or with ``pad_text=False`` in the background alone, as a Static pads)."""
    console = widget.app.console
    widget_style = widget.base_style
    fitted = fitting_segments(text, width, pad_text, console, widget_style)
    strip = (
        Strip(*fitted)
        if fitted is not None
        else rich_strip(text, width, pad_text, console, widget_style)
    )
    return strip.adjust_cell_length(width, Style(bgcolor=widget_style.bgcolor))


def rich_strip(
    text: Text, width: int, pad_text: bool, console: Console, widget_style: Style
) -> Strip:
    """``text`` cut with an ellipsis to ``width`` (padded with ``pad_text``) and rendered by Rich in ``widget_style``."""
    text = text.copy()
    text.no_wrap = True
    text.truncate(width, overflow="ellipsis", pad=pad_text)
    base = widget_style + console.get_style(text.style) if text.style else widget_style
    # Text.render drops its own style without spans
    return Strip(Segment.apply_style(text.render(console, end=""), base))


def fitting_segments(
    text: Text, width: int, pad_text: bool, console: Console, widget_style: Style
) -> tuple[list[Segment], int] | None:
    """The segments (and their cells) ``rich_strip`` gives a line that fits ``width`` in one-cell characters with spans
    that do not overlap (the monitor's lines: each a row of appended pieces), built in one pass without copying,
    truncating and rendering the text; None for any other line (``rich_strip`` draws it)."""
    plain = text.plain
    spans = sorted(text.spans, key=attrgetter("start"))
    if len(plain) > width or cell_len(plain) != len(plain):
        return None
    end = 0
    for span in spans:
        if span.start < end or span.end > len(plain):
            return None
        end = max(end, span.end)
    if pad_text and len(plain) < width:
        plain += " " * (width - len(plain))
    get_style = partial(console.get_style, default=Style.null())
    text_style = get_style(text.style)
    base = widget_style + text_style if text.style else widget_style
    if not spans:
        return [Segment(plain, base)], len(plain)
    segments = []
    offset = 0
    for span in spans:
        if span.start > offset:
            segments.append(Segment(plain[offset : span.start], base))
        if span.end > span.start:
            # Rich combines the text's style and the span's, then adds them to base (which holds the text's already)
            segments.append(Segment(plain[span.start : span.end], base + get_style(span.style)))
        offset = max(offset, span.end)
    if len(plain) > offset:
        segments.append(Segment(plain[offset:], base))
    return segments, len(plain)


class TextBlock(LineWidget):
    """Lines of styled text drawn through the line API: ``draw`` repaints only the lines that changed and never lays
    the screen out again (a Static's ``update`` does, every time: the whole screen's layout once a frame).

    ``pad_text``: each line is padded to the width in its text's style, as a ``TextLine`` pads (else in the
    background alone, as a Static pads)."""

    def __init__(self, pad_text: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pad_text = pad_text
        self._lines: list[Text] = []
        self._strips: dict[int, Strip] = {}

    def draw(self, text: Text | str) -> None:
        """Show ``text`` (its lines split at newlines)."""
        text = text if isinstance(text, Text) else Text(text)
        self.show_lines(list(text.split("\n")) if text.plain else [])

    def show_lines(self, lines: list[Text]) -> None:
        """Show ``lines``, one a line."""
        old = self._lines
        changed = [
            y
            for y in range(max(len(lines), len(old)))
            if y >= len(lines) or y >= len(old) or lines[y] != old[y]
        ]
        self._lines = lines
        for y in changed:
            self._strips.pop(y, None)
        top = self.styles.padding.top
        if changed:
            self.changed(*(Region(0, top + y, self.size.width, 1) for y in changed))

    def line(self, y: int) -> str:
        """The text of line ``y`` ("" past the last)."""
        return self._lines[y].plain if y < len(self._lines) else ""

    def on_resize(self) -> None:
        self._strips.clear()

    def notify_style_update(self) -> None:
        self._strips.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = self.line_size.width
        if y >= len(self._lines):
            return Strip.blank(width, self.base_style)
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            strip = self._strips[y] = text_strip(self, self._lines[y], width, self.pad_text)
        return strip


def metric_styles(widget: Widget) -> tuple[Style, Style, Style, Style]:
    """The base, label, value and graph styles of a widget that draws metrics (its ``metric--*`` component classes)."""
    base = widget.rich_style
    return (
        base,
        base + widget.get_component_rich_style("metric--label"),
        base + widget.get_component_rich_style("metric--value"),
        base + widget.get_component_rich_style("metric--graph"),
    )


METRIC_CSS = """
{name} > .metric--label {{ color: $text-muted; }}
{name} > .metric--value {{ text-style: bold; }}
{name} > .metric--graph {{ color: $success; }}
"""


class Metric:
    """``label  value  ▁▂▃▅▇`` with a fixed-scale history graph filling the rest of ``shape``'s width, one bin of
    ``bin_s`` seconds a column; its time: a ``now``/``-30s`` axis on the last row when it has ``AXIS_ROWS``, else how
    long it spans beside its scale where that fits. What a ``MetricRow`` and each cell of a ``MetricGrid`` draw."""

    def __init__(
        self,
        label: str,
        label_width: int = LABEL_WIDTH,
        value_width: int = VALUE_WIDTH,
        bin_s: float = BIN_S,
    ) -> None:
        self.label = label
        self.bin_s = bin_s
        self.label_width = label_width
        self.value_width = value_width
        self.value = ""
        self.shape = (0, 1)  # width, rows: set by the widget that draws it
        self._series = EMPTY
        self._rows: tuple[tuple[int, int], list[str]] = ((-1, -1), [])

    def _graph_width(self) -> int:
        return max(0, self.shape[0] - self.label_width - self.value_width - 1)

    def _axis(self) -> bool:
        return self.shape[1] >= AXIS_ROWS

    def _graph(self) -> list[str]:
        rows = max(1, self.shape[1])
        shape = (self._graph_width(), rows - 1 if self._axis() else rows)
        if self._rows[0] != shape:
            self._rows = (shape, graph_rows(self._series.values, self._series.top, *shape))
        return self._rows[1]

    def show(self, value: str, series: Series | None = None) -> list[int]:
        """Set the value and the history; the rows that look different now (none: nothing to repaint)."""
        series = series if series is not None else EMPTY
        if value == self.value and series == self._series:
            return []
        value_before, scale_before, (shape_before, rows_before) = (
            self.value,
            self._head(1),
            self._rows,
        )
        self.value = value
        self._series = series
        self._rows = ((-1, -1), [])
        rows = self._graph()
        if self._rows[0] != shape_before:
            return list(range(len(rows)))
        changed = [y for y, (old, new) in enumerate(zip(rows_before, rows)) if old != new]
        if value != value_before and 0 not in changed:
            changed.append(0)
        if self._head(1) != scale_before and len(rows) > 1 and 1 not in changed:
            changed.append(1)
        return changed

    def _scale(self) -> str:
        return f"0–{num(self._series.top)} {self._series.unit}".strip()

    def _head(self, row: int) -> str:
        """What the label and value columns say on a graph row below the first: the scale, then the time shown."""
        head = self.label_width + self.value_width
        width = self._graph_width()
        span = span_text(width * self.bin_s)
        if row == 1:
            scale = self._scale()
            spanned = f"{scale} · {span}"
            return spanned if width and self.shape[1] == 2 and len(spanned) <= head else scale
        return f"last {span}" if width and row == 2 and not self._axis() else ""

    def strip(self, y: int, styles: tuple[Style, Style, Style, Style]) -> Strip | None:
        """Its row ``y`` at ``shape`` (None below the last), built as plain segments (no markup to parse) in
        ``metric_styles``' styles."""
        rows = self._graph()
        base, label_style, value_style, graph_style = styles
        head = self.label_width + self.value_width
        width = self.shape[0]
        if y < len(rows):
            if y == 0:
                segments = [
                    Segment(self.label[: self.label_width].ljust(self.label_width), label_style),
                    Segment(self.value[: self.value_width].rjust(self.value_width), value_style),
                ]
            else:
                segments = [Segment(self._head(y)[:head].rjust(head), label_style)]
            segments += [Segment(" ", base), Segment(rows[y], graph_style)]
            # Every character here is one cell wide (block elements, ASCII, "°", "–"): the length is
            # known, and measuring it (rich's cell_len on non-ASCII text) was most of a frame's cost.
            strip = Strip(segments, cell_length=head + 1 + len(rows[y]))
            return strip if strip.cell_length == width else strip.adjust_cell_length(width, base)
        if y == len(rows) and self._axis():
            axis = axis_row(self._graph_width(), self.bin_s)
            strip = Strip([Segment(" " * (head + 1), base), Segment(axis, label_style)])
            return strip.adjust_cell_length(width, base)
        return None


class MetricRow(LineWidget):
    """One ``Metric`` as a widget as high as its graph: repaints only the lines that changed."""

    COMPONENT_CLASSES = {"metric--label", "metric--value", "metric--graph"}
    DEFAULT_CSS = "MetricRow { height: 1; }" + METRIC_CSS.format(name="MetricRow")

    def __init__(
        self,
        label: str,
        label_width: int = LABEL_WIDTH,
        value_width: int = VALUE_WIDTH,
        bin_s: float = BIN_S,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.metric = Metric(label, label_width, value_width, bin_s)
        self._strips: dict[int, Strip] = {}  # by row: a change rebuilds only the rows it changed
        self._styles: tuple[Style, Style, Style, Style] | None = None

    @property
    def label(self) -> str:
        return self.metric.label

    @property
    def value(self) -> str:
        return self.metric.value

    def show(self, value: str, series: Series | None = None) -> None:
        """Set the value and the history; repaints only the lines that look different."""
        changed = self.metric.show(value, series)
        for y in changed:
            self._strips.pop(y, None)
        if changed:
            width = self.metric.shape[0]
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def on_resize(self, event: events.Resize) -> None:
        self.metric.shape = (event.size.width, event.size.height)
        self._strips.clear()
        self.refresh()

    def notify_style_update(self) -> None:
        """CSS or theme changed: rebuild the cached styles and rows."""
        self._styles = None
        self._strips.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        """Line API: each row is built once per change of it."""
        strip = self._strips.get(y)
        if strip is None:
            size = self.line_size
            self.metric.shape = (size.width, size.height)
            if self._styles is None:
                self._styles = metric_styles(self)
            strip = self.metric.strip(y, self._styles) or Strip.blank(size.width, self.base_style)
            self._strips[y] = strip
        return strip
