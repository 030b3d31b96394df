"""``gpumon predict``'s model on hand-built solo profiles with known answers, and its readers on real H100 captures."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from gpumon.analysis.predict import better, predict
from gpumon.analysis.predict_model import CONSTANTS, CPU, MPS, TIMESLICE, Solo, predict_pair, reason
from gpumon.core.trace import load_run
from gpumon.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "h100_q4"
CPU_PAIR = DATA / "cpu_same_core"
TAU, SIGMA = CONSTANTS.slice_s, CONSTANTS.switch_s


def test_two_gpu_bound_jobs_take_turns_in_slices():
    job = Solo(step_s=100 * TAU, busy=1.0)
    p = predict_pair(job, job, TIMESLICE)
    n = 100
    expected = (100 * TAU + n * SIGMA + (n - 1) * (TAU + SIGMA) + (TAU + SIGMA)) / (100 * TAU)
    assert p.slowdown == pytest.approx((expected, expected), rel=1e-9)
    assert p.stp == pytest.approx(2 / expected)
    assert reason(job, job, TIMESLICE) == "both GPU-bound: time slices split the GPU"


def test_a_host_bound_job_beside_an_idle_gpu_job_barely_slows():
    host = Solo(step_s=0.01, busy=0.0)
    p = predict_pair(host, host, TIMESLICE)
    assert p.slowdown == pytest.approx((1.0, 1.0))  # no GPU work: nothing to wait for
    assert p.stp == pytest.approx(2.0)


def test_short_kernels_wait_for_a_gpu_bound_partners_slice():
    short = Solo(step_s=1e-3, busy=0.5)  # G = 0.5 ms, H = 0.5 ms, one turn
    long = Solo(step_s=1.0, busy=1.0)
    p = predict_pair(short, long, TIMESLICE)
    # the long job is always ready (rho = 1): T' = G + sigma + max(H, tau + sigma)
    assert p.step_s[0] == pytest.approx(0.5e-3 + SIGMA + TAU + SIGMA)
    assert p.slowdown[0] > 4 and p.slowdown[1] < p.slowdown[0]
    assert reason(short, long, TIMESLICE, ("fcn", "vgg19")) == "fcn's short kernels wait for vgg19's time slices"


def test_mps_overlaps_kernels_in_proportion_to_the_partners_activity():
    job = Solo(step_s=1.0, busy=1.0)
    p = predict_pair(job, job, MPS)
    assert p.slowdown[0] == pytest.approx(1 + CONSTANTS.mps_contention)
    half = Solo(step_s=1.0, busy=0.0)
    assert predict_pair(job, half, MPS).slowdown == pytest.approx((1.0, 1.0))


def test_pinned_cores_same_core_doubles_different_cores_do_not_interfere():
    a = Solo(step_s=0.01, cpu_share=1.0, cores=frozenset({0}))
    b = Solo(step_s=0.02, cpu_share=1.0, cores=frozenset({1}))
    assert predict_pair(a, a, CPU).slowdown == pytest.approx((2.0, 2.0))
    assert predict_pair(a, b, CPU).slowdown == pytest.approx((1.0, 1.0))
    half = Solo(step_s=0.01, cpu_share=0.5, cores=frozenset({0}))
    assert predict_pair(a, half, CPU).slowdown == pytest.approx((1.5, 2.0))


def test_h100_captures_predict_with_intervals_and_json_shape():
    runs = [load_run(H100 / "x-fcn"), load_run(H100 / "x-gemm")]
    preds = predict(runs, "all")
    assert [p.share for p in preds] == [TIMESLICE, MPS]
    ts = preds[0]
    fcn, gemm = (r.value for r in ts.slowdown)
    assert fcn > 2.5 and gemm < 1.7  # fcn's short kernels wait for gemm's slices (measured 3.04 and 1.45)
    assert ts.reason.endswith("time slices") and "short kernels" in ts.reason
    data = ts.to_dict()
    assert set(data["workloads"]["A"]["slowdown"]) == {"estimate", "low", "high"}
    assert data["pair"]["share"] == TIMESLICE and data["pair"]["verdict"] in ("pays", "loses", "cannot tell")
    assert data["pair"]["stp"]["low"] <= data["pair"]["stp"]["estimate"] <= data["pair"]["stp"]["high"]
    json.dumps(data, allow_nan=False)
    assert better(preds) in (None, MPS)


def _copy(src: Path, dst: Path, **meta) -> Path:
    shutil.copytree(src, dst)
    if meta:
        run = json.loads((dst / "run.json").read_text())
        run.update(meta)
        (dst / "run.json").write_text(json.dumps(run))
    return dst


def test_bad_inputs_are_one_line_usage_errors(tmp_path: Path):
    fcn, gemm = load_run(H100 / "x-fcn"), load_run(H100 / "x-gemm")
    with pytest.raises(UsageError, match="not an exclusive run"):
        predict([fcn, load_run(H100 / "s-gemm+fcn")])
    with pytest.raises(UsageError, match="different devices"):
        predict([fcn, load_run(CPU_PAIR / "x-gemm")])
    other = json.loads((H100 / "x-gemm" / "run.json").read_text())
    other["gpu"]["name"] = "NVIDIA A100-SXM4-40GB"
    with pytest.raises(UsageError, match="different devices"):
        predict([fcn, load_run(_copy(H100 / "x-gemm", tmp_path / "a100", gpu=other["gpu"]))])
    short = _copy(H100 / "x-fcn", tmp_path / "short")
    lines = (short / "steps.csv").read_text().splitlines()
    (short / "steps.csv").write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(UsageError, match="too short"):
        predict([load_run(short), gemm])


def test_without_nvml_the_interval_spans_host_bound_to_gpu_bound(tmp_path: Path):
    blind = _copy(H100 / "x-fcn", tmp_path / "blind", nvml={"available": False})
    (p,) = predict([load_run(blind), load_run(H100 / "x-gemm")])
    assert any("no NVML data for A" in n for n in p.notes)
    assert p.slowdown[0].low < 1.1 and p.slowdown[0].high > 3
    assert p.verdict == "cannot tell" and not math.isnan(p.stp.value)


def test_two_copy_bound_jobs_split_the_link():
    copier = Solo(step_s=1e-3, busy=1.0, copy_s=1e-3)  # all copy, no kernels: no time slice to wait for
    p = predict_pair(copier, copier, TIMESLICE)
    assert p.slowdown == pytest.approx((2.0, 2.0), rel=1e-6)
    beside_host = predict_pair(copier, Solo(step_s=1e-3, busy=0.0), TIMESLICE)
    assert beside_host.slowdown == pytest.approx((1.0, 1.0))
