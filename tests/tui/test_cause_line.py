"""The TUI's interference line shows each job's cause beside r once a --baseline run gave its evidence."""

from __future__ import annotations

from pathlib import Path

from gpumon.core.records.machine import GpuInfo
from gpumon.core.interference.live_cause import load_baseline
from gpumon.core.records.model import (
    DeviceSample,
    SourceStatus,
    StepBatch,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
)
from gpumon.core.store.trace import load_run, summarize
from gpumon.tui.model import LiveModel
from gpumon.tui.widgets.interference import interference_text

H100 = Path(__file__).resolve().parents[1] / "data" / "h100_q4"


def test_fcn_beside_fcn_shows_waiting_for_the_gpu_live() -> None:
    """The H100 fcn baseline, and two jobs running at 60 % of its rate on a GPU 99 % busy."""
    rate = summarize(load_run(H100 / "x-fcn")).rates["A"]
    model = LiveModel()
    model.gpu = GpuInfo(name="NVIDIA H100 80GB HBM3", pcie_gen=5, pcie_width=16)
    for slot in "AB":
        model.set_baseline(slot, rate, "baseline x-fcn", load_baseline(slot, H100 / "x-fcn", rate))
        model.set_spec(slot, "fcn:preset=paper")
    model.handle(SourceStatus("nvml", True))
    for pid, slot in enumerate("AB", start=1):
        model.handle(WorkloadState(slot, "starting", 0.0))
        model.handle(WorkloadState(slot, "running", 0.0, pid=pid))
        model.handle(WorkloadMeta(slot, pid, {"device": "cuda:0", "affinity": list(range(16))}))
    shared = 0.6 * rate
    for n in range(int(10 * shared)):
        t = round((n + 1) / shared, 6)
        for pid, slot in enumerate("AB", start=1):
            model.handle(
                StepBatch.of(
                    StepEvent(
                        slot,
                        pid,
                        n,
                        t,
                        1 / shared,
                        samples=64.0,
                        warmup=n < 5,
                        copy_bytes=201216,
                        copy_s=0.0008,
                    )
                )
            )
        if n % 30 == 0:
            model.handle(DeviceSample(t, gpu_util=99.0, pcie_rx_bps=0.2e9))
    view = model.view(10.0)
    assert view.interference is not None and view.causes["A"].cause == "gpu"
    text = interference_text(view).plain
    assert text.count("mostly waiting for the GPU") == 2, text
    # every job's r first, then the causes: 120 columns never cut B's slowdown (issue 43)
    assert (
        text.index("A r 1.6") < text.index("B r 1.6") < text.index("A: mostly waiting for the GPU")
    )
    assert text.index(")", text.index("B r 1.6")) < 120, "B's slowdown and rates fit 120 columns"


def test_the_prediction_from_both_baselines_shows_beside_the_measured() -> None:
    """Two --baseline runs (H100 fcn and gemm) make a pair: the live line ends with gpumon predict's answer."""
    from gpumon.analysis.predict import live_line

    line = live_line((("A", str(H100 / "x-fcn")), ("B", str(H100 / "x-gemm"))), "timeslice")
    assert line.startswith("predicted A r ") and "B r 1." in line and ", STP " in line
    assert live_line((("A", str(H100 / "x-fcn")),)) == ""  # one baseline: no pair to predict
    rate = summarize(load_run(H100 / "x-fcn")).rates["A"]
    model = LiveModel()
    model.predicted = line
    for slot in "AB":
        model.set_baseline(slot, rate, "baseline x-fcn")
        model.handle(WorkloadState(slot, "running", 0.0, pid=1 + (slot == "B")))
    shared = 0.5 * rate
    for n in range(int(8 * shared)):
        t = round((n + 1) / shared, 6)
        for pid, slot in enumerate("AB", start=1):
            model.handle(
                StepBatch.of(StepEvent(slot, pid, n, t, 1 / shared, samples=64.0, warmup=n < 5))
            )
        if n == int(2 * shared):  # still measuring: the prediction shows already
            text = interference_text(model.view(t)).plain
            assert text.startswith("measuring… (") and text.endswith(line), text
    text = interference_text(model.view(8.0)).plain
    assert (
        "A r 2.0" in text
        and text.endswith(line)
        and text.index("A r 2.0") < text.index("predicted")
    )
