"""``gpumon calibrate`` end to end on the CPU box: the real command, its real probe processes and gpumon's own MPS
daemon handling, against the fake NVML (tests/fakenvml), the fake MPS daemon (tests/mps) and a fake time-sliced
device (tests/fakegpu) whose slice, switch cost and MPS fill are scripted; then ``gpumon predict`` reading what it
stored. The fake device runs in wall-clock time, so the measured figures carry the loaded machine's jitter: the
checks allow for it, and would still fail on a measurement that read the wrong thing (a slice off by half, a switch
cost of zero, an MPS fill from the wrong probe)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import fakegpu
from tests.fakenvml import build as fake

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "tests" / "data" / "h100_q4"
FAKE_MPS = ROOT / "tests" / "mps"
# The module's fixture may first wait for another module's MPS daemon (one_mps_daemon, tests/e2e/conftest.py): the
# first test, which waits for it, gets more than the suite's 300 s.
pytestmark = pytest.mark.timeout(900)
GPU = "NVIDIA Fake L4"
SLICE_MS, SWITCH_MS, FILL, NVML_UTIL = 30.0, 3.0, 0.6, 60
SCENARIO = f"""
driver 580.159.04
cuda_driver 13000
device name="{GPU}" mem_total_mib=23034 pcie_gen=4 pcie_width=16 gpu_util={NVML_UTIL} mem_util=20 power_w=70 temp_c=40 sm_clock_mhz=1800
"""

needs_cc = pytest.mark.skipif(
    fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml"
)


@dataclass
class Box:
    env: dict[str, str]
    store: Path
    socket: Path


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory, one_mps_daemon: None):
    """The fake NVML and MPS daemon in the environment, a fresh calibration store, the fake device serving."""
    if fake.compiler() is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml")
    tmp = tmp_path_factory.mktemp("calibrate")
    env = fake.environment(fake.build(tmp / "lib"), fake.write_scenario(tmp / "l4.txt", SCENARIO))
    env.update(
        PATH=os.pathsep.join((str(FAKE_MPS), env["PATH"])),
        FAKE_MPS_LOG=str(tmp / "mps.log"),
        CUDA_MPS_PIPE_DIRECTORY=str(tmp / "no-default-daemon"),
        GPUMON_CALIBRATION=str(tmp / "store"),
    )
    with fakegpu.serve(tmp / "gpu.sock", SLICE_MS, SWITCH_MS, FILL) as socket:
        yield Box(env, tmp / "store", socket)


def gpumon(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpumon", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def measured(box: Box) -> dict:
    done = gpumon(box.env, "calibrate", "--device", f"sliced:{box.socket}", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_it_measures_the_devices_slice_switch_cost_and_mps_fill(measured: dict, box: Box):
    c = measured["constants"]
    assert measured["gpu"] == GPU and measured["driver"] == "580.159.04"
    # the slice too is checked against what the device's contexts held on its own clock (a loaded box wakes the
    # fake's scheduler late: 40 ms measured for the scripted 30 at a load average of 15), never below the script
    held = fakegpu.median_slice_s(box.socket)
    assert SLICE_MS <= 1e3 * held and 0.8 * held <= c["slice_s"] <= 1.25 * held, (c, held)
    # A loaded box lengthens a switch (the fake's sleep ends late) and, from the probes' side, the gaps around it: the
    # measure must follow what the device's switches took on its own clock (at least the scripted cost). Measured
    # on the 2-core VM: 1.02x that on a box at load 4, 1.24x-1.58x with two to four busy loops more; a measure that
    # read the wrong thing (no switch, a run or a slice for a gap, half the gaps) is off by 2x or more.
    took = fakegpu.median_switch_s(box.socket)
    assert SWITCH_MS <= 1e3 * took and 0.8 * took <= c["switch_s"] <= 1.8 * took, (c, took)
    assert c["sm_fill"] == pytest.approx(FILL, abs=0.05)
    slicing = measured["details"]["time_slicing"]
    assert slicing["runs"] >= 20 and slicing["kernel_alone_s"] == pytest.approx(1e-3, rel=0.05)
    # issue 42: the switch from the SM-filling probes and the slice a short-kernel probe waits beside one were
    # measured (the fake has no SMs: its filling kernels are the usual ones, so both read the scripted figures)
    assert isinstance(slicing["filling"], dict) and slicing["filling"]["runs"] >= 8, slicing
    assert 0.8 * took <= slicing["switch_short_s"] <= 1.8 * took
    assert 0.8 * held <= slicing["slice_short_runs_s"] <= 1.25 * held
    # the utilisation scale: the duty probe's own kernel time over the wall, against what NVML said (scripted)
    util = measured["details"]["utilisation"]
    assert util["nvml_util"] == pytest.approx(NVML_UTIL / 100) and util["nvml_samples"] >= 10
    assert (
        0.15 < util["kernel_busy"] <= 0.55
    )  # 1 ms kernels, 1 ms host gaps, and the round trips between
    assert c["util_scale"] == pytest.approx(util["kernel_busy"] / (NVML_UTIL / 100))
    # stored where predict reads it; gpumon's own MPS daemon started and quit
    assert json.loads((box.store / "NVIDIA_Fake_L4.json").read_text())["constants"] == c
    assert Path(measured["path"]) == box.store / "NVIDIA_Fake_L4.json"
    log = Path(box.env["FAKE_MPS_LOG"]).read_text()
    assert "daemon started" in log and "daemon exited" in log


def _on_the_fake_gpu(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    run = json.loads((dst / "run.json").read_text())
    run["gpu"]["name"] = GPU
    (dst / "run.json").write_text(json.dumps(run))
    return dst


def _solo_runs(tmp_path: Path) -> list[Path]:
    """The H100's solo fcn and gemm runs, copied into ``tmp_path`` as the fake GPU's."""
    return [_on_the_fake_gpu(H100 / n, tmp_path / n) for n in ("x-fcn", "x-gemm")]


def _predict(env: dict[str, str], runs: list[Path], *args: str) -> subprocess.CompletedProcess:
    """``gpumon predict`` of the two solo ``runs``."""
    return gpumon(env, "predict", "--exclusive", str(runs[0]), "--exclusive", str(runs[1]), *args)


def test_predict_uses_the_calibration_for_runs_on_that_gpu(
    measured: dict, box: Box, tmp_path: Path
):
    runs = _solo_runs(tmp_path)
    done = _predict(box.env, runs, "--share", "all", "--json")
    assert done.returncode == 0, done.stderr
    ts, mps = json.loads(done.stdout)["modes"]
    for mode in (ts, mps):
        assert mode["model"]["calibrated"] is True and mode["model"]["gpu"] == GPU
        assert {k: mode["model"]["constants"][k] for k in measured["constants"]} == measured[
            "constants"
        ]
        assert not any("uncalibrated" in n for n in mode["notes"])
    # the same runs on a GPU model never calibrated: the default constants, and it says so
    uncalibrated = {**box.env, "GPUMON_CALIBRATION": str(tmp_path / "empty")}
    other = _predict(uncalibrated, runs, "--json")
    data = json.loads(other.stdout)
    assert data["model"]["calibrated"] is False
    assert any(n.startswith(f"uncalibrated for {GPU}: intervals widened") for n in data["notes"])
    text = _predict(uncalibrated, runs)
    assert f"note: uncalibrated for {GPU}: intervals widened" in text.stdout


def test_without_an_mps_daemon_only_time_slicing_is_calibrated(box: Box, tmp_path: Path):
    path = os.pathsep.join(
        d
        for d in os.environ["PATH"].split(os.pathsep)
        if d and not (Path(d) / "nvidia-cuda-mps-control").exists()
    )  # a GPU box has the real one
    env = {**box.env, "PATH": path, "GPUMON_CALIBRATION": str(tmp_path / "store")}
    done = gpumon(env, "calibrate", "--device", f"sliced:{box.socket}")
    assert done.returncode == 0, done.stderr
    assert "MPS not measured: no nvidia-cuda-mps-control on PATH" in done.stdout
    stored = json.loads((tmp_path / "store" / "NVIDIA_Fake_L4.json").read_text())
    assert set(stored["constants"]) == {"slice_s", "switch_s", "util_scale"}
    runs = _solo_runs(tmp_path)
    ts, mps = json.loads(_predict(env, runs, "--share", "all", "--json").stdout)["modes"]
    assert ts["model"]["calibrated"] is True and mps["model"]["calibrated"] is False
    assert any("uncalibrated" in n and "sm_fill" in n for n in mps["notes"])


def test_no_gpu_is_one_line_and_exit_1(no_gpu: dict[str, str], tmp_path: Path):
    done = gpumon({**no_gpu, "GPUMON_CALIBRATION": str(tmp_path)}, "calibrate")
    assert done.returncode == 1 and done.stderr.startswith(
        "gpumon: calibrate needs an NVIDIA GPU: NVML "
    )
    assert len(done.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args, message",
    [
        (("--device", "cpu"), "bad --device 'cpu'"),
        (("--from-pairs", "/nonexistent/pairs.csv"), "--from-pairs /nonexistent/pairs.csv"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str, tmp_path: Path):
    done = gpumon({**os.environ, "GPUMON_CALIBRATION": str(tmp_path)}, "calibrate", *args)
    assert (
        done.returncode == 2 and done.stderr.startswith("gpumon: error:") and message in done.stderr
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_from_pairs_fits_the_constants_on_measured_pairs(tmp_path: Path):
    """Four H100 pairs of q4 (measured r from docs/predict.md), their runs renamed to another GPU model."""
    runs = {n: _on_the_fake_gpu(H100 / f"x-{n}", tmp_path / n) for n in ("h2d", "gemm", "fcn")}
    measured = [
        ("fcn", "gemm", 3.04, 1.45),
        ("h2d", "gemm", 3.59, 1.15),
        ("fcn", "fcn", 1.67, 1.68),
        ("h2d", "h2d", 2.08, 2.08),
    ]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(
        "a,b,run_a,run_b,r_a,r_b\n"
        + "".join(f"{a},{b},{runs[a].name},{runs[b].name},{x},{y}\n" for a, b, x, y in measured)
    )
    env = {**os.environ, "GPUMON_CALIBRATION": str(tmp_path / "store")}
    done = gpumon(env, "calibrate", "--from-pairs", str(pairs), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (
        data["gpu"] == GPU and data["details"]["pairs"] == 4 and data["details"]["mape_r_pct"] < 10
    )
    assert set(data["constants"]) == {"slice_s", "switch_s", "util_scale"}
    assert (
        json.loads((tmp_path / "store" / "NVIDIA_Fake_L4.json").read_text())["constants"]
        == data["constants"]
    )
    # runs of two GPU models, or a run that is not there: one line, exit 2
    mixed = tmp_path / "mixed.csv"
    mixed.write_text(f"run_a,run_b,r_a,r_b\n{runs['fcn']},{H100 / 'x-gemm'},3.04,1.45\n")
    done = gpumon(env, "calibrate", "--from-pairs", str(mixed))
    assert (
        done.returncode == 2
        and "2 GPU models" in done.stderr
        and len(done.stderr.strip().splitlines()) == 1
    )
