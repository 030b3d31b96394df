"""``--baseline A=RUN``: parsed by the CLI, turned into an exclusive rate by the controller."""

from __future__ import annotations

import pytest

from gpumon.core.store.runstore import parse_baselines
from gpumon.errors import UsageError
from gpumon.core.store.trace import baseline_rate
from tests.tracegen import exclusive, staggered_pair


def test_baseline_rate_of_an_exclusive_run(tmp_path):
    run = exclusive(tmp_path / "20261122-113000-fcn-alone", "A", 40.0)
    assert baseline_rate("A", run) == pytest.approx(40.0, rel=0.01)
    assert baseline_rate("B", run) == pytest.approx(40.0, rel=0.01), "a one-job run is that job's baseline in any slot"
    shared = staggered_pair(tmp_path / "pair")
    assert baseline_rate("B", shared) == pytest.approx(19.0, rel=0.05)


def test_cli_baselines(tmp_path):
    exclusive(tmp_path / "20261122-113000-fcn-alone")
    exclusive(tmp_path / "20261122-113100-gemm-alone", spec="gemm:preset=tiny")
    parsed = parse_baselines(["a=20261122-113000-fcn-alone", "B=last"], tmp_path)
    assert parsed == (("A", str(tmp_path / "20261122-113000-fcn-alone")), ("B", str(tmp_path / "20261122-113100-gemm-alone")))
    for bad in (["C=last"], ["A"], ["A=last", "A=last"], ["A=missing-run"]):
        with pytest.raises(UsageError):
            parse_baselines(bad, tmp_path)
