"""The Textual app: opens the live monitor on a session (or a replay), and quits cleanly.

``run_app(plan)`` is what ``gpumon`` and ``gpumon run`` call. The session is
started on a worker thread (NVML), the plan's workloads are launched from the
main thread (PDEATHSIG follows the forking thread), and quitting stops the
children and finishes the capture before the app exits. SIGTERM, SIGINT and
SIGHUP quit the same way, and end the process even when the terminal stopped
reading (gpumon/console/stopsignals.py).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from gpumon.core.capture.sequence import Event, LaunchFailed, NotStarted, Started, TimeUp
from gpumon.frontends.plan import RunPlan
from gpumon.errors import GpumonError, UsageError
from gpumon.console.stopsignals import StopGuard
from gpumon.tui.controller import Controller
from gpumon.tui.driver import QuietLinuxDriver
from gpumon.tui.pump import DEFAULT_HZ
from gpumon.tui.screens.attached import AttachedScreen, open_follow
from gpumon.tui.screens.live import LiveMonitorScreen
from gpumon.tui.screens.monitor import NOTICE_S, MonitorScreen

log = logging.getLogger(__name__)

REFRESH_ENV = "GPUMON_REFRESH_HZ"
# While the plan still has a start to make (or --duration to end), the sequence is looked at this often: a stagger's
# start is on time to this, and a job that fails before its partner's start is answered this soon.
SEQUENCE_POLL_S = 0.25
# The shortest wait before looking again, when a start is due now or already was: Textual's one-shot timer with a
# delay of 0 divides by it (ZeroDivisionError in its task), which ended the sequence: nothing more ever started.
SEQUENCE_MIN_WAIT_S = 0.01


def refresh_hz_from_env(default: float = DEFAULT_HZ) -> float:
    """``$GPUMON_REFRESH_HZ`` (0.5 to 30), else ``default``."""
    raw = os.environ.get(REFRESH_ENV)
    if not raw:
        return default
    try:
        hz = float(raw)
    except ValueError:
        raise UsageError(f"{REFRESH_ENV}={raw!r} is not a number") from None
    if not 0.5 <= hz <= 30:
        raise UsageError(f"{REFRESH_ENV} must be between 0.5 and 30, got {hz:g}")
    return hz


def settle_heap() -> None:
    """Move what start-up made (imports, Textual's widgets and styles, the session) out of the collector's reach: a
    full collection then walks only what was made since, not the whole heap again (55 ms about once a minute on the
    2-core box, 0.09 % of a core: observer_cost, docs/tui.md)."""
    gc.collect()
    gc.freeze()


class GpumonApp(App[int]):
    """What both apps share: the look, the signals that quit them, a failed worker made one message."""

    CSS_PATH = "gpumon.tcss"
    TITLE = "gpumon"
    # a notice over the panes goes soon: what it says is also in a panel or line
    NOTIFICATION_TIMEOUT = NOTICE_S
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("ctrl+c", "quit", "Quit", show=False, priority=True)]

    def __init__(self, refresh_hz: float = DEFAULT_HZ) -> None:
        super().__init__()
        self.refresh_hz = refresh_hz
        self.quitting = False
        self.stop_signalled = False
        self.stop_signum: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get_driver_class(self) -> type[Driver]:
        """Textual's, except its Linux driver: ours, whose input thread does not poll (gpumon/tui/driver.py)."""
        driver = super().get_driver_class()
        return QuietLinuxDriver if driver is LinuxDriver else driver

    def on_mount(self) -> None:
        self._loop = asyncio.get_running_loop()

    def on_unmount(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, MonitorScreen) and screen.pump is not None:
                screen.pump.stop()

    def stop_from_signal(self, signum: int) -> None:
        """From a signal handler: quit through the event loop when it runs."""
        self.stop_signum = signum
        self.stop_signalled = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.call_later, self.action_quit)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker failure becomes one visible message (and a log record)."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if isinstance(error, GpumonError):
            text = str(error)
        else:
            log.error("worker %s failed", event.worker.name, exc_info=error)
            text = f"{event.worker.name or 'task'} failed: {type(error).__name__}: {error}"
        self.notify(text, severity="error", timeout=15)


class ViewerApp(GpumonApp):
    """One screen that owns no session: a replay (the snapshot tests and screenshots use it) or an attached viewer.
    Quitting ends the viewer alone."""

    def __init__(self, screen: MonitorScreen, refresh_hz: float = DEFAULT_HZ) -> None:
        super().__init__(refresh_hz)
        self.first_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.first_screen)

    async def action_quit(self) -> None:
        self.quitting = True
        self.exit(0)


class LiveApp(GpumonApp):
    """A live session (``controller``): launches the plan's jobs, and quitting stops them and finishes the
    capture before the app exits. ``freeze_heap``: ``settle_heap`` once the session has started (``run_app``'s, the
    one app of its process; not an app of a test, whose process runs many)."""

    def __init__(
        self, controller: Controller, refresh_hz: float = DEFAULT_HZ, freeze_heap: bool = False
    ) -> None:
        super().__init__(refresh_hz)
        self.controller = controller
        self.freeze_heap = freeze_heap
        self.monitor = LiveMonitorScreen(controller, refresh_hz)
        self.session_ready = False
        self._sequence_timer: Timer | None = None

    def on_mount(self) -> None:
        self.push_screen(self.monitor)
        self.run_worker(self._start_session, thread=True, group="session", exit_on_error=False)

    def _start_session(self) -> None:
        path = self.controller.start()
        self.call_from_thread(self._session_started, path)

    def _session_started(self, path: object) -> None:
        self.session_ready = True
        if path is not None:
            self.notify(f"capturing to {path}")
        self._launch_plan()
        if self.freeze_heap:
            settle_heap()

    def _launch_plan(self) -> None:
        """Drive the plan's run sequence (``RunSequence``: what starts when, or why not) from this, the main thread:
        now, then whenever it is due again, until nothing is left to start and no --duration to end."""
        self._sequence_timer = None
        for event in self.controller.advance(self._stopping()):
            self._say(event)
        due = self.controller.sequence.wake_at()
        if due is not None and not self.quitting:
            delay = min(max(due - self.controller.clock_now, SEQUENCE_MIN_WAIT_S), SEQUENCE_POLL_S)
            self._sequence_timer = self.set_timer(delay, self._launch_plan)

    def _stopping(self) -> str | None:
        """Why nothing more may start (a signal, the user quit), in the words a job's "not started" reason uses."""
        if self.stop_signalled:
            return (
                f"stopped by {signal.Signals(self.stop_signum).name}"
                if self.stop_signum
                else "stopped"
            )
        return "the monitor was quit" if self.quitting else None

    def _say(self, event: Event) -> None:
        """One notification for what the run sequence did."""
        if isinstance(event, Started):
            if event.workload.owned:
                self.notify(
                    f"{event.slot}: started {event.workload.request.spec} (pid {event.workload.pid})"
                )
            else:
                how = (
                    "its probe's steps"
                    if event.workload.probe is not None
                    else "no probe: rate unknown"
                )
                self.notify(
                    f"{event.slot}: watching pid {event.workload.pid} ({how}); never signalled"
                )
            self.monitor.pump_soon()
        elif isinstance(event, NotStarted):
            self.notify(f"{event.slot} not started: {event.reason}", severity="warning", timeout=15)
        elif isinstance(event, LaunchFailed):
            self.notify(
                f"{event.slot} could not start: {event.error}", severity="error", timeout=15
            )
        elif isinstance(event, TimeUp):
            self.call_later(self.action_quit)

    async def action_quit(self) -> None:
        """Stop the children and finish the capture on a worker, then exit."""
        if self.quitting:
            return
        self.quitting = True
        # what the plan had still to start never will: each is recorded "not started"
        if self.session_ready:
            if self._sequence_timer is not None:
                self._sequence_timer.stop()
            for event in self.controller.advance(self._stopping()):
                self._say(event)
        self.notify("stopping workloads and finishing the capture…", timeout=30)
        self.run_worker(self._stop_session, thread=True, group="shutdown", exit_on_error=False)

    def _stop_session(self) -> None:
        try:
            self.controller.shutdown()
        finally:
            self.call_from_thread(self.exit, self.controller.exit_code())


def run_app(plan: RunPlan, refresh_hz: float | None = None) -> int:
    """Open the live monitor on ``plan``; returns the exit status (1 if a workload failed)."""
    hz = refresh_hz if refresh_hz is not None else refresh_hz_from_env()
    controller = Controller(plan)
    app = LiveApp(controller, refresh_hz=hz, freeze_heap=True)

    def finish() -> int:
        controller.shutdown()
        return controller.exit_code()

    guard = StopGuard(app.stop_from_signal, finish).install()
    try:
        result = app.run()
    finally:
        final = controller.shutdown()
    error = controller.session.capture_error
    if error is not None:
        print(f"gpumon: {error.line()}", file=sys.stderr)
    if final is not None and (error is None or error.finalised):
        print(
            f"gpumon: run saved to {final}" + (" (truncated)" if error is not None else ""),
            file=sys.stderr,
        )
    elif error is not None and not error.finalised:
        print(
            f"gpumon: could not finalise {error.path / 'run.json'}: {error.finalise_error}",
            file=sys.stderr,
        )
    guard.done()
    guard.restore()
    return result if isinstance(result, int) else controller.exit_code()


def run_viewer(
    path: Path,
    baselines: tuple[tuple[str, str], ...] = (),
    refresh_hz: float | None = None,
    any_user: bool = False,
) -> int:
    """``gpumon attach``: the monitor on the run at ``path`` that its runner is writing, until the user quits;
    ``baselines``: the viewer's own ``--baseline`` runs (slot, run directory); ``any_user``: its ``x`` may stop
    another user's run.

    The viewer owns nothing: quitting, a signal or a closed terminal (SIGHUP) ends the viewer alone.
    """
    source, feed = open_follow(path)
    app = ViewerApp(
        AttachedScreen(
            source,
            feed,
            refresh_hz or refresh_hz_from_env(),
            baselines=baselines,
            any_user=any_user,
        )
    )
    guard = StopGuard(app.stop_from_signal, lambda: 0).install()
    try:
        result = app.run()
    finally:
        source.stop()
        guard.done()
        guard.restore()
    return result if isinstance(result, int) else 0
