"""``gpumon calibrate``'s arithmetic on probe timings with known answers, and where calibrations are stored."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpumon.analysis.calibration import (
    CalibrationFailed,
    seen_slice,
    slicing,
    sm_fill,
    spacing,
    timeline,
    util_scale,
)
from gpumon.core.store import calibration


def _sliced(start: float, kernel: float, run: float, gap: float, runs: int) -> list[float]:
    """Kernel ends of a probe that holds the device ``run`` seconds, then waits ``gap``, ``runs`` times."""
    ends, t = [], start
    for _ in range(runs):
        for _ in range(round(run / kernel)):
            t += kernel
            ends.append(t)
        t += gap
    return ends


def test_the_time_slice_and_switch_cost_come_from_runs_and_gaps():
    tau, sigma, d = 0.004, 0.0005, 0.0001
    # A starts alone (a long first run, dropped); then each probe waits the other's slice and two switches
    a = _sliced(0.0, d, 0.02, 0.0, 1) + _sliced(0.02 + tau + 2 * sigma, d, tau, tau + 2 * sigma, 20)
    b = _sliced(0.02 + sigma, d, tau, tau + 2 * sigma, 20)
    ta, tb = timeline(a), timeline(b)
    assert ta.kernel_s == pytest.approx(d) and all(r == pytest.approx(tau) for r in ta.runs)
    assert all(g == pytest.approx(tau + 2 * sigma) for g in ta.gaps)
    result = slicing(ta, tb)
    assert result.slice_s == pytest.approx(tau) and result.switch_s == pytest.approx(sigma)
    assert result.busy_share == pytest.approx(2 * tau / (2 * tau + 2 * sigma))


def test_the_slice_a_short_kernel_job_sees_is_its_gaps_less_two_filling_switches():
    """A short-kernel probe beside an SM-filling one waits the filler's hold and a switch each way."""
    hold, sigma, d = 0.002, 0.00016, 0.0001
    short = timeline(
        _sliced(0.0, d, 0.02, 0.0, 1)
        + _sliced(0.02 + hold + 2 * sigma, d, 0.0002, hold + 2 * sigma, 20)
    )
    assert seen_slice(short, sigma) == pytest.approx(hold)
    with pytest.raises(CalibrationFailed, match="did not time-slice"):
        seen_slice(timeline([i * 1e-4 for i in range(1, 200)]), sigma)


def test_probes_that_never_alternate_are_no_calibration():
    steady = [i * 1e-4 for i in range(1, 2000)]  # side by side, as under MPS: no gaps
    with pytest.raises(CalibrationFailed, match="did not time-slice"):
        slicing(timeline(steady), timeline(steady))


def test_the_utilisation_scale_is_kernel_time_over_nvml_utilisation():
    kappa, true, nvml = util_scale(1.0, 4.0, [60.0, math.nan, 40.0])
    assert (kappa, true, nvml) == pytest.approx((0.5, 0.25, 0.5))
    with pytest.raises(CalibrationFailed, match="no utilisation"):
        util_scale(1.0, 4.0, [math.nan])
    with pytest.raises(CalibrationFailed, match="idle"):
        util_scale(1.0, 4.0, [0.0])


def test_the_mps_fill_is_the_slowdown_of_two_filling_probes_less_one():
    alone = [[i * 1e-3 for i in range(100)]] * 2
    beside = [[i * 1.6e-3 for i in range(100)], [i * 1.7e-3 for i in range(100)]]
    gamma, r = sm_fill(alone, beside)
    assert r == pytest.approx([1.6, 1.7]) and gamma == pytest.approx(0.65)
    assert spacing([0.0, 1.0]) != spacing([0.0, 1.0])  # too few ends: NaN
    assert sm_fill(alone, [[i * 3e-3 for i in range(100)]] * 2)[0] == 1.0  # kept within [0.05, 1]


def test_calibrations_are_stored_per_gpu_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(calibration.ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert calibration.calibration_dir() == tmp_path / "data" / "gpumon" / "calibration"
    monkeypatch.setenv(calibration.ENV, str(tmp_path / "cal"))
    assert (
        calibration.path_for("NVIDIA H100 80GB HBM3")
        == tmp_path / "cal" / "NVIDIA_H100_80GB_HBM3.json"
    )
    assert calibration.load("NVIDIA L4") is None
    made = calibration.Calibration(
        "NVIDIA L4", {"slice_s": 0.002, "switch_s": 1e-4}, measured_at="t", details={"x": 1}
    )
    path = calibration.save(made)
    assert calibration.load("NVIDIA L4") == made and json.loads(path.read_text())["schema"] == 1
    calibration.save(
        calibration.Calibration("NVIDIA L4", {"slice_s": 0.003})
    )  # a later one replaces it
    assert calibration.load("NVIDIA L4").constants == {"slice_s": 0.003}
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "NVIDIA_L4.json"
    ]  # no temporary file left


@pytest.mark.parametrize(
    "text, why",
    [
        ("{not json", "not valid JSON"),
        ('{"gpu": "NVIDIA A100", "constants": {}}', "not a calibration of NVIDIA L4"),
        (
            '{"gpu": "NVIDIA L4", "constants": {"slice_s": -1}}',
            r"slice_s is -1, not within \[0, 10\]",
        ),
        (
            '{"gpu": "NVIDIA L4", "constants": {"slice_s": 0}}',
            "slice_s is 0, not a positive number",
        ),
        ('{"gpu": "NVIDIA L4", "constants": {"switch_s": true}}', "switch_s is not a number"),
        (
            '{"gpu": "NVIDIA L4", "constants": {"util_scale": 1e400}}',
            "number 1e400 is out of range",
        ),
        (
            '{"gpu": "NVIDIA L4", "constants": {"sm_fill": NaN}}',
            "NaN is not a number gpumon records",
        ),
        (
            '{"gpu": "NVIDIA L4", "constants": {"slice_s": 4392}}',
            r"slice_s is 4392, not within \[0, 10\]",
        ),
        (
            '{"gpu": "NVIDIA L4", "constants": {"slice_s": ' + "9" * 309 + "}}",
            "integer of 309 digits",
        ),
        (
            '{"gpu": "NVIDIA L4", "constants": {}, "details": {"fitted": 5}}',
            "details.fitted is not a list",
        ),
        ("[" * 10_000 + "]" * 10_000, "nested deeper than 16 levels"),
    ],
)
def test_a_file_that_is_not_a_calibration_is_refused_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, why: str
):
    monkeypatch.setenv(calibration.ENV, str(tmp_path))
    calibration.path_for("NVIDIA L4").write_text(text)
    with pytest.raises(calibration.CalibrationError, match=why):
        calibration.load("NVIDIA L4")
