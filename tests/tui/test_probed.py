"""The monitor and a probed process it did not start: listed with its live rate, watched as B with a key (or
--beside), captured with its probe's history, and left running when the monitor quits."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading

import pytest

from gpumon.core.store.trace import load_run
from gpumon.tui.app import LiveApp
from gpumon.tui.controller import Controller
from gpumon.tui.pump import RefreshPump
from gpumon.tui.screens.probes import ProbesScreen
from gpumon.tui.widgets.probed import ProbedLine
from tests.tui.conftest import make_test_plan, probe_command, run_async
from tests.helpers import wait_until

STEPPER = textwrap.dedent(
    """
    import time
    from gpumon import probe
    probe.step()
    print("up", flush=True)
    while True:
        time.sleep(0.01)
        probe.step()
    """
)


@pytest.fixture(scope="module")
def stepper():
    """A probed loop started outside gpumon (its own session), as a user's training in tmux would be."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STEPPER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    yield proc
    proc.kill()
    proc.wait()


def recorded_b(run_dir):
    run = load_run(run_dir)
    steps = run.steps()
    return run, steps[steps.process == "B"]


@run_async
async def test_listed_with_its_rate_then_watched_with_w(stepper, runs_dir):
    app = LiveApp(Controller(make_test_plan(runs_dir)))
    async with app.run_test(size=(120, 40)) as pilot:
        line = app.screen.query_one(ProbedLine)
        await wait_until(
            pilot,
            lambda: line.display and str(stepper.pid) in line.plain and "it/s" in line.plain,
            what="the probed process in the monitor",
        )
        listed = {p.pid: p for p in app.controller.probes.processes()}
        await wait_until(
            pilot,
            lambda: app.controller.probes.processes()[0].iter_per_s > 10,
            what="its live rate",
        )
        assert stepper.pid in listed
        await pilot.press("w")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, ProbesScreen) and app.screen.shown,
            what="the list",
        )
        assert app.screen.shown == [stepper.pid]
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.controller.running("B"), what="B attached")
        path = app.controller.capture_path
        assert path is not None  # watching it captures it, from before it was attached
        await wait_until(pilot, lambda: not line.display, what="the line hidden while B is taken")
        await wait_until(pilot, lambda: len(recorded_b(path)[1]) > 50, what="B's steps recorded")
        panel = app.controller.model.view(app.controller.clock_now).workload("B")
        assert panel.state == "watched, not ours" and panel.pid == stepper.pid
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")
    assert stepper.poll() is None  # q left it running
    run, b = recorded_b(path)
    entry = run.workloads[0]
    assert entry.slot == "B" and entry.owned is False and entry.state == "detached" and entry.probe
    assert b["t"].min() < 0  # its history from before the capture


@run_async
async def test_beside_in_the_monitor(stepper, runs_dir):
    plan = make_test_plan(runs_dir, [probe_command()], beside=str(stepper.pid))
    app = LiveApp(Controller(plan))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot,
            lambda: app.controller.running("A") and app.controller.running("B"),
            what="A beside B",
        )
        path = app.controller.capture_path
        await wait_until(pilot, lambda: len(recorded_b(path)[1]) > 20, what="B's steps recorded")
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")
    assert stepper.poll() is None
    run = load_run(path)
    assert [(w.slot, w.state) for w in run.workloads] == [("A", "stopped"), ("B", "detached")]


@run_async
async def test_the_monitor_wakes_for_frames_only_no_timer_of_its_own(runs_dir):
    """The probed line is brought up to date with each frame: no widget of the monitor runs a repeating timer of
    gpumon's, which would wake the UI thread with nothing to draw (observer_cost: the UI thread's wake-ups)."""
    app = LiveApp(Controller(make_test_plan(runs_dir)))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot,
            lambda: app.session_ready and app.monitor.frames >= 2,
            what="two frames drawn",
        )
        assert app.screen.query_one(ProbedLine).is_mounted  # shown or hidden with each frame
        repeating = [
            timer._callback
            for node in (app.screen, *app.screen.walk_children())
            for timer in node._timers
            if timer._repeat is None
            and getattr(timer._callback, "__module__", "").startswith("gpumon")
        ]
        assert repeating == []
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")


@run_async
async def test_one_refresh_thread_per_monitor(runs_dir):
    """Textual runs the screen's on_mount of each class itself: the monitor starts one refresh thread, not one per
    class (a second one built and drew a frame more every 5 s: observer_cost's second gpumon-refresh thread)."""
    app = LiveApp(Controller(make_test_plan(runs_dir)))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot, lambda: app.session_ready and app.monitor.frames >= 2, what="two frames drawn"
        )
        model = app.monitor.feed.model
        pumps = [
            t
            for t in threading.enumerate()
            if isinstance(t, RefreshPump) and t.model is model and t.is_alive()
        ]
        assert pumps == [app.monitor.pump]
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")


@run_async
async def test_what_start_up_made_is_out_of_the_collectors_reach(runs_dir):
    """Once the session has started, start-up's objects are frozen: a full collection walks only what came after
    (observer_cost: 55 ms a full collection, about once a minute, before)."""
    gc.unfreeze()
    app = LiveApp(Controller(make_test_plan(runs_dir)), freeze_heap=True)  # as run_app makes it
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.session_ready, what="the session started")
            assert gc.get_freeze_count() > 10_000  # Textual's and gpumon's modules at least
            await pilot.press("q")
            await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")
    finally:
        gc.unfreeze()
