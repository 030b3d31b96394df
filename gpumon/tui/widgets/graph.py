"""Fixed-scale history graphs in block characters: 0 to ``top`` always spans the full height."""

from __future__ import annotations

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
