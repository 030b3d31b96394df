"""The cause live: baselines' evidence from real runs, the shared side from live records."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumon.core.records.machine import GpuInfo
from gpumon.core.interference.attribution import GPU, UNKNOWN
from gpumon.core.interference.live_cause import (
    DeviceWindow,
    live_box,
    live_causes,
    load_baseline,
    shared_side,
)
from gpumon.core.records.model import DeviceSample, HostSample
from gpumon.core.store.trace import load_run, summarize

H100 = Path(__file__).resolve().parents[1] / "data" / "h100_q4"
GPU_INFO = GpuInfo(name="NVIDIA H100 80GB HBM3", pcie_gen=5, pcie_width=16)


def test_a_baseline_run_gives_the_job_alone() -> None:
    rate = summarize(load_run(H100 / "x-fcn")).rates["A"]
    baseline = load_baseline("B", H100 / "x-fcn", rate)
    assert baseline.device == "cuda:0" and baseline.run == "x-fcn"
    assert baseline.side.step_s == pytest.approx(1 / rate)
    assert 60 < baseline.side.gpu_util < 80  # fcn alone kept the H100 ~70 % busy
    assert 90 < baseline.side.cpu_pct < 110
    assert baseline.side.copy_bytes == 201216  # one batch a step


def test_device_window_keeps_the_last_seconds() -> None:
    window = DeviceWindow(window_s=1.0)
    for i in range(30):
        window.handle(DeviceSample(t=i * 0.25, gpu_util=float(i), pcie_rx_bps=1e6))
    window.handle(HostSample(t=7.25, cpu_pct=40.0, mem_used_mib=1.0, mem_total_mib=2.0))
    means = window.means()
    assert means["gpu_util"] == pytest.approx(27.0)  # t 6.25 .. 7.25: samples 25 to 29
    assert means["host_cpu_pct"] == 40.0
    assert means["sm_active"] != means["sm_active"]  # NaN: no GPM in these samples


def test_fcn_beside_fcn_live_waits_for_the_gpu() -> None:
    """The H100 fcn + fcn figures as the live line would see them: the cause is the GPU."""
    rate = summarize(load_run(H100 / "x-fcn")).rates["A"]
    baseline = load_baseline("A", H100 / "x-fcn", rate)
    means = {
        "gpu_util": 99.0,
        "pcie_rx_bps": 0.23e9,
        "sm_active": float("nan"),
        "sm_occupancy": float("nan"),
        "host_cpu_pct": 14.0,
    }
    side = shared_side(291.0, 0.059e9, 0.24e9, 99.0, means)
    assert side.copy_s == pytest.approx(0.059e9 / 291 / 0.24e9)
    causes = live_causes(
        {"A": baseline, "B": baseline},
        {"A": side, "B": side},
        {},
        live_box("cuda:0", True, GPU_INFO),
    )
    assert causes["A"].cause == GPU and causes["B"].phrase == "mostly waiting for the GPU"


def test_a_baseline_from_another_device_cannot_tell() -> None:
    baseline = load_baseline("A", H100 / "x-fcn", 487.0)
    side = shared_side(100.0, float("nan"), float("nan"), 50.0, {"host_cpu_pct": 100.0})
    causes = live_causes({"A": baseline}, {"A": side, "B": side}, {}, live_box("cpu", False, None))
    assert causes["A"].cause == UNKNOWN
    assert causes["A"].phrase == "cannot tell: baseline x-fcn ran on cuda:0, this run on cpu"


def test_cause_words_leave_out_a_job_without_a_slowdown_yet() -> None:
    from gpumon.core.interference.attribution import Attribution
    from gpumon.core.interference.live_cause import cause_words

    why = Attribution("A", GPU, {GPU: 1.0}, 0.01, "mostly waiting for the GPU", "")
    words = cause_words(
        {"A": "fcn:preset=paper", "B": "gemm"}, {"A": 1.7, "B": float("nan")}, {"A": why}
    )
    assert words == "fcn runs 1.7× slower, mostly waiting for the GPU"
    both = cause_words({"A": "fcn", "B": "fcn"}, {"A": 1.03, "B": 1.7}, {"A": why, "B": why})
    assert (
        both
        == "fcn A barely notices fcn B (r 1.03); fcn B runs 1.7× slower, mostly waiting for the GPU"
    )
    slowed = cause_words({"A": "fcn", "B": "fcn"}, {"A": 1.19, "B": 1.7}, {"A": why, "B": why})
    assert slowed.startswith(
        "fcn A runs 1.19× slower, mostly waiting for the GPU; "
    )  # not "barely notices" (issue 34)
