"""Known answers for the named parts that long functions were split into (issue 44): the py-spy frame tables, a
priced point of the device-cost report, and the pair's Prometheus families."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gpumon.analysis.slowdown import Estimate
from gpumon.core.capture.metrics import DEVICE_LABELS, pair_families
from gpumon.core.records.rates import CANNOT_TELL, PAYS, VERDICTS, Interference
from gpumon.experiments.runner.manifest import OK
from gpumon.experiments.study.frames import Recording, similarity_rows, top_frames
from gpumon.experiments.study.results import Context
from gpumon.experiments.study.sweep import Cost, Point


def context_of(*keys: str) -> Context:
    """A context holding one cell of ``keys`` (all the frame tables read of it)."""
    return cast(Context, SimpleNamespace(cells=[SimpleNamespace(keys=keys)]))


ALONE = Recording("fcn", None, {"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 2.0})
SHARED = Recording("fcn", "gemm", {"b": 1.0, "c": 4.0}, {"b": 1.0, "c": 4.0})


def test_similarity_rows_give_the_plain_and_weighted_jaccard_per_co_runner() -> None:
    # frames {a, b} alone and {b, c} shared: 1/3; self-time shares (.5, .5, 0) against (0, .2, .8): .2/1.8
    assert similarity_rows(context_of("fcn", "gemm"), [ALONE, SHARED]) == [
        ["fcn", "gemm", "0.33", "0.11"]
    ]
    assert (
        similarity_rows(context_of("fcn", "gemm"), [SHARED]) == []
    )  # nothing alone to compare with


def test_top_frames_rank_by_the_two_shares_together_and_mark_a_missing_side() -> None:
    lines = top_frames("fcn", [ALONE, SHARED])
    assert lines[0] == "### fcn: top frames by self time"
    rows = [line for line in lines if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == ["c", "b", "a"]  # .8, .5 + .2, .5
    alone_only = top_frames("fcn", [ALONE])
    assert any(
        line.startswith("| `a` |") and line.rstrip(" |").endswith("n/a") for line in alone_only
    )
    assert top_frames("gemm", [ALONE, SHARED]) == []


def point(status: str, rate: Estimate) -> Point:
    return Point(
        key="fcn",
        spec="fcn:preset=tiny",
        point=(("device", "cpu"),),
        cells=[],
        status=status,
        rate=rate,
        batch=1.0,
        copy_bandwidth=math.nan,
        cpu_pct=math.nan,
        ignored={},
    )


def test_a_cost_prices_1000_iterations_with_the_interval_turned_round() -> None:
    cost = Cost.of(point(OK, Estimate(10.0, 8.0, 12.5)), {"cpu": 0.72, "cuda": 3.0})
    assert cost.device == "cpu" and cost.price == 0.72
    assert (cost.seconds.value, cost.seconds.low, cost.seconds.high) == pytest.approx(
        (100, 80, 125)
    )
    assert (cost.cost.value, cost.cost.low, cost.cost.high) == pytest.approx((0.02, 0.016, 0.025))
    failed = Cost.of(point("failed: OOM", Estimate(math.nan)), {"cpu": 0.72})
    assert failed.row(cast(Context, None)) == ["fcn", "cpu", "failed: OOM", "", "0.72", "", ""]


def interference(stp: float, verdict: str) -> Interference:
    return Interference({}, {}, stp, verdict, "")


def samples(families: list[Any]) -> dict[tuple[str, str], float]:
    return {(f.name, s.labels.get("verdict", "")): s.value for f in families for s in f.samples}


def test_the_pair_families_wait_for_an_stp_then_name_one_verdict() -> None:
    base = [f"label-{k}" for k in DEVICE_LABELS]
    assert list(pair_families(base, interference(math.nan, ""))) == []
    found = samples(list(pair_families(base, interference(1.4, PAYS))))
    assert found[("gpumon_pair_stp_ratio", "")] == 1.4
    assert {v: found[("gpumon_pair_verdict", v)] for v in VERDICTS} == {
        v: 1.0 if v == PAYS else 0.0 for v in VERDICTS
    }
    assert found[("gpumon_pair_verdict", CANNOT_TELL)] == 0.0
