"""The live monitor: the panels of a running session plus launch, stop, capture, export and stack keys."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.binding import Binding

from gpumon.core.jobs.beside import SLOT as BESIDE_SLOT
from gpumon.core.jobs.launcher import LaunchRequest
from gpumon.core.records.slots import Slot
from gpumon.errors import GpumonError
from gpumon.tui.controller import Controller
from gpumon.tui.pump import DEFAULT_HZ
from gpumon.tui.screens.monitor import STACK_BINDINGS, VIEW_BINDINGS, Feed, MonitorScreen
from gpumon.tui.view import View
from gpumon.tui.widgets.probed import ProbedLine
from gpumon.tui.screens.launch import LaunchScreen
from gpumon.tui.screens.probes import ProbesScreen
from gpumon.tui.screens.stack import open_stack
from gpumon.tui.screens.runs import RunsScreen

LAUNCH = Binding.Group("Launch")
STOP = Binding.Group("Stop")


class LiveMonitorScreen(MonitorScreen, inherit_bindings=False):
    """What ``gpumon`` and ``gpumon run`` open."""

    EMPTY_SLOT = "empty: press {key} to launch a workload into slot {slot}"

    def no_rates_hint(self) -> str:
        """With a --stagger given, A's start (an import, a data load) can outlast it: say that, not "use --stagger"."""
        stagger = self.controller.plan.stagger_s
        if stagger > 0 and len(self.controller.plan.requests) > 1:
            return (
                f"no exclusive rates: A took too few steps alone in --stagger {stagger:g} s; "
                "give a longer one, or --baseline A=RUN"
            )
        return super().no_rates_hint()

    BINDINGS = [
        Binding(
            "a", "launch('A')", "Launch A", group=LAUNCH, tooltip="launch a workload into slot A"
        ),
        Binding(
            "b", "launch('B')", "Launch B", group=LAUNCH, tooltip="launch a workload into slot B"
        ),
        Binding(
            "A", "stop('A')", "Stop A", group=STOP, tooltip="stop the workload in slot A (shift+a)"
        ),
        Binding(
            "B", "stop('B')", "Stop B", group=STOP, tooltip="stop the workload in slot B (shift+b)"
        ),
        Binding(
            "c",
            "toggle_capture",
            "Rec",
            tooltip="capture on/off: record everything to a new run directory",
        ),
        Binding(
            "e",
            "export",
            "CSV",
            tooltip="export the current (or last) capture as plain CSV into ./<run>-csv",
        ),
        *STACK_BINDINGS,
        *VIEW_BINDINGS,
        Binding("r", "runs", "Runs", tooltip="recorded runs: replay one, mark runs to compare"),
        Binding(
            "w",
            "probes",
            "Watch",
            show=False,
            tooltip="your probed processes gpumon did not start: watch one as job B (never signalled)",
        ),
        Binding(
            "q",
            "app.quit",
            "Quit",
            tooltip="stop the workloads, finish the capture and quit (a run started "
            "with --detach outlives its terminal instead: gpumon attach)",
        ),
    ]

    def __init__(self, controller: Controller, refresh_hz: float = DEFAULT_HZ, **kwargs) -> None:
        feed = Feed(controller.model, controller.session.clock.now, controller.gather)
        super().__init__(feed, refresh_hz, **kwargs)
        self.controller = controller

    def on_mount(self) -> None:
        b_free = lambda: self.controller.running(BESIDE_SLOT) is None  # noqa: E731
        self._probed = ProbedLine(self.controller.probes, b_free, id="probed")
        self.mount(self._probed, before=self.query_one("#output"))

    def draw(self, view: View) -> None:
        """The panels, and the probed processes' line with them."""
        super().draw(view)
        if self._probed.is_mounted:
            self._probed.update_line()

    def status_text(self, view: View) -> Text:
        share = self.controller.session.config.share
        text = self.status_head("gpumon", view, share.describe(), share.mps)
        path = self.controller.capture_path
        if path is not None:
            text.append("● REC", style="bold red")
            self.path_tail(text, path)
        elif self.controller.session.capture_error is not None:
            text.append(f"✖ {self.controller.session.capture_error.line()}", style="bold red")
        else:
            text.append("○ not capturing (c starts)", style="dim")
        return self.paused_suffix(text)

    # -- launch / stop ----------------------------------------------------------

    def action_launch(self, slot: Slot) -> None:
        if self.controller.running(slot) is not None:
            self.notify(f"slot {slot} is busy; {slot} (shift) stops it first", severity="warning")
            return
        session = self.controller.plan.session
        screen = LaunchScreen(slot, session.device, session.python)
        self.app.push_screen(screen, lambda request: self._launched(slot, request))

    def _launched(self, slot: Slot, request: LaunchRequest | None) -> None:
        if request is None:
            return
        self.launch(slot, request)

    def launch(self, slot: Slot, request: LaunchRequest) -> None:
        """Start ``request`` in ``slot`` from the UI (main) thread, so the child is tied to the monitor."""
        try:
            workload = self.controller.launch(slot=slot, request=request)
        except GpumonError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{slot}: started {request.spec} (pid {workload.pid})")

    def action_stop(self, slot: Slot) -> None:
        if self.controller.running(slot) is None:
            self.notify(f"nothing runs in slot {slot}", severity="warning")
            return
        self._stop(slot)

    @work(thread=True, group="stop", exit_on_error=False)
    def _stop(self, slot: Slot) -> None:
        self.controller.stop(slot)

    # -- attach (--beside from the monitor) -----------------------------------------

    def action_probes(self) -> None:
        if self.controller.running(BESIDE_SLOT) is not None:
            self.notify(
                f"slot {BESIDE_SLOT} is busy; {BESIDE_SLOT} (shift) stops it first",
                severity="warning",
            )
            return
        self.app.push_screen(ProbesScreen(self.controller.probes), self._chosen)

    def _chosen(self, pid: int | None) -> None:
        if pid is not None:
            self.attach(pid)

    @work(thread=True, group="attach", exit_on_error=False)
    def attach(self, pid: int) -> None:
        """Watch a running process as job B (a capture starts first, so its probe's history is recorded)."""
        workload = self.controller.attach(pid)
        how = "its probe's steps" if workload.probe is not None else "no probe: rate unknown"
        self.app.call_from_thread(
            self.notify, f"{BESIDE_SLOT}: watching pid {workload.pid} ({how}); never signalled"
        )
        self.pump_soon()

    # -- capture / export ---------------------------------------------------------

    def action_toggle_capture(self) -> None:
        if getattr(self.app, "quitting", False) or self.controller.shutting_down:
            self.notify(
                "shutting down: the capture is being finished; c does nothing now",
                severity="warning",
            )
            return
        self._toggle_capture()

    @work(thread=True, exclusive=True, group="capture", exit_on_error=False)
    def _toggle_capture(self) -> None:
        capturing, path = self.controller.toggle_capture()
        text = f"capturing to {path}" if capturing else f"capture saved: {path}"
        self.app.call_from_thread(self.notify, text)
        self.pump_soon()

    def action_export(self) -> None:
        self._export()

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _export(self) -> None:
        out, files = self.controller.export_csv()
        self.app.call_from_thread(self.notify, f"exported {len(files)} CSV files to {out}")

    # -- stack ------------------------------------------------------------------

    def action_stack(self, slot: Slot) -> None:
        workload = self.controller.running(slot)
        if workload is None:
            self.notify(f"nothing runs in slot {slot}", severity="warning")
            return
        open_stack(self, slot, workload.pid)

    # -- other screens ----------------------------------------------------------

    def action_runs(self) -> None:
        self.app.push_screen(RunsScreen(self.controller.plan.session.runs_dir, self.refresh_hz))

    def pump_soon(self) -> None:
        if self.pump is not None:
            self.pump.poke()
