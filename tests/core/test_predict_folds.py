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


def test_a_predictor_that_fits_nothing_is_sized_on_its_training_pairs_once_each():
    """Nothing fitted: no inner folds, each training pair's own error counts once, and a fold with one training pair
    (too few for an inner fold) still gets a width from it, never from the held-out family's pairs."""
    two = {0: {"a"}, 1: {"b"}}

    def measured(i: int) -> tuple[float, float]:
        return (100.0, 100.0) if i == 0 else (1.5, 1.5)

    def pairs_of(i: int) -> frozenset[str]:
        return frozenset(two[i])

    constant = lambda train: lambda i: (1.0, 1.0)  # noqa: E731
    assert nested(list(two), pairs_of, measured, constant) == []  # inner folds: none possible
    rows = {r.index: r for r in nested(list(two), pairs_of, measured, constant, fits=False)}
    assert rows[0].width[0] == pytest.approx(math.log(1.5))  # a's width from b's pair alone
    assert rows[1].width[0] == pytest.approx(math.log(100.0))
    assert rows[0].r_high[0] == pytest.approx(1.5) and rows[0].r_low[0] > 0
