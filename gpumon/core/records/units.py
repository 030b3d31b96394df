"""Human-readable numbers for status lines and panels (NaN shows as a dash)."""

from __future__ import annotations

import functools
import math
from typing import Callable

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


def _or_dash(fmt: Callable[[float], str]) -> Callable[[float | None], str]:
    """``fmt`` for a number, a dash for None or NaN."""

    @functools.wraps(fmt)
    def shown(value: float | None) -> str:
        return DASH if value is None or missing(value) else fmt(value)

    return shown


def _three_digits(value: float) -> str:
    """Three significant digits, never in e notation (a top unit's 1000 and more in full)."""
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


@_or_dash
def num(value: float) -> str:
    """Up to three significant digits with a k/M/G suffix, trailing zeros dropped: 812, 52k, 1.2M, 40.5, 0.25."""
    scaled = _scaled(value, ("G", "M", "k"))
    if scaled is not None:
        return _three_digits(scaled[0]) + scaled[1]
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}" if abs(value) >= 1 else f"{value:.2f}"


# of a scale: a value that three significant digits show as that scale (999.5 -> 1.00e3)
ROUNDS_UP = 0.9995


def _scaled(value: float, units: tuple[str, str, str]) -> tuple[float, str] | None:
    """``value`` in the largest of 1e9, 1e6 and 1e3 that it reaches once shown to three digits (999.7k is 1M, not
    1000k nor 1e+03k), with that scale's unit of ``units``; None under 1e3."""
    for unit, scale in zip(units, (1e9, 1e6, 1e3)):
        if abs(value) >= scale * ROUNDS_UP:
            return value / scale, unit
    return None


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


@_or_dash
def bytes_per_s(value: float) -> str:
    """``12.3 GB/s`` with three significant digits."""
    scaled = _scaled(value, ("GB/s", "MB/s", "kB/s"))
    if scaled is not None:
        return f"{_three_digits(scaled[0])} {scaled[1]}"
    return f"{value:.0f} B/s"


@_or_dash
def seconds(value: float) -> str:
    """``41.2 s``, ``12m05s``, ``3h02m`` (rounded first: 59.97 s is ``1m00s``, never ``60.0 s``)."""
    if value < 59.95:
        return f"{value:.1f} s"
    if round(value) < 3600:
        return "{}m{:02d}s".format(*divmod(round(value), 60))
    return "{}h{:02d}m".format(*divmod(round(value / 60), 60))


def plain(value: float | None, unit: str, digits: int = 0) -> str:
    return DASH if missing(value) else f"{value:.{digits}f} {unit}"
