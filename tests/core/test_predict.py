"""``gpumon predict``'s model on hand-built solo profiles with known answers, and its readers on real H100 captures."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumon.analysis.predict import (
    better,
    intervals,
    lacking,
    predict,
    read_jobs,
)
from gpumon.analysis.predict_model import (
    CPU,
    DEFAULT,
    ERRORS,
    FITTED,
    MPS,
    TIMESLICE,
    UNCALIBRATED,
    PairPrediction,
    Solo,
    holds,
    kernel_s,
    mps_step,
    predict_pair,
    reason,
    sm_fill,
    timeslice_step,
)
from gpumon.analysis.predict_model import (
    H100 as H100_NAME,
)
from gpumon.core.store import calibration
from gpumon.core.store.trace import load_run
from gpumon.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "h100_q4"
H100_MPS = DATA / "h100_mps"
CPU_PAIR = DATA / "cpu_same_core"
TAU, SIGMA = DEFAULT.slice_s, DEFAULT.switch_s


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
    assert (
        reason(short, long, TIMESLICE, ("fcn", "vgg19"))
        == "fcn's short kernels wait for vgg19's time slices"
    )


def test_two_gpu_bound_jobs_under_mps_split_the_sms_their_kernels_fill():
    # H = C = 0: T' = G / (1 - f * G / T')  =>  T' = G * (1 + f), r = 1 + f
    measured = Solo(step_s=1.0, busy=1.0, fill=0.5)  # GPM: the kernels keep half the SMs active
    assert predict_pair(measured, measured, MPS).slowdown == pytest.approx((1.5, 1.5), rel=1e-9)
    blind = Solo(step_s=1.0, busy=1.0)  # no GPM: f = gamma * u
    assert predict_pair(blind, blind, MPS).slowdown[0] == pytest.approx(
        1 + DEFAULT.sm_fill, rel=1e-9
    )
    assert sm_fill(Solo(step_s=1.0, busy=0.5)) == pytest.approx(DEFAULT.sm_fill * 0.5)
    assert (
        reason(blind, blind, MPS) == "both GPU-bound: under MPS their kernels compete for the SMs"
    )


def test_under_mps_short_kernels_wait_for_the_sms_a_gpu_bound_partner_holds():
    short = Solo(
        step_s=1e-3, busy=0.5, fill=0.0
    )  # G = H = 0.5 ms; its kernels hold no SMs the partner wants
    long = Solo(
        step_s=1.0, busy=1.0, fill=0.9
    )  # runs kernels all the time (e = 1) on 90 % of the SMs
    p = predict_pair(short, long, MPS)
    # the long job loses nothing (f = 0 beside it); the short one progresses on the 10 % left: T' = H + G / (1 - 0.9)
    assert p.step_s == pytest.approx((0.5e-3 + 0.5e-3 / 0.1, 1.0), rel=1e-9)
    assert p.slowdown == pytest.approx((5.5, 1.0), rel=1e-9)
    assert reason(short, long, MPS, ("fcn", "vgg19")) == (
        "fcn's kernels wait for the SMs vgg19's kernels hold (no preemption under MPS)"
    )
    # a partner holding every SM all the time still lets my blocks in as its own end: the guard, not infinity
    full = Solo(step_s=1.0, busy=1.0, fill=1.0)
    assert predict_pair(short, full, MPS).step_s[0] == pytest.approx(
        0.5e-3 + 0.5e-3 / (1 - DEFAULT.max_held)
    )
    # no kernels: nothing to wait for under MPS either
    assert predict_pair(Solo(step_s=1e-3, busy=0.0), long, MPS).slowdown == pytest.approx(
        (1.0, 1.0)
    )


def test_intervals_are_log_space_widened_by_the_model_error_the_solo_spread_and_what_the_inputs_lack():
    point = PairPrediction(MPS, (2.0, 1.0), (2.0, 1.0), 1.5)
    (ra, rb), pair = intervals([point], MPS, (0.0, 0.1))
    e_a, e_b = ERRORS.base(MPS), math.hypot(ERRORS.base(MPS), 0.1)
    assert (ra.low, ra.high) == pytest.approx((2 * math.exp(-e_a), 2 * math.exp(e_a)))
    assert (rb.low, rb.high) == pytest.approx((math.exp(-e_b), math.exp(e_b)))
    # STP's own leave-out error, and the spread of B's rate weighted by B's share of the STP (1 of 1.5)
    e_stp = math.hypot(ERRORS.base(MPS, "stp"), 0.1 / 1.5)
    assert (pair.value, pair.low, pair.high) == pytest.approx(
        (1.5, 1.5 * math.exp(-e_stp), 1.5 * math.exp(e_stp))
    )
    # several points (what the evidence leaves open): the interval spans them all
    other = PairPrediction(MPS, (3.0, 1.0), (3.0, 1.0), 4 / 3)
    (ra, _), pair = intervals([point, other], MPS)
    assert ra.value == 2.0 and ra.high == pytest.approx(3 * math.exp(e_a))
    assert pair.low == pytest.approx(4 / 3 * math.exp(-ERRORS.base(MPS, "stp")))
    # a missing input's term adds in quadrature to r's and STP's
    (ra, _), pair = intervals([point], MPS, (0.0, 0.0), (0.3, 0.2))
    assert ra.high == pytest.approx(2 * math.exp(math.hypot(e_a, 0.3)))
    assert pair.high == pytest.approx(1.5 * math.exp(math.hypot(ERRORS.base(MPS, "stp"), 0.2)))


@given(
    r=st.floats(1.0, 10.0),
    widen=st.floats(0.0, 5.0),
    spread=st.floats(0.0, 3.0),
)
def test_every_bound_is_positive_however_wide(r: float, widen: float, spread: float):
    """The issue's probe widening (110 %) gave a low bound of -0.22 in linear space; in log space none is <= 0."""
    point = PairPrediction(TIMESLICE, (r, 1.0), (r, 1.0), 1 / r + 1)
    (ra, rb), pair = intervals([point], TIMESLICE, (spread, 0.0), (widen, widen))
    for e in (ra, rb, pair):
        assert 0 < e.low <= e.value <= e.high


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
    busy = Solo(
        step_s=0.005, cpu_share=1.0, cores=frozenset({0, 1})
    )  # two threads busy: the box is full
    assert predict_pair(busy, busy, CPU).slowdown == pytest.approx((2.0, 2.0))
    assert "take turns" in reason(busy, busy, CPU)


def test_h100_captures_predict_with_intervals_and_json_shape():
    """q4 on the H100 measured fcn r 3.04, gemm r 1.45, STP 1.02 time-sliced (docs/predict.md)."""
    runs = [load_run(H100 / "x-fcn"), load_run(H100 / "x-gemm")]
    preds = predict(runs, "all")
    assert [p.share for p in preds] == [TIMESLICE, MPS]
    ts = preds[0]
    fcn, gemm = ts.slowdown
    assert fcn.value > 2.5 and gemm.value < 1.7  # fcn's short kernels wait for gemm's slices
    assert (
        fcn.low <= 3.04 <= fcn.high
        and gemm.low <= 1.45 <= gemm.high
        and ts.stp.low <= 1.02 <= ts.stp.high
    )
    assert ts.reason.endswith("time slices") and "short kernels" in ts.reason
    assert (
        ts.verdict == "cannot tell"
    )  # STP ~0.96 with its interval across 1: neither pays nor loses is proven
    data = ts.to_dict()
    assert set(data["workloads"]["A"]["slowdown"]) == {"estimate", "low", "high"}
    assert data["pair"]["share"] == TIMESLICE and data["pair"]["verdict"] == "cannot tell"
    assert data["pair"]["stp"]["low"] < 1 < data["pair"]["stp"]["high"]
    # the constants used, named: the H100's are fitted on its own captures
    assert data["model"]["gpu"] == H100_NAME and data["model"]["calibrated"] is True
    assert (
        data["model"]["constants"] == FITTED[H100_NAME].to_dict()
        and "fitted" in data["model"]["source"]
    )
    assert not any("uncalibrated" in n for n in data["notes"])
    json.dumps(data, allow_nan=False)
    # MPS's STP interval (1.21 [1.09, 1.33]) lies above time slicing's: under MPS fcn's kernels run beside gemm's
    assert better(preds) == MPS and preds[1].stp.low > ts.stp.high


def test_a_switch_costs_only_when_both_contexts_have_work():
    light = Solo(step_s=0.01, busy=0.3)  # 3 ms of kernels, 7 ms on the host: one turn a step
    p = predict_pair(light, light, TIMESLICE)
    # the partner has kernels ready a share rho of the time: the switch is paid that often, not every step, and
    # the partner's short hold hides in the host time: T' = G + rho*sigma + H
    rho = 1 - 0.007 / p.step_s[0]
    assert p.step_s[0] == pytest.approx(0.003 + rho * SIGMA + 0.007, rel=1e-9)
    assert 1 < p.slowdown[0] < 1 + SIGMA / 0.01
    assert reason(light, light, TIMESLICE).startswith("light jobs")
    # two jobs whose kernels need more than the GPU has: no longer light, their GPU parts take turns
    fcn = Solo(
        step_s=2.05e-3, busy=0.70, copy_s=0.06e-3
    )  # the H100's fcn alone (q4): fcn + fcn measured r 1.67
    assert reason(fcn, fcn, TIMESLICE) == "host parts overlap while the GPU parts take turns"
    assert predict_pair(fcn, fcn, TIMESLICE).slowdown[0] == pytest.approx(1.67, rel=0.1)


def test_a_context_that_runs_out_of_work_yields_before_its_slice_ends():
    light, bound = Solo(step_s=0.01, busy=0.3), Solo(step_s=0.1, busy=1.0)
    # two light jobs hand the GPU back and forth: each holds what queued while the other held, b = i(b' + 2s)/(1 - i)
    b = holds(light, light)
    assert b[0] == pytest.approx(b[1]) and b[0] == pytest.approx(
        0.3 * (b[0] + 2 * SIGMA) / 0.7, rel=1e-9
    )
    assert b[0] < TAU / 2
    # beside a GPU-bound job, whose work never runs out, the light job's holds grow (capped by its G) and the bound
    # one holds whole slices
    held = holds(light, bound)
    assert held[1] == pytest.approx(TAU) and held[0] == pytest.approx(
        min(0.003, 0.3 * (TAU + 2 * SIGMA) / 0.7)
    )


def test_the_utilisation_scale_reads_nvml_busy_time_as_less_kernel_time():
    import dataclasses

    job = Solo(step_s=0.01, busy=0.8, copy_s=0.001)
    scaled = dataclasses.replace(DEFAULT, util_scale=0.6)
    assert kernel_s(job) == pytest.approx(0.007) and kernel_s(job, scaled) == pytest.approx(
        0.6 * 0.007
    )
    assert (
        predict_pair(job, job, TIMESLICE, scaled).slowdown[0]
        < predict_pair(job, job, TIMESLICE).slowdown[0]
    )


def _renamed(src: Path, dst: Path, gpu: str) -> Path:
    run = json.loads((src / "run.json").read_text())
    return _copy(src, dst, gpu={**run["gpu"], "name": gpu})


def test_a_gpu_never_calibrated_gets_the_default_constants_and_wider_intervals(
    tmp_path: Path, monkeypatch
):
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "store"))
    runs = [load_run(_renamed(H100 / n, tmp_path / n, "NVIDIA L4")) for n in ("x-fcn", "x-gemm")]
    (other,) = predict(runs)
    (h100,) = predict([load_run(H100 / "x-fcn"), load_run(H100 / "x-gemm")])
    assert (
        other.model is not None
        and not other.model.calibrated
        and other.model.constants == UNCALIBRATED
    )
    assert any(n.startswith("uncalibrated for NVIDIA L4: intervals widened") for n in other.notes)
    # the defaults for any GPU are not the H100's (its kappa 1.0 read Lucid's utilisation as kernel time)
    assert other.slowdown[0].value != pytest.approx(h100.slowdown[0].value)
    width = [math.log(e.high / e.low) for e in (other.slowdown[0], h100.slowdown[0])]
    assert width[0] == pytest.approx(
        width[1]
        * math.hypot(ERRORS.base(TIMESLICE), ERRORS.uncalibrated[0])
        / ERRORS.base(TIMESLICE)
    )


def test_a_calibrated_gpu_gets_its_own_constants(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "store"))
    calibration.save(
        calibration.Calibration(
            "NVIDIA L4",
            {"slice_s": 0.002, "switch_s": 0.0001, "util_scale": 0.9},
            measured_at="2026-11-26T00:00:00Z",
        )
    )
    runs = [load_run(_renamed(H100 / n, tmp_path / n, "NVIDIA L4")) for n in ("x-fcn", "x-gemm")]
    ts, mps = predict(runs, "all")
    assert (
        ts.model.calibrated
        and ts.model.constants.slice_s == 0.002
        and ts.model.constants.util_scale == 0.9
    )
    assert "gpumon calibrate 2026-11-26T00:00:00Z" in ts.model.source and not any(
        "uncalibrated" in n for n in ts.notes
    )
    # a shorter slice: fcn waits less for gemm's turns than with the H100's 3.5 ms
    assert (
        ts.slowdown[0].value
        < predict([load_run(H100 / "x-fcn"), load_run(H100 / "x-gemm")])[0].slowdown[0].value
    )
    # MPS's SM fill was not measured: that mode says so and widens
    assert not mps.model.calibrated and any(
        "uncalibrated for NVIDIA L4" in n and "sm_fill" in n for n in mps.notes
    )
    # a file that is not a calibration is ignored, with the reason
    calibration.path_for("NVIDIA L4").write_text("{not json")
    (ts,) = predict(runs)
    assert not ts.model.calibrated and any(n.startswith("calibration ignored:") for n in ts.notes)


def test_probe_constants_widen_the_intervals_and_yield_to_pair_fitted_ones(
    tmp_path: Path, monkeypatch
):
    """The H100's own probes (docs/validation.md: τ 2.17 ms, σ 0.073 ms) predicted its pairs worse than the
    pair-fitted constants: on a GPU with pairs fitted they are not used, elsewhere they widen the intervals."""
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "store"))
    probed = {"slice_s": 0.00217, "switch_s": 0.000073, "util_scale": 1.015, "sm_fill": 0.925}
    calibration.save(
        calibration.Calibration(
            H100_NAME, probed, measured_at="2026-11-26T10:50:09Z", device="cuda"
        )
    )
    (h100,) = predict([load_run(H100 / "x-fcn"), load_run(H100 / "x-gemm")])
    assert (
        h100.model.constants == FITTED[H100_NAME]
        and h100.model.calibrated
        and not h100.model.probed
    )
    assert "fitted on" in h100.model.source
    assert (
        "slice_s, switch_s, util_scale from `gpumon calibrate`'s probes not used: the ones fitted on this GPU's "
        "pairs predict its pairs better (docs/validation.md)"
    ) in h100.notes
    # the same probes on a GPU with no pairs fitted: used, and the intervals widened by their measured error
    calibration.save(
        calibration.Calibration(
            "NVIDIA L4", probed, measured_at="2026-11-26T10:50:09Z", device="cuda"
        )
    )
    runs = [load_run(_renamed(H100 / n, tmp_path / n, "NVIDIA L4")) for n in ("x-fcn", "x-gemm")]
    (l4,) = predict(runs)
    assert l4.model.probed and l4.model.calibrated and l4.model.constants.slice_s == 0.00217
    assert (
        l4.model.to_dict()["probed"] is True
        and "gpumon calibrate 2026-11-26T10:50:09Z" in l4.model.source
    )
    assert any(
        n.startswith("slice_s, switch_s, util_scale measured by `gpumon calibrate`'s probes")
        for n in l4.notes
    )
    # fitted on pairs measured on the L4 (--from-pairs): the same numbers are not widened
    calibration.save(
        calibration.Calibration(
            "NVIDIA L4",
            probed,
            device=calibration.FROM_PAIRS,
            details={"fitted": ["slice_s", "switch_s", "util_scale"]},
        )
    )
    (pairs,) = predict(runs)
    assert not pairs.model.probed and pairs.model.constants == l4.model.constants
    width = [math.log(e.high / e.low) for e in (l4.slowdown[0], pairs.slowdown[0])]
    assert width[0] == pytest.approx(
        width[1] * math.hypot(ERRORS.base(TIMESLICE), ERRORS.probed[0]) / ERRORS.base(TIMESLICE)
    )
    # a from-pairs file of the H100 wins over the shipped fit, for what it fitted; its probe sm_fill does not
    calibration.save(
        calibration.Calibration(
            H100_NAME,
            probed,
            device=calibration.FROM_PAIRS,
            details={"fitted": ["slice_s", "switch_s", "util_scale"]},
        )
    )
    ts, mps = predict([load_run(H100 / "x-fcn"), load_run(H100 / "x-gemm")], "all")
    assert (
        ts.model.constants.slice_s == 0.00217
        and not ts.model.probed
        and "gpumon calibrate" in ts.model.source
    )
    assert mps.model.constants.sm_fill == FITTED[H100_NAME].sm_fill and not mps.model.probed
    # under MPS the probes' constants are said, not widened: they predicted the H100's MPS pairs as well as fitted
    calibration.save(calibration.Calibration("NVIDIA L4", probed, device="cuda"))
    ts, mps = predict(runs, "all")
    assert mps.model.probed and any("as well as the pair-fitted ones" in n for n in mps.notes)
    assert (
        lacking(mps.jobs, MPS, True, mps.model.constants, probed=True)[0]
        == lacking(mps.jobs, MPS)[0]
    )
    assert lacking(ts.jobs, TIMESLICE, True, ts.model.constants, probed=True)[0] == ERRORS.probed


def test_a_calibrations_pair_fitted_constants():
    probe = calibration.Calibration("G", {"slice_s": 0.002, "sm_fill": 0.9}, device="cuda")
    old = calibration.Calibration(
        "G", {"slice_s": 0.002, "sm_fill": 0.9}, device=calibration.FROM_PAIRS
    )
    new = calibration.Calibration(
        "G",
        {"slice_s": 0.002, "sm_fill": 0.9},
        device=calibration.FROM_PAIRS,
        details={"fitted": ["slice_s"]},
    )
    assert (probe.pair_fitted, old.pair_fitted, new.pair_fitted) == (
        frozenset(),
        {"slice_s", "sm_fill"},
        {"slice_s"},
    )


def _without_copy_times(src: Path, dst: Path) -> Path:
    """A copy of a capture whose job timed no copy and declares none (as a --cmd job without probe.copy)."""
    run = json.loads((src / "run.json").read_text())
    for w in run["workloads"]:
        w["meta"].pop("copy_bytes_per_step", None)
    _copy(src, dst, workloads=run["workloads"])
    lines = (dst / "steps.csv").read_text().splitlines()
    rows = [",".join(line.split(",")[:-2] + ["0", ""]) for line in lines[1:]]
    (dst / "steps.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    return dst


def test_runs_without_copy_times_or_outside_the_checked_utilisation_widen_the_intervals(
    tmp_path: Path,
):
    fcn, gemm = (
        read_jobs([load_run(H100 / "x-fcn")])[0][0],
        read_jobs([load_run(H100 / "x-gemm")])[0][0],
    )
    assert (
        fcn.copies and gemm.copies
    )  # fcn timed its copies; gemm, a built-in job, declares it copies nothing
    blind = read_jobs([load_run(_without_copy_times(H100 / "x-fcn", tmp_path / "blind"))])[0][0]
    assert not blind.copies and blind.solo.copy_s == 0.0
    assert lacking([fcn, gemm], TIMESLICE) == ((0.0, 0.0), [])
    widen, notes = lacking([blind, gemm], TIMESLICE)
    assert widen == pytest.approx(ERRORS.no_copies) and notes[0].startswith(
        "no copy time recorded for A"
    )
    import dataclasses

    idle = dataclasses.replace(gemm, solo=dataclasses.replace(gemm.solo, busy=0.05))
    widen, notes = lacking([fcn, idle], TIMESLICE, calibrated=False)
    assert widen == pytest.approx(
        tuple(math.hypot(a, b) for a, b in zip(ERRORS.uncalibrated, ERRORS.outside))
    )
    assert "A's GPU utilisation 5 % outside the 9-100 %" in notes[0]  # gemm, read alone, is an A
    # under MPS without GPM the model says what it assumes (no widening: its error was measured without GPM)
    assumed = f"no GPM SM activity: a job's kernels are taken to hold gamma*u of the SMs (gamma {DEFAULT.sm_fill:.2f})"
    assert lacking([fcn, gemm], MPS)[1] == [assumed]


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
    copier = Solo(
        step_s=1e-3, busy=1.0, copy_s=1e-3
    )  # all copy, no kernels: no time slice to wait for
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
    assert sm_fill(gpm) == pytest.approx(0.5) and sm_fill(plain) == pytest.approx(
        DEFAULT.sm_fill * plain.busy
    )


# Below: the model's equations (docs/predict.md) on inputs whose answers are derived by hand in the comments, each
# case chosen so that a wrong index, constant or comparison in gpumon.analysis.predict_model changes the result.


def test_under_mps_two_gpu_bound_jobs_with_different_fills_solve_the_linear_pair():
    # H = C = 0: with x = G_A/T'_A and y = G_B/T'_B (the shares each executes), x = 1 - f_B*y and y = 1 - f_A*x, so
    # x = (1 - f_B)/(1 - f_A*f_B) = 0.2/0.6 = 1/3 and y = 0.5/0.6 = 5/6: r_A = 1/x = 3, r_B = 1/y = 1.2
    p = predict_pair(
        Solo(step_s=1.0, busy=1.0, fill=0.5), Solo(step_s=2.0, busy=1.0, fill=0.8), MPS
    )
    assert p.mode == MPS
    assert p.step_s == pytest.approx((3.0, 2.4), rel=1e-9)
    assert p.slowdown == pytest.approx((3.0, 1.2), rel=1e-9)
    assert p.stp == pytest.approx(1 / 3 + 1 / 1.2, rel=1e-9)
    # on millisecond steps the fixed point is solved as closely: f = 0.8 each, x = 1 - 0.8x, x = 1/1.8, T' = 1.8 ms
    ms = Solo(step_s=1e-3, busy=1.0, fill=0.8)
    assert predict_pair(ms, ms, MPS).step_s == pytest.approx((1.8e-3, 1.8e-3), rel=1e-9)


def test_a_gpus_own_constants_reach_every_term_of_the_mps_step():
    c = dataclasses.replace(DEFAULT, util_scale=0.5, sm_fill=0.4)
    job = Solo(step_s=1.0, busy=1.0)
    # G = kappa*u*T = 0.5, H = T - G = 0.5, f = gamma*u = 0.4: T' = H + G/(1 - f*G/T'), i.e. (T' - 0.5)(T' - 0.2) = 0.5T',
    # T'^2 - 1.2T' + 0.1 = 0: T' = (1.2 + sqrt(1.04))/2
    expected = (1.2 + math.sqrt(1.04)) / 2
    p = predict_pair(job, job, MPS, c)
    assert p.mode == MPS and p.step_s == pytest.approx((expected, expected), rel=1e-9)
    # kappa*u = 0.5: neither is GPU-bound under these constants
    assert (
        reason(job, job, MPS, c=c)
        == "kernels run side by side under MPS and fill each other's idle SMs"
    )


def test_a_gpus_own_constants_reach_every_term_of_the_time_sliced_step():
    tau, sigma = 2e-3, 1e-4
    c = dataclasses.replace(DEFAULT, slice_s=tau, switch_s=sigma, util_scale=0.5)
    job = Solo(step_s=0.2, busy=1.0)
    # G = 0.5*0.2 = 0.1, H = 0.1, n = G/tau = 50 turns; both hold whole slices (i = 1/2: b = b' + 2*sigma grows to tau).
    # T' = G + rho*K + max(H, rho*(tau + sigma)) with K = n*sigma + (n - 1)*(tau + sigma), and rho = 1 - H/T' (H is the
    # larger: rho*(tau + sigma) < 2.1 ms): H = (1 - rho)(G + H + rho*K), K*rho^2 + (G + H - K)*rho - G = 0
    g = h = 0.1
    k = 50 * sigma + 49 * (tau + sigma)
    rho = (-(g + h - k) + math.sqrt((g + h - k) ** 2 + 4 * k * g)) / (2 * k)
    p = predict_pair(job, job, TIMESLICE, c)
    assert p.mode == TIMESLICE
    assert p.step_s == pytest.approx((h / (1 - rho), h / (1 - rho)), rel=1e-9)
    assert p.slowdown[0] == pytest.approx(h / (1 - rho) / 0.2, rel=1e-9)


def test_copies_stretched_by_the_partners_copies_are_solved_for_each_job():
    # No kernels: T' = H + C*(1 + k'), k = C*(1 + k')/T'. Chosen so that k_A = 1/2 and k_B = 1/4:
    # A: H = 0.5, C = 0.4 -> 0.4*1.25 = 0.5 copying, T'_A = 1.0, k_A = 0.5/1.0; B: H = 0.9, C = 0.2 -> 0.2*1.5 = 0.3,
    # T'_B = 1.2, k_B = 0.3/1.2 = 1/4. Solo: T_A = 0.9, T_B = 1.1
    a, b = Solo(step_s=0.9, busy=0.0, copy_s=0.4), Solo(step_s=1.1, busy=0.0, copy_s=0.2)
    for mode in (TIMESLICE, MPS):
        p = predict_pair(a, b, mode)
        assert p.step_s == pytest.approx((1.0, 1.2), rel=1e-9), mode
        assert p.slowdown == pytest.approx((1.0 / 0.9, 1.2 / 1.1), rel=1e-9), mode


def test_one_jobs_time_sliced_step_from_its_inputs():
    short, long = (
        Solo(step_s=1e-3, busy=0.5),
        Solo(step_s=1.0, busy=1.0),
    )  # G = H = 0.5 ms; the long one holds tau
    # partner always ready, its hold left to the model: the long job holds a whole slice: T' = G + sigma + (tau + sigma)
    assert timeslice_step(short, long, 1.0) == pytest.approx(0.5e-3 + SIGMA + TAU + SIGMA)
    # a hold given: T' = G + sigma + (1 ms + sigma)
    assert timeslice_step(short, long, 1.0, hold=1e-3) == pytest.approx(
        0.5e-3 + SIGMA + 1e-3 + SIGMA
    )
    # partner ready a tenth of the time: its wait (0.41 ms) hides in my host time and copies (H = 0.4, C = 0.1 ms, no
    # partner copies): T' = G + 0.1*sigma + H + C
    copier = Solo(step_s=1e-3, busy=0.6, copy_s=0.1e-3)
    assert timeslice_step(copier, long, 0.1) == pytest.approx(0.5e-3 + 0.1 * SIGMA + 0.5e-3)
    # the GPU's own constants: tau = 5 ms, kappa = 0.5: G = 0.25 ms, H = 0.75 ms; holds: the short job's i = 1/4 caps
    # it at its G (0.25 ms < (b' + 2*sigma)/3), the long one's i = 1/2 gives b = 0.25 + 1.2 = 1.45 ms (under tau):
    # T' = 0.25 + 0.6 + max(0.75, 1.45 + 0.6) = 2.9 ms
    c = dataclasses.replace(DEFAULT, slice_s=5e-3, util_scale=0.5)
    assert holds(short, long, c) == pytest.approx((0.25e-3, 1.45e-3))
    assert timeslice_step(short, long, 1.0, c=c) == pytest.approx(2.9e-3)


def test_one_jobs_mps_step_from_its_inputs():
    # G = 0.5 ms, H = 0.4 ms, C = 0.1 ms (no partner copies); the partner holds f*e = 0.5*0.5 of the SMs:
    # T' = H + C + G/(1 - 0.25)
    me = Solo(step_s=1e-3, busy=0.6, copy_s=0.1e-3)
    assert mps_step(me, Solo(step_s=1.0, busy=1.0, fill=0.5), 0.5) == pytest.approx(
        0.5e-3 + 0.5e-3 / 0.75
    )


def test_inputs_outside_their_range_are_clamped_and_missing_ones_read_as_stated():
    assert kernel_s(Solo(step_s=1.0, busy=1.3)) == pytest.approx(
        1.0
    )  # utilisation above 100 %: the whole step
    assert sm_fill(Solo(step_s=1.0, busy=1.3)) == pytest.approx(DEFAULT.sm_fill)
    assert sm_fill(Solo(step_s=1.0, busy=0.5, fill=1.5)) == 1.0  # at most every SM
    assert sm_fill(Solo(step_s=1.0)) == 0.0  # no NVML, no GPM: no SMs known to be held
    # a job with no step time has no kernel rate: it holds nothing, and its partner holds what queues in two switches
    assert holds(Solo(step_s=0.0), Solo(step_s=0.01, busy=0.3)) == pytest.approx(
        (0.0, 0.3 * 2 * SIGMA / 0.7)
    )


def test_cpu_shares_unknown_or_above_one_count_as_one_core_and_the_room_limit_is_inclusive():
    one = frozenset({0})
    unknown = Solo(step_s=0.01, cores=one)  # no cpu_pct: assume it keeps its core busy
    assert predict_pair(unknown, unknown, CPU).slowdown == pytest.approx((2.0, 2.0))
    half, over = (
        Solo(step_s=0.01, cpu_share=0.5, cores=one),
        Solo(step_s=0.01, cpu_share=1.5, cores=one),
    )
    assert predict_pair(half, over, CPU).slowdown == pytest.approx(
        (2.0, 1.5)
    )  # T*(1 + 1) and T*(1 + 0.5)
    # 0.525 + 0.525 = 1 + CORE_ROOM exactly: still room for both
    edge = Solo(step_s=0.01, cpu_share=0.525, cores=one)
    assert predict_pair(edge, edge, CPU).slowdown == pytest.approx((1.0, 1.0))
    # one job pinned, the other's cores unknown: no CPU prediction for either
    p = predict_pair(half, Solo(step_s=0.01, cpu_share=0.5), CPU)
    assert (
        p.mode == CPU
        and math.isnan(p.slowdown[0])
        and math.isnan(p.slowdown[1])
        and math.isnan(p.stp)
    )


def test_the_cpu_reasons_name_the_case():
    a = Solo(step_s=0.01, cpu_share=1.0, cores=frozenset({0}))
    b = Solo(step_s=0.02, cpu_share=1.0, cores=frozenset({1}))
    assert reason(a, b, CPU) == "pinned to different cores: neither waits for the other"
    assert (
        reason(a, a, CPU) == "both on the same cores, more than they hold: they take turns on them"
    )


def test_the_mps_reason_names_which_job_waits_and_when_none_does():
    short, long = Solo(step_s=1e-3, busy=0.5), Solo(step_s=1.0, busy=1.0)
    assert reason(long, short, MPS, ("vgg19", "fcn")) == (
        "fcn's kernels wait for the SMs vgg19's kernels hold (no preemption under MPS)"
    )
    side_by_side = "kernels run side by side under MPS and fill each other's idle SMs"
    assert reason(short, short, MPS) == side_by_side  # neither GPU-bound
    assert (
        reason(Solo(step_s=1e-3, busy=0.0), long, MPS) == side_by_side
    )  # no kernels of its own: nothing waits
    edge = Solo(step_s=1.0, busy=0.85)  # 85 % busy is GPU-bound
    assert reason(edge, edge, MPS) == "both GPU-bound: under MPS their kernels compete for the SMs"
    assert reason(edge, edge, TIMESLICE) == "both GPU-bound: time slices split the GPU"


def test_the_time_sliced_reason_needs_short_kernels_beside_whole_slices_of_long_ones():
    overlap = "host parts overlap while the GPU parts take turns"
    short, long = Solo(step_s=1e-3, busy=0.5), Solo(step_s=1.0, busy=1.0)
    assert (
        reason(long, short, TIMESLICE, ("vgg19", "fcn"))
        == "fcn's short kernels wait for vgg19's time slices"
    )
    # B's kernels of 2.5 tau are long (more than two slices); exactly two slices are not
    assert (
        reason(short, Solo(step_s=2.5 * TAU, busy=1.0), TIMESLICE)
        == "A's short kernels wait for B's time slices"
    )
    assert reason(short, Solo(step_s=2 * TAU, busy=1.0), TIMESLICE) == overlap
    # kernels of exactly one slice are not short
    assert reason(Solo(step_s=2 * TAU, busy=0.5), long, TIMESLICE) == overlap
    # neither short (50 and 80 ms of kernels), neither GPU-bound, kernels 1.3 of the GPU: they take turns
    assert reason(Solo(step_s=0.1, busy=0.5), Solo(step_s=0.1, busy=0.8), TIMESLICE) == overlap
    # kernels needing exactly the whole GPU (1/2 + 1/2) are no longer light
    half = Solo(step_s=1.0, busy=0.5)
    assert reason(half, half, TIMESLICE) == overlap
    light = Solo(step_s=0.01, busy=0.3)
    assert reason(light, light, TIMESLICE) == (
        "light jobs: each yields the GPU as soon as its kernels are done, and the other fills its gaps"
    )


def test_the_time_sliced_reason_uses_the_gpus_own_constants():
    c = dataclasses.replace(DEFAULT, slice_s=5e-3, switch_s=1.5e-3, util_scale=0.5)
    short = Solo(step_s=6e-3, busy=1.0)  # G = 3 ms < tau (6 ms under kappa 1)
    # B: G = 0.5 s; holds: A capped at its G (i = 1/2: b = b' + 2*sigma), B at tau (3 + 3 ms > 5 ms)
    assert holds(short, Solo(step_s=1.0, busy=1.0), c) == pytest.approx((3e-3, 5e-3))
    assert (
        reason(short, Solo(step_s=1.0, busy=1.0), TIMESLICE, c=c)
        == "A's short kernels wait for B's time slices"
    )
    # B: G = 7.5 ms, not over two slices (10 ms; its 15 ms under kappa 1 would be)
    assert reason(short, Solo(step_s=15e-3, busy=1.0), TIMESLICE, c=c) == (
        "host parts overlap while the GPU parts take turns"
    )
    # 80 % busy reads as 40 % kernels each: light, and not GPU-bound
    light = Solo(step_s=0.1, busy=0.8)
    assert reason(light, light, TIMESLICE, c=c).startswith("light jobs")


def test_time_sliced_jobs_with_kernels_and_copies_wait_as_often_as_the_partner_has_kernels_ready():
    # n = 1 turn each (G < tau), sigma = 0.1 ms; chosen backwards from k_A = 1/2, k_B = 1/4 (the shares each copies),
    # rho_A = 0.4, rho_B = 0.25 (the shares each has kernels ready) and T'_A = 1.0 ms, T'_B = 1.2 ms:
    #   k_A = C_A*(1 + k_B)/T'_A: C_A = 0.4 ms;  k_B = C_B*(1 + k_A)/T'_B: C_B = 0.2 ms
    #   my host part and copies, stretched by the partner's: off_A = H_A + 0.4*1.25 = 0.6 ms (H_A = 0.1),
    #   off_B = H_B + 0.2*1.5 = 0.9 ms (H_B = 0.6)
    #   T' = G + rho'*sigma + off (the partner's hold, at most its G, hides in off): G_A = 1.0 - 0.025 - 0.6 = 0.375 ms,
    #   G_B = 1.2 - 0.04 - 0.9 = 0.26 ms; and rho = 1 - off/T' holds: 1 - 0.6/1.0 = 0.4, 1 - 0.9/1.2 = 0.25
    # So T_A = G + C + H = 0.875 ms at u = 0.775/0.875, T_B = 1.06 ms at u = 0.46/1.06.
    c = dataclasses.replace(DEFAULT, switch_s=1e-4)
    a = Solo(step_s=0.875e-3, busy=0.775 / 0.875, copy_s=0.4e-3)
    b = Solo(step_s=1.06e-3, busy=0.46 / 1.06, copy_s=0.2e-3)
    p = predict_pair(a, b, TIMESLICE, c)
    assert p.step_s == pytest.approx((1.0e-3, 1.2e-3), rel=1e-9)
    assert p.slowdown == pytest.approx((1 / 0.875, 1.2 / 1.06), rel=1e-9)
