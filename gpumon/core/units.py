"""Human-readable numbers for status lines and panels (NaN shows as a dash)."""

from __future__ import annotations

import math

DASH = "–"


def fmt_rate(value: float, unit: str = "it/s") -> str:
    if value is None or math.isnan(value):
        return f"{DASH} {unit}"
    if value >= 100:
        return f"{value:.0f} {unit}"
    if value >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def fmt_bytes_per_s(value: float) -> str:
    return f"{fmt_bytes(value)}/s"


def fmt_bytes(value: float) -> str:
    if value is None or math.isnan(value):
        return DASH
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def fmt_pct(value: float) -> str:
    return DASH if value is None or math.isnan(value) else f"{value:.0f}%"


def fmt_mib(value: float) -> str:
    if value is None or math.isnan(value):
        return DASH
    return f"{value / 1024:.2f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def json_number(value: float) -> float | None:
    """NaN becomes None so the value is valid JSON."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value
