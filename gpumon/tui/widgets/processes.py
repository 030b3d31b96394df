"""The process table: every process on the GPU, our jobs marked A / B, the others dimmed."""

from __future__ import annotations

import math

from rich.text import Text

from gpumon.core.records.printable import printable
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
    """The row's text per column, the command last (user and command escaped: anyone names their process)."""
    hidden = row.command is None
    return [
        row.mark,
        str(row.pid),
        "hidden" if hidden else printable(row.user or UNKNOWN),
        _mib(row.gpu_mem_mib),
        _pct(row.sm_pct),
        _pct(row.cpu_pct),
        _mib(row.rss_mib),
        _elapsed(row.elapsed_s),
        _rate(row.iter_rate),
        printable(row.command) if row.command is not None else "hidden (PID namespace)",
    ]


# What ``.`` cycles through (nvitop's sort keys): the column, and each row's value (largest first; NaN last).
SORTS: tuple[tuple[str, str], ...] = (
    ("", ""),  # as listed: ours first, then the others by GPU memory
    ("GPU MEM", "gpu_mem_mib"),
    ("SM%", "sm_pct"),
    ("CPU%", "cpu_pct"),
    ("HOST MEM", "rss_mib"),
    ("ELAPSED", "elapsed_s"),
    ("PID", "pid"),
)


def _matches(row: ProcessRow, text: str) -> bool:
    words = f"{row.pid} {row.user or ''} {row.command or ''} {row.mark}".lower()
    return text.lower() in words


def arrange(rows: tuple[ProcessRow, ...], sort: int = 0, text: str = "") -> tuple[ProcessRow, ...]:
    """The rows the table shows: those containing ``text`` (PID, user, command), by ``SORTS[sort]``."""
    kept = [row for row in rows if not text or _matches(row, text)]
    field = SORTS[sort % len(SORTS)][1]
    if field:

        def key(row: ProcessRow) -> tuple[bool, float]:
            value = float(getattr(row, field))
            return (math.isnan(value), -value if field != "pid" else value)

        kept.sort(key=key)
    return tuple(kept)


def _line(values: list[str], width: int) -> str:
    parts = [
        v[:w].rjust(w) if i > 2 else v[:w].ljust(w)
        for i, (v, (_, w)) in enumerate(zip(values, COLUMNS))
    ]
    text = " ".join([*parts, values[-1]])
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def render_table(
    rows: tuple[ProcessRow, ...], width: int, sort: int = 0, text_filter: str = ""
) -> Text:
    """Header (after COMMAND, the column sorted by and the filter) and one line per process; others dimmed."""
    sorted_by = SORTS[sort % len(SORTS)][0]
    said = [f"by {sorted_by}" if sorted_by else "", f"/{text_filter}" if text_filter else ""]
    command = "  ".join(["COMMAND", *(word for word in said if word)])
    text = Text()
    text.append(_line([h for h, _ in COLUMNS] + [command], width), style="bold")
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
        self._shown: tuple[tuple[ProcessRow, ...], int, int, int, str] | None = None
        self._rows: tuple[tuple[ProcessRow, ...], int] = ((), MAX_ROWS)
        self.sort = 0  # index into SORTS (``.`` cycles it)
        self.text_filter = ""  # rows must contain it (``/``)

    def next_sort(self) -> str:
        """Sort by the next column; its name ("" for the listed order)."""
        self.sort = (self.sort + 1) % len(SORTS)
        self.show(*self._rows)
        return SORTS[self.sort][0]

    def set_filter(self, text: str) -> None:
        self.text_filter = text
        self.show(*self._rows)

    def show(self, rows: tuple[ProcessRow, ...], max_rows: int = MAX_ROWS) -> None:
        """Draw ``rows`` (at most ``max_rows``: ours first, then the others by GPU memory, unless sorted or
        filtered)."""
        self._rows = (rows, max_rows)
        self.display = bool(rows)
        width = self.size.width or 80
        state = (rows, width, max_rows, self.sort, self.text_filter)
        if self._shown == state:
            return
        self._shown = state
        shown = arrange(rows, self.sort, self.text_filter)[:max_rows]
        if self.styles.height is None or self.styles.height.value != len(shown) + 1:
            self.styles.height = len(shown) + 1  # docked: its height is set, not measured
        self.draw(render_table(shown, width, self.sort, self.text_filter) if rows else "")

    def on_resize(self) -> None:
        super().on_resize()
        if self._shown is not None:
            self._shown = None
            self.show(*self._rows)
