"""The TUI drives the same run sequence as --headless (core/capture/sequence.py): a plan's second job is not
started once the first has failed, and with --beside the launched job is not started when watching B failed.
Real children and a real process to watch; the app driven by Pilot."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

from gpumon.core.store.trace import load_run
from gpumon.frontends.plan import make_plan
from gpumon.core.capture.session import SessionConfig
from gpumon.tui.app import GpumonApp, LiveApp
from gpumon.tui.controller import Controller
from tests.tui.conftest import make_test_plan, probe_command, run_async
from tests.helpers import wait_until

STAGGER_S = (
    30.0  # far beyond the failing job's end: B's start is due long after the test has its answer
)


async def _notified(pilot, app: GpumonApp, shown, what: str) -> None:
    """Wait for a notification whose text ``shown(text)`` holds: ``notify`` posts it, the app's loop adds it later."""
    await wait_until(pilot, lambda: any(shown(n.message) for n in app._notifications), what=what)


async def _quit(pilot, app: GpumonApp) -> None:
    await pilot.press("q")
    await wait_until(pilot, lambda: app.return_value is not None, 30, "the app to quit")


@run_async
async def test_b_is_not_started_once_a_has_failed_and_the_run_says_why(runs_dir):
    plan = make_test_plan(
        runs_dir, [probe_command(steps=5, exit_code=3), probe_command()], label="fails"
    )
    plan = dataclasses.replace(plan, stagger_s=STAGGER_S)
    app = LiveApp(Controller(plan))
    async with app.run_test(size=(100, 30)) as pilot:
        controller = app.controller
        await wait_until(
            pilot, lambda: "B" in controller.sequence.not_started, what="B to be given up"
        )
        reason = controller.sequence.not_started["B"]
        assert re.fullmatch(
            r"A exited with status 3 at [\d.]+ s, before B's start at 3\d\.\d s \(--stagger 30\)",
            reason,
        ), reason
        assert not controller.sequence.pending, (
            "nothing is left to start: B can never be launched now"
        )
        assert controller.session.launcher.get("B") is None, "B was never launched"
        await _notified(pilot, app, lambda m: m == f"B not started: {reason}", "B's notice")
        path = controller.capture_path
        await _quit(pilot, app)
    assert app.return_value == 1, "a job failed"
    b = load_run(path).meta.workload("B")
    assert b is not None and b.state == "not started" and b.reason == reason and b.pid is None


@run_async
async def test_with_beside_a_is_not_started_when_b_cannot_be_watched(runs_dir):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        config = SessionConfig(device="cpu", interval_ms=100, runs_dir=runs_dir, nvml=False)
        plan = make_plan(
            [],
            [probe_command()],
            session=config,
            label="beside",
            duration_s=None,
            stagger_s=0.5,
            beside=str(target.pid),
        )  # checked while it runs
    finally:
        target.kill()
        target.wait()  # gone before the app attaches it
    app = LiveApp(Controller(plan))
    async with app.run_test(size=(100, 30)) as pilot:
        controller = app.controller
        await wait_until(
            pilot, lambda: "A" in controller.sequence.not_started, what="A to be given up"
        )
        reason = controller.sequence.not_started["A"]
        assert reason.startswith(
            f"B could not start (--beside {target.pid}: the process has exited), before A's start"
        )
        assert controller.session.launcher.get("A") is None, (
            "A was not started on a timer regardless"
        )
        await _notified(
            pilot, app, lambda m: m.startswith("B could not start: --beside"), "B's notice"
        )
        assert not controller.sequence.pending and controller.sequence.wake_at() is None, (
            "nothing left to start"
        )
        await _quit(pilot, app)
    assert app.return_value == 1, "the plan's B could not be watched"


@run_async
async def test_quitting_before_the_stagger_records_b_as_not_started(runs_dir):
    plan = make_test_plan(runs_dir, [probe_command(), probe_command()], label="quit")
    plan = dataclasses.replace(plan, stagger_s=STAGGER_S)
    app = LiveApp(Controller(plan))
    async with app.run_test(size=(100, 30)) as pilot:
        controller = app.controller
        await wait_until(pilot, lambda: controller.running("A"), what="A to start")
        path = controller.capture_path
        await _quit(pilot, app)
    assert app.return_value == 0
    assert list(controller.sequence.not_started) == ["B"]
    assert re.fullmatch(
        r"the monitor was quit before its start at 3\d\.\d s \(--stagger 30\)",
        controller.sequence.not_started["B"],
    )
    b = load_run(path).meta.workload("B")
    assert b is not None and b.state == "not started"


@run_async
async def test_a_start_already_due_when_the_sequence_is_looked_at_is_still_made(runs_dir):
    """The sequence asked to be looked at again at a time already past (a start due as the last look ended): the app
    waited 0 s on a Textual one-shot timer, whose task divides by its delay; the timer died and B never started."""
    plan = dataclasses.replace(
        make_test_plan(runs_dir, [probe_command(), probe_command()], label="due"), stagger_s=0.5
    )
    controller = Controller(plan)
    wake_at, looks = controller.sequence.wake_at, []

    def already_due() -> float | None:
        looks.append(due := wake_at())
        return None if due is None else min(due, controller.clock_now - 1.0)

    controller.sequence.wake_at = already_due  # type: ignore[method-assign]
    app = LiveApp(controller)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(
            pilot, lambda: controller.running("B"), what="B to start after its stagger"
        )
        assert len(looks) >= 2, "looked at again after a wake time already past"
        await _quit(pilot, app)
    assert app.return_value == 0
