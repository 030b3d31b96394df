"""Fixed-scale history graphs in block characters: 0 to ``top`` always spans the full height."""

from __future__ import annotations

import functools
from typing import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"
LEVELS = len(BLOCKS) - 1


NO_DATA = 0  # a column's code point without a value (NaN); a level ``lv`` is ``lv + 1``


@functools.lru_cache(maxsize=16)  # one set of tables per graph height
def row_tables(rows: int) -> tuple[dict[int, str], ...]:
    """For each row of a graph ``rows`` cells high (top row first), the block each column's code (``NO_DATA``, or its
    level + 1) shows there: ``str.translate`` tables, so a row is one C call, not a Python loop over its columns."""
    codes = range(LEVELS * rows + 2)
    return tuple(
        {
            code: BLOCKS[min(LEVELS, max(0, code - 1 - row * LEVELS))] if code != NO_DATA else " "
            for code in codes
        }
        for row in range(rows - 1, -1, -1)
    )


def column_codes(values: Sequence[float], top: float, width: int, rows: int) -> str:
    """Each of the last ``width`` values as one character, right-aligned: ``NO_DATA`` for NaN (and for the columns
    left of the first value), else 1 + its level, the eighths of a cell it fills on a 0..``top`` scale ``rows`` cells
    high (0 at or below 0 or with no scale, at least 1 above 0, all of them at ``top`` and above)."""
    shown = values[-width:]
    codes = [NO_DATA] * (width - len(shown))
    if top > 0:
        scale = LEVELS * rows / top
        codes += [
            NO_DATA if v != v else 1 if v <= 0 else 1 + max(1, round(min(v, top) * scale))
            for v in shown
        ]
    else:
        codes += [NO_DATA if v != v else 1 for v in shown]
    return "".join(map(chr, codes))


def graph_rows(values: Sequence[float], top: float, width: int, rows: int = 1) -> list[str]:
    """The last ``width`` values as ``rows`` strings (top row first), right-aligned, blank where NaN; each column filled
    to its level (``column_codes``)."""
    if width <= 0 or rows <= 0:
        return [""] * max(rows, 0)
    codes = column_codes(values, top, width, rows)
    return [codes.translate(table) for table in row_tables(rows)]


TICK_STEPS_S = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
TICK_GAP = 10  # the fewest columns between two ticks of a time axis
TICKS = 6  # the most ticks on a wide axis


def span_text(seconds: float) -> str:
    """How long a graph's width covers, whole: ``45 s``, ``4 min``, ``2 h``."""
    if seconds < 120:
        return f"{round(seconds)} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"


def _tick(seconds: int) -> str:
    return f"-{seconds // 60}m" if seconds >= 120 and seconds % 60 == 0 else f"-{seconds}s"


@functools.lru_cache(maxsize=32)  # the same few widths, rebuilt with each frame's graph rows
def axis_row(width: int, bin_s: float) -> str:
    """A time axis under a graph ``width`` columns of ``bin_s`` seconds each: ``now`` at the right edge (the newest
    bin) and ``-30s``-style labels ending at their column, as many as fit a ``TICK_GAP`` apart."""
    if width <= 0:
        return ""
    cells = list(("now" if width >= 3 else "").rjust(width))
    free = width - 4  # the last column still free, left of "now" and a space
    gap = max(TICK_GAP, width / TICKS)
    step = next((s for s in TICK_STEPS_S if s / bin_s >= gap), None)
    k = 1
    while step is not None:
        column = width - 1 - round(k * step / bin_s)
        label = _tick(k * step)
        start = column - len(label) + 1
        if start < 0:
            break
        if column <= free:
            cells[start : column + 1] = label
            free = start - 2
        k += 1
    return "".join(cells)
