"""Tokens per second from samples per second and the tokens per sample a framework callback said (its meta)."""

from __future__ import annotations

import math
from typing import Any


def tokens_per_sample(meta: dict[str, Any]) -> float | None:
    """The job's ``tokens_per_sample`` meta when it is a positive finite number; None otherwise."""
    value = meta.get("tokens_per_sample")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def tokens_per_s(samples_per_s: float, meta: dict[str, Any]) -> float:
    """``samples_per_s`` times the tokens per sample; NaN where either is not known."""
    per_sample = tokens_per_sample(meta)
    return samples_per_s * per_sample if per_sample is not None else math.nan
