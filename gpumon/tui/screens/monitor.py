"""The monitor screen: device panel, one panel per workload, interference line, child output.

It draws views from a feed (a live session or a replay). A refresh thread
builds each view off the UI thread and posts one ``Refresh`` message; the
handler draws it inside ``batch_update()`` and tells the thread it may send the
next. Paused, hidden or covered, the screen keeps the latest view and skips drawing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen

from gpumon.core.records.printable import printable
from gpumon.core.records.share import shown_share
from gpumon.tui.messages import Refresh
from gpumon.tui.model import LiveModel
from gpumon.tui.pump import DEFAULT_HZ, RefreshPump
from gpumon.tui.view import View
from gpumon.tui.widgets.box import CachedBox, Keys, Row
from gpumon.tui.widgets.device import DevicePanel
from gpumon.tui.widgets.gpus import GpuLines
from gpumon.tui.widgets.interference import NO_RATES, InterferenceLine
from gpumon.tui.widgets.lines import TextLine
from gpumon.tui.widgets.output import ChildOutput
from gpumon.tui.widgets.processes import MAX_ROWS, ProcessTable
from gpumon.tui.widgets.workload import WorkloadPanel
from gpumon.tui.screens.filter import FilterScreen
from gpumon.tui.screens.help import GPU_MEANINGS, HelpScreen

SMALL_HEIGHT = 30  # rows below which the process table replaces the workloads' output
SMALL_ROWS = 3


@dataclass(frozen=True)
class Feed:
    """Where a monitor screen's data comes from: a model fed by a bus, and that bus's clock; ``gather``: what brings
    the feed's newest data onto the bus before a frame is built (a live session's probes), None where it comes alone."""

    model: LiveModel
    now: Callable[[], float]
    gather: Callable[[], object] | None = None


VIEW_BINDINGS: list[BindingType] = [
    Binding(
        "g",
        "next_gpu",
        "GPU",
        tooltip="show the next GPU in the device panel (a box with several GPUs; "
        "the line marked jobs is the jobs' GPU, the one captured)",
    ),
    Binding(
        "o",
        "toggle_output",
        "Output",
        tooltip="show or hide the last lines of each workload's output",
    ),
    Binding(
        "p",
        "toggle_pause",
        "Pause",
        tooltip="freeze the display (data keeps being collected and captured)",
    ),
    Binding(
        "space",
        "toggle_pause",
        "Pause",
        show=False,
        tooltip="freeze the display (data keeps being collected and captured)",
    ),
    Binding(
        "full_stop",
        "sort_processes",
        "Sort",
        show=False,
        tooltip="sort the process table by its next column (GPU MEM, SM%, CPU%, HOST MEM, ELAPSED, PID)",
    ),
    Binding(
        "slash",
        "filter_processes",
        "Filter",
        show=False,
        tooltip="show only the processes whose PID, user or command contains a text",
    ),
    Binding("question_mark", "help", "Help", tooltip="this help"),
]
# py-spy's stack of a running job (``action_stack``): the live monitor's and the attached viewer's
STACK = Binding.Group("Stack")
# not in the footer, which must fit 80 columns with its Quit key: ? (help) lists them
STACK_BINDINGS = [
    Binding(
        "s",
        "stack('A')",
        "Stack A",
        group=STACK,
        show=False,
        tooltip="Python stack of workload A now (py-spy dump)",
    ),
    Binding(
        "S",
        "stack('B')",
        "Stack B",
        group=STACK,
        show=False,
        tooltip="Python stack of workload B now (shift+s)",
    ),
]
NOTICE_S = (
    3.0  # how long a notice covers the panes (the app's NOTIFICATION_TIMEOUT); errors stay longer
)


def short_path(path: Path, width: int) -> str:
    """``~/…/runs/20260101-120000-fcn`` cut from the left to ``width`` characters."""
    text = str(path)
    home = str(Path.home())
    if text.startswith(home + "/"):
        text = "~" + text[len(home) :]
    return text if len(text) <= width else "…" + text[-(width - 1) :]


class MonitorScreen(Screen, CachedBox, inherit_bindings=False):
    """Panels drawn from a feed; subclasses add the keys of a live session or of a replay. Its own lines (the
    background, behind the panels) are kept while they do not change (``CachedBox``)."""

    BINDINGS = VIEW_BINDINGS
    # what an empty slot's panel says: the live monitor launches into it; a replay or a viewer has no launch key
    EMPTY_SLOT = "empty: no job in slot {slot}"

    paused = reactive(False, init=False)
    show_output = reactive(True, init=False)

    def __init__(self, feed: Feed, refresh_hz: float = DEFAULT_HZ, **kwargs) -> None:
        super().__init__(**kwargs)
        self.feed = feed
        self.refresh_hz = refresh_hz
        self.latest: View | None = None
        self.frames = 0
        self._notices_seen = 0
        self._several_gpus = False
        self.pump: RefreshPump | None = None

    def compose(self) -> ComposeResult:
        yield TextLine(id="status")
        yield GpuLines(id="gpus")
        yield DevicePanel(id="device")
        with Row(id="workloads"):
            for slot in ("A", "B"):
                yield WorkloadPanel(
                    slot, self.EMPTY_SLOT.format(slot=slot, key=slot.lower()), id=f"panel-{slot}"
                )
        yield InterferenceLine(id="interference")
        yield ProcessTable(id="processes")
        yield ChildOutput(id="output")
        yield Keys(compact=True)

    def on_mount(self) -> None:
        # Textual runs every class's own on_mount/on_unmount, a subclass's first: a subclass must not call these
        # again (a second call started a second refresh thread, and a frame more every 5 s)
        self._status = self.query_one("#status", TextLine)
        self._gpus = self.query_one(GpuLines)
        self._device = self.query_one(DevicePanel)
        self._panels = {p.slot: p for p in self.query(WorkloadPanel)}
        self._interference = self.query_one(InterferenceLine)
        self._output = self.query_one(ChildOutput)
        self._processes = self.query_one(ProcessTable)
        self.pump = RefreshPump(
            self.feed.model,
            self.feed.now,
            lambda view: self.post_message(Refresh(view)),
            self.refresh_hz,
            self.feed.gather,
        )
        self.pump.start()
        self.pump.poke()

    def on_unmount(self) -> None:
        if self.pump is not None:
            self.pump.stop()

    def on_refresh(self, message: Refresh) -> None:
        self.latest = message.view
        try:
            if self.is_current and not self.paused:
                self.draw(message.view)
        finally:
            if self.pump is not None:
                self.pump.drawn()

    def on_screen_resume(self) -> None:
        if self.latest is not None and not self.paused:
            self.draw(self.latest)
        if self.pump is not None:
            self.pump.poke()

    def draw(self, view: View) -> None:
        """Update every visible widget from ``view`` in one batch."""
        with self.app.batch_update():
            self._status.show(self.status_text(view))
            self._gpus.show(view.gpus, view.shown_gpu)
            self._device.show(view.device)
            for workload in view.workloads:
                self._panels[workload.slot].show(workload)
            self._interference.show_view(view, self.no_rates_hint())
            # a short terminal (80x24) has no room for both: the table takes the output's place
            small = self.size.height < SMALL_HEIGHT
            # nor for the GPU lines as well: the device panel loses its border (the ▸ line names its GPU) and
            # the rate graphs their scale row
            self.set_class(bool(view.gpus) and small, "-gpus-short")
            self._output.display = self.show_output and not (view.processes and small)
            self._processes.show(view.processes, SMALL_ROWS if small else MAX_ROWS)
            if self.show_output:
                self._output.show(view)
        self.frames += 1
        for text in view.new_notices(self._notices_seen):
            self.notify(text, severity="warning")
        self._notices_seen = view.notice_total
        if (
            bool(view.gpus) != self._several_gpus
        ):  # g (next GPU) is offered only where there is another GPU
            self._several_gpus = bool(view.gpus)
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide ``g`` (footer, help) on a box with one GPU."""
        return self._several_gpus if action == "next_gpu" else True

    def action_next_gpu(self) -> None:
        """Show the next GPU in the device panel (drawn with the next refresh)."""
        shown = self.feed.model.next_gpu()
        if shown is not None and self.pump is not None:
            self.pump.poke()

    def no_rates_hint(self) -> str:
        """What the interference line says while no job has an exclusive rate: how to get one here."""
        return NO_RATES

    def status_text(self, view: View) -> Text:
        """The top line; subclasses say what is being watched."""
        return self.others_mark(Text(f"gpumon  t {view.t:.1f} s"), view)

    def action_close(self) -> None:
        """Back to the screen it was opened from (the runs list); else end the app (a replay's, a viewer's: never a
        run)."""
        if len(self.app.screen_stack) > 2:
            self.dismiss()
        else:
            self.app.exit(0)

    def status_head(self, title: str, view: View, share: str, mps: bool) -> Text:
        """``TITLE  t … s  SHARE  `` and the other processes' mark: how the live and attached status lines begin."""
        text = Text(
            printable(title), style="bold"
        )  # a label from the run: its control characters escaped
        text.append(f"  t {view.t:7.1f} s  ", style="dim")
        text.append(
            f"{shown_share(share, view.jobs_device)}  ", style="bold cyan" if mps else "dim"
        )
        if view.others_on_gpu:  # before the run's path, which is shortened to what is left
            text.rstrip()
            self.others_mark(text, view).append("  ")
        return text

    def path_tail(self, text: Text, path: Path) -> Text:
        """`` ~/…/runs/NAME``, cut from the left to what is left of the line."""
        text.append(" " + short_path(path, max(10, self.size.width - len(text) - 8)))
        return text

    @staticmethod
    def others_mark(text: Text, view: View) -> Text:
        """``  ⚠ 1 other process on the GPU`` when something that is not our job uses it now."""
        if view.others_on_gpu:
            plural = "es" if view.others_on_gpu > 1 else ""
            text.append(
                f"  ⚠ {view.others_on_gpu} other process{plural} on the GPU", style="bold yellow"
            )
        return text

    def paused_suffix(self, text: Text) -> Text:
        if self.paused:
            text.append("  ⏸ PAUSED (p resumes)", style="bold reverse")
        return text

    def watch_paused(self, paused: bool) -> None:
        if not paused and self.latest is not None:
            self.draw(self.latest)
        elif self.latest is not None:
            self._status.show(self.status_text(self.latest))

    def watch_show_output(self, show: bool) -> None:
        self.query_one(ChildOutput).display = show
        self.set_class(not show, "-no-output")
        if show and self.latest is not None:
            self._output.show(self.latest)

    def action_toggle_output(self) -> None:
        self.show_output = not self.show_output

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused

    def action_sort_processes(self) -> None:
        column = self._processes.next_sort()
        self.notify(
            f"processes sorted by {column}" if column else "processes as listed: ours first"
        )

    def action_filter_processes(self) -> None:
        def apply(text: str | None) -> None:
            self._processes.set_filter(text or "")

        self.app.push_screen(FilterScreen(self._processes.text_filter), apply)

    def action_help(self) -> None:
        self.app.push_screen(
            HelpScreen(self.active_bindings_help(), GPU_MEANINGS if self._several_gpus else ())
        )

    def active_bindings_help(self) -> list[tuple[str, str]]:
        """(key, description) of every binding of this screen and the app, for the help screen."""
        keys: dict[str, list[str]] = {}
        for active in self.active_bindings.values():
            binding = active.binding
            text = binding.tooltip or binding.description
            if text:
                keys.setdefault(text, []).append(self.app.get_key_display(binding))
        return [(" ".join(shown), text) for text, shown in keys.items()]
