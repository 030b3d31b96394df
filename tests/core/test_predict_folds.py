"""benchmarks/predict_folds.py: the nested cross-validation behind predict_accuracy's out-of-fold table. A pair's
interval width and constants never come from its own family's pairs."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from predict_folds import e95, folds, nested  # noqa: E402

FAMILIES = {0: {"a"}, 1: {"a", "b"}, 2: {"b"}, 3: {"c"}, 4: {"c", "b"}, 5: {"a", "c"}}


def fam(i: int) -> frozenset[str]:
    return frozenset(FAMILIES[i])


def test_each_pair_is_scored_once_in_the_fold_of_its_first_unscored_family():
    got = folds(list(FAMILIES), fam)
    assert [f for f, _ in got] == ["a", "b", "c"]
    assert sorted(i for _, held in got for i in held) == list(FAMILIES)
    assert got[0][1] == [0, 1, 5]


def test_no_width_or_fit_ever_sees_a_pair_of_the_held_out_family():
    """Family a's pairs miss by a factor 100 and the others by 1.1: were a's own pairs in its fold's width or fit,
    the width would be ln 100; no prediction is ever made by a fit trained on that very pair."""
    seen: list[tuple[frozenset[int], int]] = []

    def predictor(train: frozenset[int]):
        def predict(i: int) -> tuple[float, float]:
            seen.append((train, i))
            return (1.0, 1.0)

        return predict

    def measured(i: int) -> tuple[float, float]:
        return (100.0, 100.0) if "a" in fam(i) else (1.1, 1.1)

    rows = nested(list(FAMILIES), fam, measured, predictor)
    held_a = dict(folds(list(FAMILIES), fam))["a"]
    assert {r.index for r in rows} == set(FAMILIES)
    for r in rows:
        if r.index in held_a:
            assert r.width[0] == pytest.approx(math.log(1.1))
    assert all(i not in train for train, i in seen)


def test_widths_are_the_95th_percentile_of_the_log_errors():
    assert e95([0.1] * 19 + [5.0]) == pytest.approx(0.1)
    rows = nested(list(FAMILIES), fam, lambda i: (2.0, 2.0), lambda t: lambda i: (1.0, 1.0))
    for r in rows:
        assert r.width[0] == pytest.approx(math.log(2.0))
        assert r.r_low[0] == pytest.approx(0.5) and r.r_high[0] == pytest.approx(2.0)
        assert r.stp_low > 0
