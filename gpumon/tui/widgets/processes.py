"""The process table: every process on the GPU, our jobs marked A / B, the others dimmed."""

from __future__ import annotations

import math

from rich.text import Text

from gpumon.tui.widgets.lines import TextBlock
from gpumon.tui.view import ProcessRow

# (header, width) of the fixed columns; the command takes what is left.
COLUMNS = (
    ("", 1),
    ("PID", 7),
    ("USER", 8),
    ("GPU MEM", 8),
    ("SM%", 4),
    ("CPU%", 5),
    ("HOST MEM", 8),
    ("ELAPSED", 8),
    ("IT/S", 6),
)
MAX_ROWS = (
    7  # a box with more GPU processes shows the first seven: ours, then the others by GPU memory
)
UNKNOWN = (
    "?"  # NVML or /proc did not say (a PID namespace hides the process: user and command "hidden")
)


def _mib(value: float) -> str:
    if math.isnan(value):
        return UNKNOWN
    return f"{value / 1024:.1f}G" if value >= 1024 else f"{value:.0f}M"


def _pct(value: float) -> str:
    return UNKNOWN if math.isnan(value) else f"{value:.0f}"


def _elapsed(seconds: float) -> str:
    if math.isnan(seconds):
        return UNKNOWN
    seconds = int(seconds)
    if seconds >= 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _rate(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def cells(row: ProcessRow) -> list[str]:
    """The row's text per column, the command last."""
    hidden = row.command is None
    return [
        row.mark,
        str(row.pid),
        "hidden" if hidden else (row.user or UNKNOWN),
        _mib(row.gpu_mem_mib),
        _pct(row.sm_pct),
        _pct(row.cpu_pct),
        _mib(row.rss_mib),
        _elapsed(row.elapsed_s),
        _rate(row.iter_rate),
        "hidden (PID namespace)" if row.command is None else row.command,
    ]


def _line(values: list[str], width: int) -> str:
    parts = [
        v[:w].rjust(w) if i > 2 else v[:w].ljust(w)
        for i, (v, (_, w)) in enumerate(zip(values, COLUMNS))
    ]
    text = " ".join([*parts, values[-1]])
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def render_table(rows: tuple[ProcessRow, ...], width: int) -> Text:
    """Header and one line per process; others dimmed."""
    text = Text()
    text.append(_line([h for h, _ in COLUMNS] + ["COMMAND"], width), style="bold")
    for row in rows:
        text.append("\n")
        text.append(_line(cells(row), width), style="" if row.mark else "dim")
    return text


class ProcessTable(TextBlock):
    """Every process on the GPU (hidden when NVML lists none); redrawn only when what it shows changed."""

    DEFAULT_CSS = """
    ProcessTable { height: 1; }  /* set to its lines by show() */
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: tuple[tuple[ProcessRow, ...], int, int] | None = None

    def show(self, rows: tuple[ProcessRow, ...], max_rows: int = MAX_ROWS) -> None:
        """Draw ``rows`` (at most ``max_rows``: ours first, then the others by GPU memory)."""
        self.display = bool(rows)
        width = self.size.width or 80
        if self._shown == (rows, width, max_rows):
            return
        self._shown = (rows, width, max_rows)
        shown = rows[:max_rows]
        if self.styles.height is None or self.styles.height.value != len(shown) + 1:
            self.styles.height = len(shown) + 1  # docked: its height is set, not measured
        self.draw(render_table(shown, width) if rows else "")

    def on_resize(self) -> None:
        super().on_resize()
        if self._shown is not None:
            rows, _, max_rows = self._shown
            self._shown = None
            self.show(rows, max_rows)
