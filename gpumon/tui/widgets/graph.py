"""Fixed-scale history graphs in block characters: 0 to ``top`` always spans the full height."""

from __future__ import annotations

import functools
import math
from typing import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"
LEVELS = len(BLOCKS) - 1


def level(value: float, top: float, rows: int) -> int:
    """Eighths of a cell filled for ``value`` on a 0..``top`` scale ``rows`` cells high (-1: no data)."""
    if value is None or math.isnan(value):
        return -1
    if top <= 0 or value <= 0:
        return 0
    filled = round(min(value, top) / top * LEVELS * rows)
    return max(1, filled)


def graph_rows(values: Sequence[float], top: float, width: int, rows: int = 1) -> list[str]:
    """The last ``width`` values as ``rows`` strings (top row first), right-aligned, blank where NaN."""
    if width <= 0 or rows <= 0:
        return [""] * max(rows, 0)
    shown = list(values[-width:])
    levels = [-1] * (width - len(shown)) + [level(v, top, rows) for v in shown]
    out = []
    for row in range(rows - 1, -1, -1):
        base = row * LEVELS
        out.append(
            "".join(BLOCKS[min(LEVELS, max(0, lv - base))] if lv >= 0 else " " for lv in levels)
        )
    return out


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
