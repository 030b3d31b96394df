"""Human-readable numbers for status lines and panels (NaN shows as a dash)."""

from __future__ import annotations

import math

DASH = "–"


def fmt_rate(value: float | None, unit: str = "it/s") -> str:
    """``12.5 it/s``; a rate under one step a second reads as a step's time (``1 step / 6.2 s``), never ``0.00``."""
    if missing(value):
        return f"{DASH} {unit}"
    assert value is not None
    if unit == "it/s" and 0 < value < 1:
        return f"1 step / {1 / value:.1f} s"
    if value >= 100:
        return f"{value:.0f} {unit}"
    if value >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def json_number(value: float | None) -> float | None:
    """NaN becomes None so the value is valid JSON."""
    return None if missing(value) else value


def missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def num(value: float | None) -> str:
    """Up to three significant digits with a k/M/G suffix, trailing zeros dropped: 812, 52k, 1.2M, 40.5, 0.25."""
    if missing(value):
        return DASH
    assert value is not None
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return (
                f"{value / scale:.3g}{suffix}"
                if value / scale < 100
                else f"{value / scale:.0f}{suffix}"
            )
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}" if abs(value) >= 1 else f"{value:.2f}"


def pct(value: float | None) -> str:
    return DASH if missing(value) else f"{value:.0f}%"


def used_total(used_mib: float | None, total_mib: float | None) -> str:
    """``7.5/40 GiB`` (MiB under 1 GiB totals)."""
    if missing(used_mib):
        return DASH
    assert used_mib is not None
    if missing(total_mib):
        return f"{used_mib / 1024:.1f} GiB" if used_mib >= 1024 else f"{used_mib:.0f} MiB"
    assert total_mib is not None
    if total_mib >= 1024:
        return f"{used_mib / 1024:.1f}/{total_mib / 1024:.0f} GiB"
    return f"{used_mib:.0f}/{total_mib:.0f} MiB"


def bytes_per_s(value: float | None) -> str:
    """``12.3 GB/s`` with three significant digits."""
    if missing(value):
        return DASH
    assert value is not None
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B/s"


def seconds(value: float | None) -> str:
    """``41.2 s``, ``12m05s``, ``3h02m``."""
    if missing(value):
        return DASH
    assert value is not None
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{int(value // 60)}m{int(value % 60):02d}s"
    return f"{int(value // 3600)}h{int(value % 3600 // 60):02d}m"


def plain(value: float | None, unit: str, digits: int = 0) -> str:
    return DASH if missing(value) else f"{value:.{digits}f} {unit}"
