"""The panels' number formats (``core/records/units.py``): a dash for what is missing, k/M/G and GB/s scales."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumon.core.records.units import DASH, bytes_per_s, num, seconds


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (812, "812"),
        (52_000, "52k"),
        (1.2e6, "1.2M"),
        (40.5, "40.5"),
        (0.25, "0.25"),
        (250e3, "250k"),
        (999.7, "1k"),
        (999_960, "1M"),
        (999.6e6, "1G"),
    ],
)
def test_num_scales_to_three_digits(value: float, text: str) -> None:
    assert num(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12.3e9, "12.3 GB/s"),
        (4.56e6, "4.56 MB/s"),
        (7e3, "7 kB/s"),
        (5, "5 B/s"),
        (999.99e6, "1 GB/s"),
    ],
)
def test_bytes_per_s_scales(value: float, text: str) -> None:
    assert bytes_per_s(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(41.2, "41.2 s"), (59.97, "1m00s"), (725, "12m05s"), (3599.7, "1h00m"), (10_920, "3h02m")],
)
def test_seconds_reads_as_minutes_and_hours(value: float, text: str) -> None:
    assert seconds(value) == text


@pytest.mark.parametrize("fmt", [num, bytes_per_s, seconds])
@pytest.mark.parametrize("value", [None, math.nan])
def test_missing_reads_as_a_dash(fmt, value: float | None) -> None:
    assert fmt(value) == DASH


@given(st.floats(min_value=1e3, max_value=1e12, allow_nan=False))
def test_a_scaled_number_reads_back_within_half_a_percent(value: float) -> None:
    text = num(value)
    scale = {"k": 1e3, "M": 1e6, "G": 1e9}[text[-1]]
    assert float(text[:-1]) * scale == pytest.approx(value, rel=5e-3)


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False))
def test_no_number_reads_as_a_thousand_of_a_unit_or_in_e_notation(value: float) -> None:
    """Three digits at most before k or M: never ``1000k`` nor ``1e+03 MB/s``."""
    number, unit = bytes_per_s(value).split()
    shown = num(value)
    for digits, scaled in (
        (number, unit in ("kB/s", "MB/s")),
        (shown.rstrip("kMG"), shown[-1] in "kM"),
    ):
        assert "e" not in digits
        assert not scaled or float(digits) < 1000, (value, shown, number, unit)


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_seconds_never_shows_sixty_of_a_unit(value: float) -> None:
    text = seconds(value)
    if text.endswith(" s"):
        assert float(text[:-2]) < 60
    elif "h" in text:
        assert int(text.split("h")[1][:-1]) < 60
    else:
        assert int(text.split("m")[1][:-1]) < 60
