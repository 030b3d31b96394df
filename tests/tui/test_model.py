"""The monitor's textual-free parts: binned history, graphs, interference, the live model, the refresh pump."""

from __future__ import annotations

import dataclasses
import math
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import (
    DeviceSample,
    LogLine,
    SourceStatus,
    StepBatch,
    StepEvent,
    WorkloadState,
    on_bus,
)
from gpumon.core.records.rates import (
    CANNOT_TELL,
    LOSES,
    MIN_OVERLAP_S,
    PAYS,
    Overlap,
    interference,
    slowdown,
    stp,
    verdict,
)
from gpumon.tui.model import LiveModel, link_bps
from gpumon.tui.pump import RefreshPump
from gpumon.tui.series import BinnedSeries, nice_ceiling
from gpumon.tui.widgets.graph import graph_rows
from tests.tui.conftest import graph_level as level
from gpumon.tui.widgets.interference import interference_text
from gpumon.tui.widgets.output import clean


def test_binned_series_means_and_rates():
    s = BinnedSeries(1.0, 10)
    s.add(0.2, 10.0)
    s.add(0.7, 30.0)
    s.add(2.5, 5.0)
    values = s.values(2.9, 3)
    assert values[0] == 20.0 and math.isnan(values[1]) and values[2] == 5.0
    rates = BinnedSeries(1.0, 10)
    for t in (0.1, 0.2, 0.3, 0.4):
        rates.add(t, 1.0, 0.1)
    assert rates.values(0.5, 1) == (pytest.approx(10.0),)
    assert rates.values(5.5, 2, missing=0.0) == (0.0, 0.0)


def test_binned_series_is_bounded_and_ignores_the_past():
    s = BinnedSeries(1.0, 3)
    for t in range(10):
        s.add(float(t), float(t))
    s.add(2.0, 100.0)
    assert s.values(9.0, 5)[-3:] == (7.0, 8.0, 9.0)
    assert math.isnan(s.values(9.0, 5)[0])


@given(
    st.lists(
        st.tuples(st.floats(0, 50, allow_nan=False), st.floats(-1e6, 1e6, allow_nan=False)),
        max_size=60,
    ),
    st.floats(-5, 60, allow_nan=False),
    st.integers(-2, 30),
)
def test_binned_series_values_are_each_bins_mean_where_it_has_one(samples, now, n):
    """The window's values, filled from the newest bin back (the refresh's cost), are each bin's mean, or missing."""
    series = BinnedSeries(1.0, 20)
    kept: dict[int, list[float]] = {}
    for t, value in samples:
        series.add(t, value)
        index = math.floor(t)
        if not kept or index >= max(kept):  # a sample older than the newest bin is ignored
            kept.setdefault(index, []).append(value)
    last = math.floor(now)
    newest = sorted(kept)[-20:]  # the capacity
    expected = tuple(
        sum(kept[i]) / len(kept[i]) if i in newest else -1.0 for i in range(last - n + 1, last + 1)
    )
    assert series.values(now, n, missing=-1.0) == pytest.approx(expected)


def test_nice_ceiling():
    assert [nice_ceiling(v) for v in (0.7, 1, 3, 19, 40, 41, 260)] == [1, 1, 5, 20, 50, 50, 500]
    assert nice_ceiling(0) == 1 and nice_ceiling(math.nan) == 1


def test_graph_is_fixed_scale_and_right_aligned():
    assert graph_rows([0, 50, 100, 200], 100, 6) == ["   ▄██"]
    assert graph_rows([math.nan, 100], 100, 3) == ["  █"]
    assert graph_rows([25, 100], 100, 2, rows=2) == [" █", "▄█"]
    assert level(0.1, 100, 1) == 1 and level(0, 100, 1) == 0 and level(math.nan, 100, 1) == -1


def overlap(rates: dict[str, float], duration: float = 20.0) -> Overlap:
    """An overlap window of ``duration`` seconds with each job at its rate."""
    return Overlap(
        0.0, duration, {slot: rate * duration for slot, rate in rates.items()}, dict(rates)
    )


def test_slowdown_stp_and_verdict():
    assert (
        slowdown(40, 20) == 2 and math.isnan(slowdown(math.nan, 20)) and math.isnan(slowdown(40, 0))
    )
    pays = interference({"A": 40, "B": 20}, overlap({"A": 30, "B": 15}))
    assert pays.slowdown == {"A": pytest.approx(4 / 3), "B": pytest.approx(4 / 3)}
    assert (
        pays.stp == pytest.approx(1.5)
        and pays.verdict == PAYS
        and pays.text == "sharing pays: STP 1.50"
    )
    assert pays.shared == {"A": 30, "B": 15} and not pays.measuring
    loses = interference({"A": 40, "B": 20}, overlap({"A": 10, "B": 5}))
    assert loses.verdict == LOSES and loses.text == "sharing loses: STP 0.50"
    even = interference({"A": 40, "B": 20}, overlap({"A": 20.02, "B": 10}))
    assert even.verdict == CANNOT_TELL and even.text == "cannot tell: STP 1.00"
    missing = interference({"A": 40}, overlap({"A": 30, "B": 15}))
    assert (
        math.isnan(missing.stp)
        and missing.verdict == ""
        and missing.text == "STP needs the exclusive rate of B"
    )
    assert stp([2.0, 4.0]) == pytest.approx(0.75)
    assert (
        verdict(math.nan, math.nan) == CANNOT_TELL
        and verdict(1.1, 1.2) == PAYS
        and verdict(0.8, 0.9) == LOSES
    )


def _events(process, t0, t1, rate, warmup=0, first=0):
    """Steps ``first``, ``first + 1``, ... at ``rate`` from ``t0`` to ``t1``."""
    out, n, t = [], first, t0
    while t < t1:
        t = round(t + 1 / rate, 6)
        out.append(StepEvent(process, 1, n, t, 1 / rate, samples=8.0, warmup=n < warmup))
        n += 1
    return out


def _steps(model, process, t0, t1, rate, warmup=0):
    """Feed one job's steps; returns the next step number."""
    events = _events(process, t0, t1, rate, warmup)
    for e in events:
        model.handle(on_bus(e))
    return len(events)


def test_model_measures_the_exclusive_phase_and_the_slowdown():
    model = LiveModel()
    model.handle(WorkloadState("A", "starting", 0.0))
    model.handle(WorkloadState("A", "running", 0.0, pid=1))
    a_next = _steps(model, "A", 0.0, 10.0, 40, warmup=5)
    model.handle(WorkloadState("B", "starting", 10.0))
    model.handle(WorkloadState("B", "running", 10.0, pid=2))
    view = model.view(10.0)
    assert view.workload("A").exclusive_rate == pytest.approx(40)
    assert view.workload("A").exclusive_source == "exclusive phase"
    assert view.workload("B").state == "starting"
    for e in sorted(
        _events("A", 10.0, 20.0, 20, first=a_next) + _events("B", 10.0, 20.0, 10), key=lambda e: e.t
    ):
        model.handle(on_bus(e))
    view = model.view(20.0)
    assert view.workload("A").exclusive_rate == pytest.approx(40)
    assert view.interference is not None
    assert view.interference.slowdown["A"] == pytest.approx(2.0, rel=0.05)
    assert math.isnan(view.interference.slowdown["B"])
    model.set_baseline("B", 30.0, "baseline run-b")
    view = model.view(20.0)
    assert view.workload("B").exclusive_source == "baseline run-b"
    assert view.interference.stp == pytest.approx(0.5 + 1 / 3, rel=0.05)
    assert view.interference.text.startswith("sharing loses: STP 0.8")


def test_a_process_watched_with_beside_runs_in_its_panel_and_in_the_interference_line():
    """Issue 34 item 8: B, watched with --beside, reads "watched, not ours" and runs: its panel has its iter/s on the
    scale of its rate (its probe's first step, timed from the probe's start, is no rate), and the line has its r."""
    model = LiveModel()
    attached = {
        "pid": 4242,
        "user": "alice",
        "command": "python train.py",
        "owned": False,
        "attached": True,
        "probe": True,
    }
    model.handle(WorkloadState("B", "running", 0.5, pid=4242, attached=attached))
    history = _events(
        "B", -8.0, 10.0, 91.16
    )  # its probe's history, then its steps alone until A starts
    history[0] = dataclasses.replace(
        history[0], iter_s=0.0002
    )  # its first step: 0.2 ms after the probe started
    for e in history:
        model.handle(on_bus(e))
    model.handle(WorkloadState("A", "starting", 10.0))
    model.handle(WorkloadState("A", "running", 10.0, pid=1000))
    together = _events("A", 10.0, 30.0, 28.0, warmup=5) + _events(
        "B", 10.0, 30.0, 90.99, first=len(history)
    )
    for e in sorted(together, key=lambda e: e.t):
        model.handle(on_bus(e))
    model.handle(SourceStatus("nvml", True, ""))
    view = model.view(30.0)
    b = view.workload("B")
    assert b.state == "watched, not ours" and b.active
    assert b.figures is not None and b.figures.iter_per_s == pytest.approx(90.99, rel=0.01)
    assert b.iter_rate.top == 100.0 and b.iter_rate.values[-1] == pytest.approx(90.99, rel=0.02)
    assert (
        b.exclusive_rate == pytest.approx(91.16, rel=1e-3)
        and b.exclusive_source == "exclusive phase"
    )
    assert [row.mark for row in view.processes] == [
        "A",
        "B",
    ]  # the process table lists it as one of the jobs
    assert view.interference is not None and view.interference.slowdown["B"] == pytest.approx(
        91.16 / 90.99, rel=0.01
    )


def test_the_live_line_measures_until_its_window_can_hold_a_verdict():
    """Issue 34 item 9: before the overlap holds MIN_OVERLAP_S and MIN_OVERLAP_STEPS of each job, the line says
    "measuring… (N s left)" with no r and no verdict (on the base it gave a verdict from its first steps)."""
    model = LiveModel()
    model.handle(WorkloadState("A", "starting", 0.0))
    model.handle(WorkloadState("A", "running", 0.0, pid=1))
    a_next = _steps(model, "A", 0.0, 10.0, 40, warmup=5)  # alone at 40 it/s: the exclusive phase
    model.handle(WorkloadState("B", "starting", 10.0))
    model.handle(WorkloadState("B", "running", 10.0, pid=2))
    model.set_baseline("B", 40.0, "baseline run-b")
    together = _events("A", 10.0, 30.0, 20, first=a_next) + _events("B", 10.0, 30.0, 30, warmup=2)
    for e in sorted((e for e in together if e.t <= 12.0), key=lambda e: e.t):
        model.handle(on_bus(e))
    view = model.view(12.0)
    text = interference_text(view).plain
    left = view.interference.left_s
    assert left == pytest.approx(
        MIN_OVERLAP_S - (12.0 - 10.0 - 3 / 30), abs=0.05
    )  # from B's first step after warm-up
    assert text.startswith(
        f"measuring… ({math.ceil(left)} s left)  ·  xA 40 it/s (exclusive phase)  ·  xB 40 it/s"
    )
    assert " r " not in text and "STP" not in text and "pays" not in text and "loses" not in text
    assert view.interference.verdict == "" and all(
        math.isnan(r) for r in view.interference.slowdown.values()
    )
    for e in sorted((e for e in together if e.t > 12.0), key=lambda e: e.t):
        model.handle(on_bus(e))
    view = model.view(30.0)
    assert not view.interference.measuring
    assert interference_text(view).plain.startswith(
        "sharing pays: STP 1.25 │ A r 2.00 (40→20 it/s)  B r 1.33"
    )


def test_model_states_logs_and_relaunch_reset():
    model = LiveModel()
    assert model.view(0.0).workload("A").state == "empty"
    model.set_spec("A", "fcn")
    model.handle(WorkloadState("A", "starting", 0.0))
    model.handle(WorkloadState("A", "running", 0.0, pid=7))
    model.handle(LogLine("A", 0.1, "hello"))
    _steps(model, "A", 0.0, 1.0, 10, warmup=3)
    model.handle(WorkloadState("A", "exited", 2.0, pid=7, exit_status=3))
    view = model.view(3.0).workload("A")
    assert (view.state, view.healthy, view.pid, view.log) == ("exited 3", False, 7, ("hello",))
    assert view.elapsed_s == pytest.approx(2.0)
    model.handle(WorkloadState("A", "starting", 4.0))
    view = model.view(4.0).workload("A")
    assert (view.state, view.spec, view.log, view.figures.steps) == ("starting", "fcn", (), 0)


def test_model_device_view_switches_with_nvml():
    model = LiveModel()
    assert not model.view(0.0).device.nvml_available
    model.handle(SourceStatus("nvml", True))
    model.gpu = GpuInfo(name="Simulated GPU", pcie_gen=4, pcie_width=16)
    model.handle(
        DeviceSample(0.5, gpu_util=50.0, mem_used_mib=1024.0, mem_total_mib=4096.0, pcie_rx_bps=1e9)
    )
    device = model.view(0.9).device
    assert device.nvml_available and device.name == "Simulated GPU"
    assert device.graphs["gpu_util"].values[-1] == 50.0 and device.graphs["gpu_util"].top == 100.0
    assert device.graphs["mem_used_mib"].top == 4096.0
    assert (
        device.graphs["pcie_rx_bps"].top
        == pytest.approx(link_bps(model.gpu))
        == pytest.approx(16 * 1.969e9)
    )
    assert device.link_rx_pct == pytest.approx(100 * 1e9 / (16 * 1.969e9))


def test_link_capacity_prefers_run_json_max_and_is_unknown_without_a_link():
    assert link_bps(GpuInfo(pcie_max_bps=63e9, pcie_gen=1, pcie_width=16)) == 63e9
    assert link_bps(GpuInfo(pcie_gen=5, pcie_width=16)) == pytest.approx(16 * 3.938e9)
    assert math.isnan(link_bps(None)) and math.isnan(link_bps(GpuInfo(pcie_gen=None)))
    model = LiveModel()
    model.handle(SourceStatus("nvml", True))
    model.handle(DeviceSample(0.5, pcie_rx_bps=1e9))
    device = model.view(0.9).device
    assert math.isnan(device.link_rx_pct), "no link known: no percentage made up"
    assert device.graphs["pcie_rx_bps"].top == pytest.approx(15.75e9), (
        "the graph still gets a scale"
    )


class WatchedEvent(threading.Event):
    """A threading.Event that records its waits: when one begins, and what each returned with ``state()`` then."""

    def __init__(self, state) -> None:
        super().__init__()
        self.state = state
        self.waiting = threading.Event()
        self.returned: list[tuple[bool, object]] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        done = super().wait(timeout)
        self.returned.append((done, self.state()))
        return done


def test_pump_merges_ticks_until_the_ui_has_drawn():
    model = LiveModel()
    views = []
    drawn_calls = 0
    delivered = threading.Event()

    def deliver(view):
        views.append(view)
        delivered.set()

    pump = RefreshPump(model, lambda: 1.0, deliver, hz=1000)
    pump._drawn = waits = WatchedEvent(
        lambda: drawn_calls
    )  # the pump's wait for the UI's draw, observed
    waits.set()
    pump.start()
    try:
        model.handle(LogLine("A", 0.0, "x"))
        assert delivered.wait(5)
        delivered.clear()
        assert waits.waiting.wait(5), "the pump never waited for the UI to draw its view"
        for i in range(50):  # ticks while the first view is being drawn
            model.handle(LogLine("A", 0.0, str(i)))
        drawn_calls += 1
        pump.drawn()
        assert delivered.wait(5)
        # the pump's wait ended with the draw, not before it: no second view could come before the first was drawn
        assert waits.returned[0] == (True, 1), waits.returned
        assert (
            len(views) == 2 and views[-1].workload("A").log[-1] == "49"
        )  # the 50 ticks merged into one view
    finally:
        pump.stop()
        pump.join(5)


def test_a_view_drawn_within_its_period_is_not_waited_for():
    """The pump waits out the period first and the UI's draw only if it has not come by then: a UI that drew within
    the period costs the refresh thread no wait (no wake-up) for it."""
    model = LiveModel()
    views: list = []
    second = threading.Event()
    pump: RefreshPump

    def deliver(view) -> None:
        views.append(view)
        pump.drawn()  # the UI drew at once
        if len(views) == 2:
            second.set()

    pump = RefreshPump(model, lambda: 1.0, deliver, hz=20)
    pump._drawn = waits = WatchedEvent(lambda: len(views))
    waits.set()
    pump.start()
    try:
        pump.poke()
        model.handle(LogLine("A", 0.0, "x"))
        while not second.wait(0.05):
            model.handle(LogLine("A", 0.0, "x"))
        assert not waits.waiting.is_set(), (
            f"the pump waited for a draw already made: {waits.returned}"
        )
    finally:
        pump.stop()
        pump.join(5)


def test_the_pump_gathers_before_each_view_so_the_frame_has_what_was_gathered():
    """A live screen's pump reads the probes (``gather``) just before it builds a view: what that read publishes is in
    that view, and it does not wake the pump for a second view."""
    model = LiveModel()
    views: list = []
    delivered = threading.Event()

    def gather() -> None:
        model.handle(LogLine("A", 0.0, f"gathered {len(views)}"))

    def deliver(view) -> None:
        views.append(view)
        delivered.set()

    pump = RefreshPump(model, lambda: 1.0, deliver, hz=1000, gather=gather)
    pump.start()
    try:
        pump.poke()
        assert delivered.wait(5)
        assert views[0].workload("A").log[-1] == "gathered 0"
        delivered.clear()
        pump.drawn()
        assert not delivered.wait(0.3), "the gathered line woke the pump again"
        model.handle(LogLine("A", 0.0, "new"))
        assert delivered.wait(5)
        assert views[1].workload("A").log[-2:] == ("new", "gathered 1")
    finally:
        pump.stop()
        pump.join(5)


def test_clean_output_lines():
    assert clean("10%|█ \r 50%|███  ") == " 50%|███  "
    assert clean("\x1b[31mred\x1b[0m\tx\x07") == "red x"


def test_a_rate_graphs_scale_follows_what_it_shows_not_the_runs_peak():
    """Issue 43: the scale only grew, so one fast first step flattened every later one; once that step has
    scrolled out of the graph, the scale is the shown steps'."""
    from gpumon.tui.model import LiveModel

    model = LiveModel()
    model.handle(WorkloadState("A", "starting", 0.0, pid=1))
    model.handle(WorkloadState("A", "running", 0.0, pid=1))
    t, n = 0.0, 0
    while t < 10.0:  # 50 it/s for 10 s
        t += 0.02
        model.handle(StepBatch.of(StepEvent("A", 1, n, t, 0.02)))
        n += 1
    while t < 200.0:  # then 2 it/s
        t += 0.5
        model.handle(StepBatch.of(StepEvent("A", 1, n, t, 0.5)))
        n += 1
    early = model.view(10.0, width=60).workload("A").iter_rate.top
    late = model.view(200.0, width=60).workload("A").iter_rate.top
    assert early >= 50 and late <= 5, (early, late)


@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.floats(0, 40), st.floats(0, 100), st.floats(0.01, 1)),
            st.tuples(st.just("values"), st.floats(0, 45), st.integers(1, 12), st.booleans()),
            st.tuples(st.just("clear"), st.just(0.0), st.just(0.0), st.just(0.0)),
        ),
        max_size=60,
    ),
    capacity=st.integers(1, 12),
)
def test_a_history_shifted_from_the_last_window_is_the_history_read_afresh(steps, capacity):
    """``values`` reuses the window it gave last and reads only the bins from its newest on; whatever the adds, reads
    (forwards, backwards, longer, shorter) and clears, it gives what reading every bin afresh gives."""
    series = BinnedSeries(1.0, capacity)
    added: list[tuple[float, float, float]] = []
    for op, a, b, c in steps:
        if op == "add":
            series.add(a, b, c)
            added.append((a, b, c))
        elif op == "clear":
            series.clear()
            added.clear()
        else:
            n, missing = min(int(b), capacity), (0.0 if c else math.nan)
            fresh = BinnedSeries(1.0, capacity)
            for t, value, weight in added:
                fresh.add(t, value, weight)
            assert repr(series.values(a, n, missing)) == repr(fresh.values(a, n, missing))


@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.floats(0.01, 0.6), min_size=1, max_size=120),
    cuts=st.sets(st.integers(0, 119)),
)
def test_the_view_is_the_same_however_the_steps_were_batched(gaps, cuts):
    """A probe message's steps reach the model as one StepBatch: its graphs, figures and last step are those of the
    same steps one by one."""
    steps, t = [], 0.0
    for n, gap in enumerate(gaps):
        t += gap
        steps.append(StepEvent("A", 1, n, t, gap, samples=8.0 + n % 3, warmup=n < 3))
    batches: list[list[StepEvent]] = []
    for i, step in enumerate(steps):
        if not batches or i in cuts:
            batches.append([])
        batches[-1].append(step)
    views = []
    for feed in ([StepBatch("A", tuple(b)) for b in batches], [StepBatch.of(s) for s in steps]):
        model = LiveModel()
        model.handle(WorkloadState("A", "starting", 0.0, pid=1))
        model.handle(WorkloadState("A", "running", 0.0, pid=1))
        for batch in feed:
            model.handle(batch)
        views.append(repr(model.view(t + 0.5, width=60).workload("A")))
    assert views[0] == views[1]
