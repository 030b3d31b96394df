"""Capture and shutdown in the app: no capture can start once shutdown has begun (issue 15, defect 2),
and a capture that cannot be written is shown on screen and stops the jobs (issue 14)."""

from __future__ import annotations

import shlex
import sys
import threading

import pytest

from gpumon.core.store.trace import load_run
from gpumon.errors import EnvironmentFailure
from gpumon.tui.app import LiveApp
from gpumon.tui.controller import Controller
from gpumon.tui.widgets.lines import TextLine
from tests.helpers import remove_tree, wait_for
from tests.tui.conftest import make_test_plan, probe_command, run_async
from tests.helpers import wait_until

# A child that ignores SIGTERM: the launcher waits its 5 s grace before SIGKILL, so shutdown is slow.
STUBBORN = shlex.join(
    [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(120)",
    ]
)


def _runs(runs_dir):
    return sorted(p for p in runs_dir.iterdir() if (p / "run.json").exists())


def test_toggle_capture_after_shutdown_is_refused_and_opens_no_run(runs_dir):
    controller = Controller(make_test_plan(runs_dir))
    controller.start()
    capturing, first = controller.toggle_capture()
    assert capturing and first is not None
    assert controller.shutdown() == first
    with pytest.raises(EnvironmentFailure, match="shutting down"):
        controller.toggle_capture()
    assert _runs(runs_dir) == [first]
    assert load_run(first).meta.status == "complete"
    assert controller.session.recorder is None


def test_toggle_capture_while_shutdown_is_under_way_is_refused_at_once(runs_dir):
    controller = Controller(make_test_plan(runs_dir, [STUBBORN], label="stubborn"))
    first = controller.start()
    controller.launch(slot="A", request=controller.plan.requests[0])
    wait_for(
        lambda: "up" in "\n".join(controller.session.launcher.get("A").tail),
        what="the child to start",
    )
    stopper = threading.Thread(target=controller.shutdown)
    stopper.start()
    wait_for(lambda: controller.shutting_down, what="shutdown to begin")
    with pytest.raises(EnvironmentFailure, match="shutting down"):
        controller.toggle_capture()
    assert stopper.is_alive(), "the refusal came while shutdown was still under way"
    stopper.join(30)
    assert _runs(runs_dir) == [first]
    assert load_run(first).meta.status == "complete"


@run_async
async def test_c_during_shutdown_does_nothing_and_says_why(runs_dir):
    app = LiveApp(Controller(make_test_plan(runs_dir, [STUBBORN, probe_command()], label="pair")))
    async with app.run_test(size=(100, 30)) as pilot:
        first = await wait_until(pilot, lambda: app.controller.capture_path, what="the capture")
        await wait_until(
            pilot,
            lambda: app.controller.running("A") and app.controller.running("B"),
            what="both jobs",
        )
        await pilot.press("q")
        await wait_until(pilot, lambda: app.controller.shutting_down, what="shutdown to begin")
        await pilot.press("c")
        await wait_until(
            pilot,
            lambda: any("c does nothing now" in n.message for n in app._notifications),
            what="the refusal",
        )
        await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")
    assert _runs(runs_dir) == [first]
    assert load_run(first).meta.status == "complete"


@run_async
async def test_a_capture_that_cannot_be_written_is_shown_and_stops_the_jobs(runs_dir):
    app = LiveApp(Controller(make_test_plan(runs_dir, [probe_command()], label="probe")))
    async with app.run_test(size=(100, 30)) as pilot:
        path = await wait_until(pilot, lambda: app.controller.capture_path, what="the capture")
        await wait_until(pilot, lambda: app.controller.running("A"), what="the job")
        remove_tree(path)
        await wait_until(
            pilot,
            lambda: any(n.message.startswith("capture stopped at ") for n in app._notifications),
            what="the notification",
        )
        await wait_until(
            pilot,
            lambda: "✖ capture stopped at" in app.monitor.query_one("#status", TextLine).plain,
            what="the status line",
        )
        await wait_until(
            pilot, lambda: not app.controller.running("A"), what="the job to be stopped"
        )
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")
    assert app.return_value == 1
