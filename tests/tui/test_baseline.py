"""``--baseline A=RUN``: parsed by the CLI, turned into an exclusive rate by the controller."""

from __future__ import annotations

import pytest

from gpumon.core.store.runstore import parse_baselines
from gpumon.errors import UsageError
from gpumon.core.store.trace import baseline_rate
from tests.helpers import gpumon, headless_cpu
from tests.tracegen import Job, exclusive, staggered_pair, write_run


def test_baseline_rate_of_an_exclusive_run(tmp_path):
    run = exclusive(tmp_path / "20261122-113000-fcn-alone", "A", 40.0)
    assert baseline_rate("A", run) == pytest.approx(40.0, rel=0.01)
    assert baseline_rate("B", run) == pytest.approx(40.0, rel=0.01), (
        "a one-job run is that job's baseline in any slot"
    )
    shared = staggered_pair(tmp_path / "pair")
    assert baseline_rate("B", shared) == pytest.approx(19.0, rel=0.05)


def test_cli_baselines(tmp_path):
    exclusive(tmp_path / "20261122-113000-fcn-alone")
    exclusive(tmp_path / "20261122-113100-gemm-alone", spec="gemm:preset=tiny")
    parsed = parse_baselines(["a=20261122-113000-fcn-alone", "B=last"], tmp_path)
    assert parsed == (
        ("A", str(tmp_path / "20261122-113000-fcn-alone")),
        ("B", str(tmp_path / "20261122-113100-gemm-alone")),
    )
    for bad in (["C=last"], ["A"], ["A=last", "A=last"], ["A=missing-run"]):
        with pytest.raises(UsageError):
            parse_baselines(bad, tmp_path)


def test_a_baseline_that_never_passed_its_warm_up_is_refused_before_anything_starts(tmp_path):
    """On the H100 a vgg19 captured for 8 s stopped inside its warm-up; as a --baseline the TUI then launched nothing."""
    runs = tmp_path / "runs"
    warm = Job("A", "vgg19", ((2.0, 0.1),), warmup=30, warmup_s=0.3)
    write_run(runs / "20261126-105344-b-alone", (warm,), label="b-alone")
    with pytest.raises(UsageError, match="no job in it stepped past its warm-up"):
        parse_baselines(["B=b-alone"], runs)
    refused = gpumon(
        *headless_cpu(
            runs,
            "gemm:preset=tiny",
            "--baseline",
            "A=b-alone",
        ),
        timeout=120,
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "baseline run 20261126-105344-b-alone has no post-warm-up rate for A" in refused.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["20261126-105344-b-alone"], (
        "nothing was captured"
    )
