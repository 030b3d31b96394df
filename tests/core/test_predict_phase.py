"""The beside-partner phase: the job's turns per step and switch cost read back from it, its use by the pair
model (on the H100's measured pairs, tests/data/h100_pairs.json), and predict reading a phase run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumon.analysis.predict import partner_phase, predict, read_jobs
from gpumon.analysis.predict_model import (
    TIMESLICE,
    UNCALIBRATED,
    Constants,
    Solo,
    _arrivals,
    kernel_s,
    predict_pair,
    turns,
)
from gpumon.analysis.predict_phase import Phase, partner_spec, sharing, with_phase
from gpumon.core.store import calibration
from gpumon.core.store.trace import load_run
from tests.tracegen import SIMULATED_GPU, staggered_pair

PAIRS = json.loads((Path(__file__).parents[1] / "data" / "h100_pairs.json").read_text())["pairs"]
# `gpumon calibrate` on the H100, 2026-11-26 (docs/validation-h100-2026-11-26/calibration), two turns assumed
PROBED = Constants(slice_s=2.173e-3, switch_s=7.26e-5, util_scale=1.0153, sm_fill=0.925, turns=2.0)


@given(
    g=st.floats(0.0, 0.05),
    off=st.floats(1e-4, 0.01),
    m=st.floats(1.0, 20.0),
    sigma=st.floats(0.0, 1e-3),
)
def test_sharing_reads_back_the_turns_and_switch_the_phase_was_made_of(
    g: float, off: float, m: float, sigma: float
):
    """A phase built from the equations (docs/predict.md) gives back its m and sigma_j."""
    c = Constants(slice_s=2e-3, switch_s=1e-4, util_scale=1.0)
    solo = Solo(step_s=g + off, busy=g / (g + off))
    g = kernel_s(solo, c)
    step = g + m * sigma + (m - 1) * (c.slice_s + sigma) + max(off, c.slice_s + sigma)
    pressure = g + 2 * m * sigma
    got = sharing(solo, Phase(step, 100.0, 100.0 * (1 - pressure / step)), c)
    assert got.turns == pytest.approx(m, rel=1e-6, abs=1e-6)
    assert got.switch_s == pytest.approx(sigma, rel=1e-6, abs=1e-9)


def test_without_the_partner_alone_the_phase_gives_turns_but_keeps_the_gpus_switch():
    c = Constants(slice_s=2e-3, switch_s=1e-4, util_scale=1.0)
    solo = Solo(step_s=1e-3, busy=0.0)
    step = 2 * 1e-4 + (c.slice_s + 1e-4) + (c.slice_s + 1e-4)  # two whole waits, no kernels
    got = sharing(solo, Phase(step, math.nan, 50.0), c)
    assert got.turns == pytest.approx(2.0) and math.isnan(got.switch_s)
    assert (
        with_phase(solo, Phase(step, math.nan, 50.0), c).switch_s != c.switch_s
    )  # NaN: not measured


def _solo(d: dict) -> Solo:
    return Solo(step_s=d["step_s"], busy=d["busy"], copy_s=d["copy_s"])


def _phases() -> dict[str, Phase]:
    """Each H100 workload's phase beside gemm, emulated from its measured pair with gemm."""
    out = {}
    for p in PAIRS:
        names = [n.split(":")[-1] for n in p["names"]]
        if p["dataset"] != "h100-ts" or not p["names"][0].startswith("q4:") or "gemm" not in names:
            continue
        x = 1 if names[0] == "gemm" else 0
        job, partner = _solo(p["solo"][x]), _solo(p["solo"][1 - x])
        out[names[x]] = Phase(
            p["measured"][x] * job.step_s,
            1 / partner.step_s,
            1 / (p["measured"][1 - x] * partner.step_s),
        )
    return out


def _mape(pairs: list[dict], c: Constants, phases: dict[str, Phase] | None) -> float:
    errors = []
    for p in pairs:
        solos = [_solo(s) for s in p["solo"]]
        if phases is not None:
            names = [n.split(":")[-1] for n in p["names"]]
            solos = [with_phase(s, phases.get(n), c) for s, n in zip(solos, names)]
        got = predict_pair(solos[0], solos[1], TIMESLICE, c).slowdown
        errors += [abs(x - m) / m for x, m in zip(got, p["measured"])]
    return 100 * sum(errors) / len(errors)


def test_each_jobs_phase_predicts_the_h100_pairs_it_was_not_taken_from():
    """Probe constants, nothing fitted: the phase (emulated from each job's pair with gemm) brings the pairs without
    gemm from 17 % to under 7 % MAPE of r; h2d and fcn wait about two turns a step, resnet50 about eleven."""
    held_out = [p for p in PAIRS if p["dataset"] == "h100-ts" and "gemm" not in str(p["names"])]
    assert len(held_out) == 9
    phases = _phases()
    solo_only = _mape(held_out, Constants(**{**PROBED.to_dict(), "turns": 1.0}), None)
    with_phases = _mape(held_out, PROBED, phases)
    assert solo_only > 15 and with_phases < 7
    fcn = [p for p in PAIRS if p["names"] == ["q4:gemm", "fcn"]][0]
    turns = sharing(_solo(fcn["solo"][1]), phases["fcn"], PROBED).turns
    assert 1.8 < turns < 2.2


def test_two_turns_assumed_bring_the_h100_probe_constants_near_ten_percent():
    """Without a phase predict assumes k0 = 2 turns a step where probes gave the constants."""
    every = [p for p in PAIRS if p["dataset"] == "h100-ts"]
    one = _mape(every, Constants(**{**PROBED.to_dict(), "turns": 1.0}), None)
    two = _mape(every, PROBED, None)
    assert one > 15 and two < 11 and UNCALIBRATED.turns == 2.0


def test_partner_spec_follows_the_jobs_preset():
    assert partner_spec("fcn:preset=tiny,batch=8") == "gemm:preset=tiny"
    assert partner_spec("fcn") == "gemm" and partner_spec("") == "gemm"
    # the options are everything after the first colon, colons in their values included
    assert partner_spec("fcn:preset=tiny,note=a:b") == "gemm:preset=tiny"
    assert partner_spec("fcn:note=a:b,preset=tiny") == "gemm:preset=tiny"


def test_sharing_reads_the_kernels_through_the_gpus_constants_and_the_copies_apart():
    """Worked by hand: kappa 0.5, u 0.6, T 10 ms, C 1 ms give G = 2.5 ms and H + C = 7.5 ms; a phase built from
    m = 3 and sigma_j = 0.2 ms (T'_p = 15 ms, lambda * T'_p = 3.7 ms) reads back as those."""
    c = Constants(slice_s=2e-3, switch_s=1e-4, util_scale=0.5)
    solo = Solo(step_s=10e-3, busy=0.6, copy_s=1e-3)
    step = 2.5e-3 + 3 * 2e-4 + 2 * (2e-3 + 2e-4) + 7.5e-3
    assert step == pytest.approx(15e-3)
    got = sharing(solo, Phase(step, 100.0, 100.0 * (1 - 3.7e-3 / step)), c)
    assert got.turns == pytest.approx(3.0, rel=1e-9)
    assert got.switch_s == pytest.approx(2e-4, rel=1e-6)
    assert got.pressure_s == pytest.approx(3.7e-3, rel=1e-9)


@pytest.mark.parametrize("step", [0.0, -1e-3, math.nan])
def test_a_phase_without_a_step_time_gives_nothing(step: float):
    got = sharing(Solo(step_s=10e-3, busy=0.5), Phase(step, 100.0, 50.0))
    assert all(math.isnan(x) for x in (got.turns, got.switch_s, got.pressure_s))


def test_predict_reads_a_phase_run_as_the_jobs_solo_capture_and_its_phase(
    tmp_path: Path, monkeypatch
):
    """A alone for 10 s at 40 it/s, then beside gemm at 28 it/s, gemm there at 19 it/s (25 alone, as calibrated)."""
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "store"))
    run = load_run(staggered_pair(tmp_path / "run", gpu=True))
    ends, phase = partner_phase(run) or (None, None)
    assert ends is not None and phase is not None
    assert max(ends["A"][0]) < 10.0  # the solo part only
    assert phase.step_s == pytest.approx(1 / 28, rel=0.05)
    assert phase.partner_beside == pytest.approx(19, rel=0.05)
    assert math.isnan(phase.partner_alone)  # no calibration of this GPU yet
    (job, _), _ = read_jobs([run])
    assert job.rate == pytest.approx(40, rel=0.05) and not math.isnan(job.solo.turns)
    calibration.save(
        calibration.Calibration(
            SIMULATED_GPU["name"],
            {"slice_s": 0.002, "switch_s": 0.0001, "util_scale": 1.0},
            details={"partner_rate": 25.0},
        )
    )
    (_, phase) = partner_phase(run) or (None, None)
    assert phase is not None and phase.loss == pytest.approx(1 - 19 / 25, rel=0.05)
    (p,) = predict([run])
    assert not any("no beside-partner phase" in n for n in p.notes)
    # a phase captured under MPS gives the solo part but no turns (they are time slicing's)
    mps_run = staggered_pair(tmp_path / "mps", gpu=True)
    meta = json.loads((mps_run / "run.json").read_text())
    meta["share"] = {"mode": "mps", "threads": None, "existing_daemon": False}
    (mps_run / "run.json").write_text(json.dumps(meta))
    (mps_job, _), _ = read_jobs([load_run(mps_run)])
    assert mps_job.rate == pytest.approx(40, rel=0.05) and math.isnan(mps_job.solo.turns)
    plain = load_run(staggered_pair(tmp_path / "plain", gpu=False))
    assert partner_phase(plain) is not None  # a CPU phase run reads too (it means little there)


def test_measured_turns_are_at_least_one_and_set_how_often_a_turn_is_pending():
    """Worked by hand: the job measured 3 turns a step (T' 15 ms), the other not (its kernels, 10 ms a step, need
    5 slices of 2 ms, above k0 = 2); the job has a turn pending at 3 * 20 ms / (15 ms * 5) = 0.8 of the other's
    turn ends, at every one when that exceeds 1."""
    c = Constants(slice_s=2e-3, switch_s=1e-4, util_scale=1.0, turns=2.0)
    job, other = Solo(step_s=0.01, busy=0.2, turns=3.0), Solo(step_s=0.02, busy=0.5)
    assert turns(job, c) == 3.0 and turns(other, c) == pytest.approx(5.0)
    assert (
        turns(Solo(step_s=0.01, turns=1.5), c) == 1.5
        and turns(Solo(step_s=0.01, turns=0.5), c) == 1.0
    )
    assert _arrivals(job, 0.015, other, 0.02, c) == pytest.approx(0.8)
    assert (
        _arrivals(job, 0.0075, other, 0.02, c) == 1.0
    )  # 1.6: a turn pending at each of the other's
    assert _arrivals(job, 0.0, other, 0.02, c) == 0.0  # no shared step: nothing pending
    assert _arrivals(other, 0.015, job, 0.02, c) == 0.0  # unmeasured: its busy share alone says
