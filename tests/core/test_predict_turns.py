"""Turns per step from a solo capture's step structure (docs/predict.md): m = D + max(1, ceil(G/tau)), D = 1 for a
timed copy the kernels wait for; checked on synthetic jobs with known answers, on the H100's measured pairs
(tests/data/h100_pairs.json, probe constants, nothing fitted) and through predict reading real H100 runs."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumon.analysis.predict import predict, read_jobs
from gpumon.analysis.predict_model import (
    FITTED,
    H100,
    TIMESLICE,
    Constants,
    Solo,
    holds,
    kernel_s,
    kernel_turns,
    predict_pair,
    turns,
)
from gpumon.core.store import calibration
from gpumon.core.store.trace import load_run

DATA = Path(__file__).parents[1] / "data"
PAIRS = json.loads((DATA / "h100_pairs.json").read_text())["pairs"]
# `gpumon calibrate` on the H100, 2026-11-26 (docs/validation-h100-2026-11-26/calibration), k0 = 2
PROBED = Constants(slice_s=2.173e-3, switch_s=7.26e-5, util_scale=1.0153, sm_fill=0.925, turns=2.0)
C = Constants(slice_s=2e-3, switch_s=1e-4, util_scale=1.0, turns=2.0)


def _job(kernels_s: float, host_s: float, copy_s: float, waits: float) -> Solo:
    step = kernels_s + host_s + copy_s
    return Solo(step_s=step, busy=(kernels_s + copy_s) / step, copy_s=copy_s, copy_waits=waits)


def test_known_answers():
    # a light job with no copy waits once a step; with a copy twice (the copy's end makes its queue ready again)
    assert turns(_job(0.5e-3, 1e-3, 0.0, 0.0), C) == pytest.approx(1.0)
    assert turns(_job(0.5e-3, 1e-3, 0.2e-3, 1.0), C) == pytest.approx(2.0)
    # a GPU-bound job: whole slices, the last cut short by the step's end (5.2 ms / 2 ms: 3), plus its copy's wait
    assert turns(_job(5.2e-3, 0.1e-3, 0.0, 0.0), C) == pytest.approx(3.0)
    assert turns(_job(5.2e-3, 0.1e-3, 0.3e-3, 1.0), C) == pytest.approx(4.0)
    # copies unseen (structure unknown): the slices its kernels need, at least k0
    assert turns(_job(5.2e-3, 0.1e-3, 0.0, math.nan), C) == pytest.approx(2.6, rel=1e-6)
    assert turns(_job(0.5e-3, 1e-3, 0.0, math.nan), C) == pytest.approx(2.0)
    # pair-fitted constants (k0 = 1) absorbed the structure in tau and sigma: unchanged by it
    fitted = FITTED[H100]
    job = _job(5.2e-3, 0.1e-3, 0.3e-3, 1.0)
    assert turns(job, fitted) == pytest.approx(kernel_s(job, fitted) / fitted.slice_s)
    # a measured phase overrides the structure
    assert turns(replace(job, turns=7.5), C) == pytest.approx(7.5)


@given(
    g=st.floats(1e-6, 0.2),
    host=st.floats(0.0, 0.05),
    tau=st.floats(1e-4, 1e-2),
    copied=st.booleans(),
)
def test_the_kernels_take_the_fewest_whole_slices_that_hold_them(
    g: float, host: float, tau: float, copied: bool
):
    c = replace(C, slice_s=tau)
    job = _job(g, host, 1e-4 if copied else 0.0, 1.0 if copied else 0.0)
    g = kernel_s(job, c)
    slices = turns(job, c) - (1 if copied else 0)
    assert slices == int(slices) and slices >= 1
    assert (slices - 1) * tau < g * (1 + 1e-9) and g <= slices * tau * (1 + 1e-9)


def _solo(d: dict, structure: bool) -> Solo:
    return Solo(
        step_s=d["step_s"],
        busy=d["busy"],
        copy_s=d["copy_s"],
        copy_waits=d["copy_waits"] if structure else math.nan,
    )


def _mape(structure: bool) -> float:
    errors = []
    for p in (p for p in PAIRS if p["dataset"] == "h100-ts"):
        a, b = (_solo(s, structure) for s in p["solo"])
        got = predict_pair(a, b, TIMESLICE, PROBED).slowdown
        errors += [abs(x - m) / m for x, m in zip(got, p["measured"])]
    return 100 * sum(errors) / len(errors)


def test_the_structure_brings_the_h100_probe_constants_under_ten_percent():
    """The 13 time-sliced H100 pairs with the probes' constants, nothing fitted: 10.2 % MAPE of r with k0 = 2 assumed
    for every job, 8.5 % with each job's turns and holds read off its step's structure."""
    assumed, structure = _mape(False), _mape(True)
    assert structure < 10 < assumed
    assert structure == pytest.approx(8.50, abs=0.05)


def test_a_copy_leaves_one_turn_without_kernels():
    """Beside a GPU-bound partner (whole slices), a job with 1 ms of kernels and a copy takes m = 2 turns, one of them
    empty: it holds the GPU for all 1 ms at once (G/(m - D)), not 0.5 ms (G/m) as when its structure is unseen."""
    job = _job(1e-3, 0.2e-3, 0.1e-3, 1.0)
    bound = _job(50e-3, 0.0, 0.0, 0.0)
    assert turns(job, C) == 2.0 and kernel_turns(job, C) == 1.0
    assert holds(job, bound, C)[0] == pytest.approx(kernel_s(job, C))
    unseen = replace(job, copy_waits=math.nan)
    assert holds(unseen, bound, C)[0] == pytest.approx(kernel_s(job, C) / 2)
    assert holds(job, bound, C)[1] == pytest.approx(C.slice_s)  # the partner's queue never empties


def _renamed(run: Path, to: Path, gpu: str) -> Path:
    """A copy of a real H100 run whose run.json names another GPU model (one with no shipped constants)."""
    shutil.copytree(run, to)
    meta = json.loads((to / "run.json").read_text())
    meta["gpu"]["name"] = gpu
    (to / "run.json").write_text(json.dumps(meta))
    return to


def test_predict_reads_the_structure_off_real_h100_runs(tmp_path: Path, monkeypatch):
    """h2d and fcn time their copies (D = 1), gemm copies nothing (D = 0); on a GPU with probe constants or none,
    predict takes their turns from that and says so; the H100's pair-fitted constants keep one turn at least."""
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "store"))
    runs = [load_run(DATA / "h100_q4" / n) for n in ("x-h2d", "x-gemm")]
    (h2d, gemm), _ = read_jobs(runs)
    assert h2d.solo.copy_waits == 1.0 and gemm.solo.copy_waits == 0.0
    (fcn, _), _ = read_jobs([load_run(DATA / "h100_q4" / "x-fcn")])
    assert fcn.solo.copy_waits == 1.0
    assert turns(h2d.solo, PROBED) == 2.0
    assert turns(gemm.solo, PROBED) == math.ceil(kernel_s(gemm.solo, PROBED) / PROBED.slice_s)
    (fitted,) = predict(runs)
    assert any("at least 1 (assumed" in n for n in fitted.notes)
    other = "NVIDIA H100 PCIe"
    copies = [_renamed(DATA / "h100_q4" / n, tmp_path / n, other) for n in ("x-h2d", "x-gemm")]
    structure = "one for each copy its kernels wait for and the whole time slices its kernels need"
    (unknown,) = predict([load_run(r) for r in copies])
    assert unknown.model is not None and not unknown.model.calibrated
    assert any(structure in n for n in unknown.notes)
    calibration.save(
        calibration.Calibration(
            gpu=other,
            constants={
                k: getattr(PROBED, k) for k in ("slice_s", "switch_s", "util_scale", "sm_fill")
            },
            measured_at="2026-11-26T10:50:09Z",
            gpumon="0.1.0",
            device="cuda",
        )
    )
    (probed,) = predict([load_run(r) for r in copies])
    assert probed.model is not None and probed.model.probed
    assert any(structure in n for n in probed.notes)
    # the structure is what predict used: gemm's 15 turns a step (G/tau 14.1 with k0 alone) change its r
    c = probed.model.constants or PROBED
    unseen = [replace(j.solo, copy_waits=math.nan) for j in (h2d, gemm)]
    want = predict_pair(h2d.solo, gemm.solo, TIMESLICE, c).slowdown
    assert [s.value for s in probed.slowdown] == pytest.approx(want, rel=1e-6)
    assert predict_pair(*unseen, TIMESLICE, c).slowdown[1] != pytest.approx(want[1], rel=1e-3)
