"""Nested cross-validation for ``gpumon predict``'s intervals (benchmarks/predict_accuracy.py's last tables).

Outer folds are families (a workload on the H100, a model on Lucid's GPU): each pair is scored once, in the fold of
the first of its families (sorted) not yet scored. Everything a fold's prediction uses is fitted on the pairs that
do not contain that family: the constants (where the predictor fits any) and the interval's width, E = the 95th
percentile of |log(measured / predicted)| over inner leave-one-family-out predictions of those training pairs
(each inner fold fitted without its family too). The held-out pairs are then predicted with r * exp(+-E_r),
STP * exp(+-E_STP): out-of-fold coverage, every bound > 0 by construction. A predictor that fits nothing (constants
measured by probes, or chosen before any pair) needs no inner folds: each training pair's prediction is already out
of sample, so E is sized on the training pairs themselves, each once (a fold with one training pair gets a width).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from gpumon.core.records.rates import stp, verdict

# a predictor: given the indices of its training pairs, a function from a pair's index to its predicted (r_a, r_b)
Predictor = Callable[[frozenset[int]], Callable[[int], tuple[float, float]]]


@dataclass(frozen=True)
class Scored:
    """One held-out pair: predicted r and STP, the widths it was given, and its interval bounds."""

    index: int
    pred: tuple[float, float]
    width: tuple[float, float]  # E_r, E_STP (log)
    r_low: tuple[float, float]
    r_high: tuple[float, float]
    stp: float
    stp_low: float
    stp_high: float

    @property
    def verdict(self) -> str:
        return verdict(self.stp_low, self.stp_high)


def log_errors(
    pairs: Sequence[int],
    measured: Callable[[int], tuple[float, float]],
    predict: Callable[[int], tuple[float, float]],
) -> tuple[list[float], list[float]]:
    """|log(measured / predicted)| of each r and of each pair's STP."""
    er, es = [], []
    for i in pairs:
        m, p = measured(i), predict(i)
        er += [abs(math.log(a / b)) for a, b in zip(m, p)]
        es.append(abs(math.log(stp(m) / stp(p))))
    return er, es


def e95(errors: Sequence[float]) -> float:
    """The smallest E that at least 95 % of the errors fall within."""
    ranked = sorted(errors)
    return ranked[max(0, math.ceil(0.95 * len(ranked)) - 1)] if ranked else math.nan


def folds(
    indices: Sequence[int], families: Callable[[int], frozenset[str]]
) -> list[tuple[str, list[int]]]:
    """(family, held-out pairs): each pair in the fold of the first of its families (sorted) not yet scored."""
    out, done = [], set()
    for fam in sorted({f for i in indices for f in families(i)}):
        held = [i for i in indices if fam in families(i) and i not in done]
        done.update(held)
        if held:
            out.append((fam, held))
    return out


def width(
    train: Sequence[int],
    families: Callable[[int], frozenset[str]],
    measured: Callable[[int], tuple[float, float]],
    predictor: Predictor,
) -> tuple[float, float]:
    """E_r, E_STP from inner leave-one-family-out predictions of ``train`` alone."""
    er: list[float] = []
    es: list[float] = []
    for fam in sorted({f for i in train for f in families(i)}):
        inner = frozenset(i for i in train if fam not in families(i))
        held = [i for i in train if fam in families(i)]
        if not inner or not held:
            continue
        a, b = log_errors(held, measured, predictor(inner))
        er += a
        es += b
    return e95(er), e95(es)


def nested(
    indices: Sequence[int],
    families: Callable[[int], frozenset[str]],
    measured: Callable[[int], tuple[float, float]],
    predictor: Predictor,
    pool: Sequence[int] | None = None,
    fits: bool = True,
) -> list[Scored]:
    """Each pair of ``indices`` predicted and given intervals by nested cross-validation (module docstring);
    ``pool``: the pairs a fold may train on (default ``indices``); ``fits``: False for a predictor that fits
    nothing (its width is sized on the training pairs' own errors, no inner folds)."""
    pool = list(indices if pool is None else pool)
    scored = []
    for fam, held in folds(indices, families):
        train = [i for i in pool if fam not in families(i)]
        if not train:
            continue
        if fits:
            e_r, e_s = width(train, families, measured, predictor)
        else:
            errors = log_errors(train, measured, predictor(frozenset(train)))
            e_r, e_s = e95(errors[0]), e95(errors[1])
        if math.isnan(e_r):
            continue
        predict = predictor(frozenset(train))
        for i in held:
            p = predict(i)
            s = stp(p)
            scored.append(
                Scored(
                    i,
                    p,
                    (e_r, e_s),
                    (p[0] * math.exp(-e_r), p[1] * math.exp(-e_r)),
                    (p[0] * math.exp(e_r), p[1] * math.exp(e_r)),
                    s,
                    s * math.exp(-e_s),
                    s * math.exp(e_s),
                )
            )
    return scored
