"""`gpumon run --headless` with the scripted fake libnvidia-ml: NVML values reach the run directory."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from gpumon.core.records.model import GPM_COLUMNS
from gpumon.core.store.trace import load_run
from tests.fakenvml import build as fake
from tests.helpers import only_run, recorded, run_until

SCENARIO = """
    driver 550.54.15
    device name="NVIDIA Fake A100" uuid=GPU-e2e mem_total_mib=40960 gpu_util=77 mem_util=33 mem_used_mib=1234 power_w=150 temp_c=66 sm_clock_mhz=1410 pcie_rx_bps=2e9 pcie_tx_bps=5e8
    proc children_of=self mem_mib=321 sm_util=42
"""


@pytest.mark.skipif(fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml")
def test_run_records_nvml_device_and_process_metrics(tmp_path):
    lib = fake.build(tmp_path / "lib")
    scenario = fake.write_scenario(tmp_path / "scenario.txt", SCENARIO)
    runs = tmp_path / "runs"
    result = run_until(
        ["fcn", "--headless", "--device", "cpu"],
        runs,
        env=fake.environment(lib, scenario),
        what="10 device samples and 5 of the job's process samples",
        enough=lambda: (
            len(recorded(runs, "device")) >= 10 and len(recorded(runs, "processes")) >= 5
        ),
    )
    assert result.returncode == 128 + signal.SIGINT, result.stderr
    run = load_run(only_run(runs))
    meta = json.loads((run.path / "run.json").read_text())
    assert meta["nvml"] == {"available": True, "reason": ""}
    assert meta["gpu"]["name"] == "NVIDIA Fake A100" and meta["gpu"]["pcie_method"] == "counters"

    device = run.device()
    assert len(device) >= 10
    for column, value in [
        ("gpu_util", 77),
        ("mem_util", 33),
        ("mem_used_mib", 1234),
        ("mem_total_mib", 40960),
        ("power_w", 150),
        ("temp_c", 66),
        ("sm_clock_mhz", 1410),
    ]:
        assert (device[column] == value).all(), column
    rates = device.dropna(subset=["pcie_rx_bps"])
    assert len(rates) >= len(device) - 1  # only the very first reading has no interval
    intervals = device["t"].diff().dropna()
    assert (rates["pcie_rx_bps"] - 2e9).abs().max() <= 1 / intervals.min() + 1e-3
    assert (rates["pcie_tx_bps"] - 5e8).abs().max() <= 1 / intervals.min() + 1e-3

    procs = run.processes()
    child = procs[procs.process == "A"]
    assert len(child) >= 5 and child["pid"].nunique() == 1  # processes are sampled every second
    assert child["pid"].iloc[0] == run.workloads[0].pid
    assert (child["gpu_mem_mib"] == 321).all()
    assert (child["gpu_sm_util"] == 42).all()


SCENARIOS = Path(__file__).resolve().parents[1] / "fakenvml" / "scenarios"
NO_GPM = "fail nvmlGpmQueryDeviceSupport NOT_SUPPORTED"


@pytest.mark.parametrize(
    ("name", "extra", "interval_ms", "truth", "method"),
    [
        ("gen5_58GBps", NO_GPM, 100, 58e9, "counters"),
        ("gen5_58GBps", NO_GPM, 250, 58e9, "counters"),
        ("gen4_25GBps", "", 100, 25e9, "counters"),
        ("gen4_25GBps", "", 250, 25e9, "counters"),
        ("gen5_58GBps", "", 100, 58e9, "gpm"),
        (
            "gen5_58GBps",
            "",
            None,
            58e9,
            "gpm",
        ),  # --interval not given: 200 ms (GPM gives PCIe once a second)
        ("gen4_25GBps", "", None, 25e9, "counters"),  # 100 ms: the counters give PCIe each tick
    ],
)
@pytest.mark.skipif(fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml")
def test_saturated_link_is_recorded_exactly(tmp_path, name, extra, interval_ms, truth, method):
    """The real sampler against 32-bit counters that wrap every ~70 ms: median within 5 %, >= 90 % present."""
    lib = fake.build(tmp_path / "lib")
    text = (SCENARIOS / f"{name}.txt").read_text() + extra + "\n"
    scenario = fake.write_scenario(tmp_path / "scenario.txt", text)
    runs = tmp_path / "runs"
    given = [] if interval_ms is None else ["--interval", str(interval_ms)]
    interval_ms = interval_ms or {"gpm": 200, "counters": 100}[method]
    result = run_until(
        ["fcn", "--headless", "--device", "cpu", *given],
        runs,
        env=fake.environment(lib, scenario),
        what="16 device samples",
        enough=lambda: len(recorded(runs, "device")) >= 16,
    )
    assert result.returncode == 128 + signal.SIGINT, result.stderr
    run = load_run(only_run(runs))
    meta = json.loads((run.path / "run.json").read_text())
    gpu = meta["gpu"]
    assert gpu["pcie_method"] == method
    assert meta["interval_ms"] == interval_ms
    assert gpu["pcie_max_bps"] == pytest.approx(
        {"gen5_58GBps": 3.938e9, "gen4_25GBps": 1.969e9}[name] * 16
    )
    assert gpu["gpm_metrics"] == (
        [] if method == "counters" else ["pcie_rx_bps", "pcie_tx_bps", *GPM_COLUMNS]
    )
    device = run.device()
    assert (
        len(device) >= (device["t"].max() - device["t"].min()) / (interval_ms / 1000) * 0.5
    )  # half the ticks at least
    rx = device["pcie_rx_bps"]
    assert rx.notna().mean() >= 0.9, rx.tolist()
    assert rx.median() == pytest.approx(truth, rel=0.05)
    if method == "gpm":
        assert (device["sm_active_pct"].dropna() == 0.5).all() and device[
            "sm_active_pct"
        ].notna().mean() >= 0.9
