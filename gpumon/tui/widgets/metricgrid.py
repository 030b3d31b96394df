"""Metrics two to a line in one widget: the device panel's graphs."""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.strip import Strip

from gpumon.tui.view import Series
from gpumon.tui.widgets.lines import METRIC_CSS, LineWidget, Metric, metric_styles

GUTTER = 2  # blank cells between the two columns


def column_widths(width: int) -> tuple[int, int]:
    """The two columns of ``width`` cells less the gutter, as a grid of two ``1fr`` columns divides them (the left
    one rounded down)."""
    inner = max(0, width - GUTTER)
    return inner // 2, inner - inner // 2


class MetricGrid(LineWidget):
    """``Metric`` cells two to a line, one line each, with a ``GUTTER`` between the columns: one widget where a grid
    of ``MetricRow`` widgets was, so a frame renders one widget, not one per graph (observer_cost: the compositor's
    cost grows with the widgets it renders), and a line repaints only when one of its two cells changed."""

    COMPONENT_CLASSES = {"metric--label", "metric--value", "metric--graph"}
    DEFAULT_CSS = "MetricGrid { height: auto; }" + METRIC_CSS.format(name="MetricGrid")

    def __init__(self, metrics: Sequence[tuple[str, str]], **kwargs) -> None:
        """``metrics``: (key, label) of each cell, in reading order."""
        super().__init__(**kwargs)
        self.metrics = {key: Metric(label) for key, label in metrics}
        self._lines: dict[int, Strip] = {}
        self._styles: tuple[Style, Style, Style, Style] | None = None

    @property
    def line_count(self) -> int:
        return (len(self.metrics) + 1) // 2

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.line_count

    def value(self, key: str) -> str:
        """What the cell ``key`` says now."""
        return self.metrics[key].value

    def show(self, key: str, value: str, series: Series | None = None) -> None:
        """Set one cell's value and history; repaints its line only if it looks different."""
        self.show_all([(key, value, series)])

    def show_all(self, cells: Iterable[tuple[str, str, Series | None]]) -> None:
        """Set the value and history of each cell ``(key, value, series)``; the lines that look different are repainted
        with one ``refresh`` (each costs the UI thread a message and a style-cache reset: frame_cost.py)."""
        keys = list(self.metrics)
        changed = {
            keys.index(key) // 2
            for key, value, series in cells
            if self.metrics[key].show(value, series)
        }
        for y in changed:
            self._lines.pop(y, None)
        if changed:
            width = self.size.width
            self.refresh(*(Region(0, y, width, 1) for y in sorted(changed)))

    def on_resize(self, event: events.Resize) -> None:
        for cell, width in zip(
            self.metrics.values(), column_widths(event.size.width) * self.line_count
        ):
            cell.shape = (width, 1)
        self._lines.clear()
        self.refresh()

    def notify_style_update(self) -> None:
        """CSS or theme changed: rebuild the cached styles and lines."""
        self._styles = None
        self._lines.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = self.line_size.width
        strip = self._lines.get(y)
        if strip is None or strip.cell_length != width:
            strip = self._lines[y] = self._build_line(y, width)
        return strip

    def _build_line(self, y: int, width: int) -> Strip:
        if self._styles is None:
            self._styles = metric_styles(self)
        base = self._styles[0]
        cells = list(self.metrics.values())[2 * y : 2 * y + 2]
        parts = []
        for column, cell_width in enumerate(column_widths(width)):
            if column < len(cells):
                cells[column].shape = (cell_width, 1)
                parts.append(cells[column].strip(0, self._styles) or Strip.blank(cell_width, base))
            else:
                parts.append(Strip.blank(cell_width, base))
            if column == 0:
                parts.append(Strip.blank(GUTTER, base))
        return Strip.join(parts).adjust_cell_length(width, base)
