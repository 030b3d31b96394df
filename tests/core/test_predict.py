"""``gpumon predict``'s model on hand-built solo profiles with known answers, and its readers on real H100 captures."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from gpumon.analysis.predict import better, intervals, predict, read_jobs
from gpumon.analysis.predict_model import (
    CONSTANTS, CPU, MPS, TIMESLICE, PairPrediction, Solo, predict_pair, reason, sm_fill,
)
from gpumon.core.store.trace import load_run
from gpumon.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "h100_q4"
H100_MPS = DATA / "h100_mps"
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


def test_two_gpu_bound_jobs_under_mps_split_the_sms_their_kernels_fill():
    # H = C = 0: T' = G / (1 - f * G / T')  =>  T' = G * (1 + f), r = 1 + f
    measured = Solo(step_s=1.0, busy=1.0, fill=0.5)  # GPM: the kernels keep half the SMs active
    assert predict_pair(measured, measured, MPS).slowdown == pytest.approx((1.5, 1.5), rel=1e-9)
    blind = Solo(step_s=1.0, busy=1.0)  # no GPM: f = gamma * u
    assert predict_pair(blind, blind, MPS).slowdown[0] == pytest.approx(1 + CONSTANTS.sm_fill, rel=1e-9)
    assert sm_fill(Solo(step_s=1.0, busy=0.5)) == pytest.approx(CONSTANTS.sm_fill * 0.5)
    assert reason(blind, blind, MPS) == "both GPU-bound: under MPS their kernels compete for the SMs"


def test_under_mps_short_kernels_wait_for_the_sms_a_gpu_bound_partner_holds():
    short = Solo(step_s=1e-3, busy=0.5, fill=0.0)  # G = H = 0.5 ms; its kernels hold no SMs the partner wants
    long = Solo(step_s=1.0, busy=1.0, fill=0.9)  # runs kernels all the time (e = 1) on 90 % of the SMs
    p = predict_pair(short, long, MPS)
    # the long job loses nothing (f = 0 beside it); the short one progresses on the 10 % left: T' = H + G / (1 - 0.9)
    assert p.step_s == pytest.approx((0.5e-3 + 0.5e-3 / 0.1, 1.0), rel=1e-9)
    assert p.slowdown == pytest.approx((5.5, 1.0), rel=1e-9)
    assert reason(short, long, MPS, ("fcn", "vgg19")) == (
        "fcn's kernels wait for the SMs vgg19's kernels hold (no preemption under MPS)")
    # a partner holding every SM all the time still lets my blocks in as its own end: the guard, not infinity
    full = Solo(step_s=1.0, busy=1.0, fill=1.0)
    assert predict_pair(short, full, MPS).step_s[0] == pytest.approx(0.5e-3 + 0.5e-3 / (1 - CONSTANTS.max_held))
    # no kernels: nothing to wait for under MPS either
    assert predict_pair(Solo(step_s=1e-3, busy=0.0), long, MPS).slowdown == pytest.approx((1.0, 1.0))


def test_intervals_widen_r_by_the_model_error_and_the_solo_spread():
    point = PairPrediction(MPS, (2.0, 1.0), (2.0, 1.0), 1.5)
    (ra, rb), pair = intervals([point], MPS, (0.0, 0.1))
    e_a, e_b = CONSTANTS.r_error(MPS), math.hypot(CONSTANTS.r_error(MPS), 0.1)
    assert (ra.low, ra.high) == pytest.approx((2 * (1 - e_a), 2 * (1 + e_a)))
    assert (rb.low, rb.high) == pytest.approx((1 - e_b, 1 + e_b))
    # STP's own leave-out error, and the spread of B's rate weighted by B's share of the STP (1 of 1.5)
    e_stp = math.hypot(CONSTANTS.stp_error(MPS), 0.1 / 1.5)
    assert (pair.value, pair.low, pair.high) == pytest.approx((1.5, 1.5 * (1 - e_stp), 1.5 * (1 + e_stp)))
    # several points (what the evidence leaves open): the interval spans them all
    other = PairPrediction(MPS, (3.0, 1.0), (3.0, 1.0), 4 / 3)
    (ra, _), pair = intervals([point, other], MPS)
    assert ra.value == 2.0 and ra.high == pytest.approx(3 * (1 + e_a))
    assert pair.low == pytest.approx(4 / 3 * (1 - CONSTANTS.stp_error(MPS)))


def test_pinned_cores_same_core_doubles_different_cores_do_not_interfere():
    a = Solo(step_s=0.01, cpu_share=1.0, cores=frozenset({0}))
    b = Solo(step_s=0.02, cpu_share=1.0, cores=frozenset({1}))
    assert predict_pair(a, a, CPU).slowdown == pytest.approx((2.0, 2.0))
    assert predict_pair(a, b, CPU).slowdown == pytest.approx((1.0, 1.0))
    half = Solo(step_s=0.01, cpu_share=0.5, cores=frozenset({0}))
    assert predict_pair(a, half, CPU).slowdown == pytest.approx((1.5, 2.0))


def test_unpinned_single_threaded_jobs_on_two_cores_do_not_wait():
    # Each alone kept one of the box's two cores busy (cpu 100 %, affinity {0, 1}: share 0.5); measured on the
    # 2-core VM, fcn beside lstm unpinned: r 1.00 and 1.00, STP 2.00. Four such jobs would not fit.
    one = Solo(step_s=0.005, cpu_share=0.5, cores=frozenset({0, 1}))
    other = Solo(step_s=0.002, cpu_share=0.499, cores=frozenset({0, 1}))
    assert predict_pair(one, other, CPU).slowdown == pytest.approx((1.0, 1.0))
    assert reason(one, other, CPU) == "their cores have room for both: neither waits for the other"
    busy = Solo(step_s=0.005, cpu_share=1.0, cores=frozenset({0, 1}))  # two threads busy: the box is full
    assert predict_pair(busy, busy, CPU).slowdown == pytest.approx((2.0, 2.0))
    assert "take turns" in reason(busy, busy, CPU)


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
    stp = data["pair"]["stp"]
    assert stp["low"] <= stp["estimate"] <= stp["high"]
    # the verdict the printed STP interval implies: pays wholly above 1, loses wholly below, else cannot tell
    implied = "pays" if stp["low"] > 1 else "loses" if stp["high"] < 1 else "cannot tell"
    assert data["pair"]["share"] == TIMESLICE and data["pair"]["verdict"] == implied
    json.dumps(data, allow_nan=False)
    # the better mode: the one whose STP interval lies wholly above the other's, else none
    (ts_low, ts_high), (mps_low, mps_high) = ((p.stp.low, p.stp.high) for p in preds)
    assert better(preds) == (MPS if mps_low > ts_high else TIMESLICE if ts_low > mps_high else None)


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


def test_mps_on_the_h100_captures_fcn_waits_for_vgg19s_sms():
    """Measured under MPS on this H100: fcn r 2.77, vgg19 r 1.23, STP 1.17 (modes.tgz)."""
    (p,) = predict([load_run(H100_MPS / "x-fcn"), load_run(H100_MPS / "x-vgg19")], MPS)
    fcn, vgg19 = (r.value for r in p.slowdown)
    assert fcn > 2.2 and vgg19 < 1.4 and fcn > 1.5 * vgg19
    assert p.stp.value > 1 and "kernels wait for the SMs" in p.reason


def _with_gpm(src: Path, dst: Path, active_share: float) -> Path:
    """A copy of an H100 capture whose device.csv carries GPM's SM activity: ``active_share`` of its utilisation."""
    from gpumon.core.records.model import DEVICE_COLUMNS

    shutil.copytree(src, dst)
    lines = (dst / "device.csv").read_text().splitlines()
    old = lines[0].split(",")
    rows = []
    for line in lines[1:]:
        cells = dict(zip(old, line.split(",")))
        cells["sm_active_pct"] = str(float(cells["gpu_util"]) * active_share)
        rows.append(",".join(cells.get(c, "") for c in DEVICE_COLUMNS))
    (dst / "device.csv").write_text("\n".join([",".join(DEVICE_COLUMNS), *rows]) + "\n")
    return dst


def test_gpm_sm_activity_is_the_fill_and_nvml_utilisation_the_busy_share(tmp_path: Path):
    plain = read_jobs([load_run(H100 / "x-gemm")])[0][0].solo
    gpm = read_jobs([load_run(_with_gpm(H100 / "x-gemm", tmp_path / "gemm", 0.5))])[0][0].solo
    assert math.isnan(plain.fill) and gpm.fill == pytest.approx(0.5)
    assert gpm.busy == pytest.approx(plain.busy)  # time slicing still sees the whole busy time
    assert sm_fill(gpm) == pytest.approx(0.5) and sm_fill(plain) == pytest.approx(CONSTANTS.sm_fill * plain.busy)
