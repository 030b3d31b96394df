"""Time shares of named items (operators, Python frames) and the Jaccard similarities between them."""

from __future__ import annotations

import math
from typing import Iterable, Mapping


def shares(times: Mapping[str, float]) -> dict[str, float]:
    """Each item's fraction of the total (empty when the total is zero)."""
    total = sum(times.values())
    return {k: v / total for k, v in times.items()} if total > 0 else {}


def pooled(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Item times summed over several recordings."""
    out: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            out[key] = out.get(key, 0.0) + value
    return out


def weighted_jaccard(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Σ min / Σ max of two share vectors: 1 = the same time distribution, 0 = nothing in common."""
    keys = set(a) | set(b)
    top = sum(max(a.get(k, 0.0), b.get(k, 0.0)) for k in keys)
    return sum(min(a.get(k, 0.0), b.get(k, 0.0)) for k in keys) / top if top > 0 else math.nan


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B| of two sets."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else math.nan
