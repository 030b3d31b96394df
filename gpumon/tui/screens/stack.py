"""The stack dialog: a workload's Python stacks from ``py-spy dump``, or why they could not be read."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static

from gpumon.core.jobs.pyspy import StackDump, dump_stack


class StackScreen(ModalScreen[None]):
    """Opens at once with "reading…"; ``show_dump`` fills it in when py-spy is done."""

    BINDINGS = [Binding("escape,q,s,S", "close", "Close")]

    def __init__(self, slot: str, pid: int) -> None:
        super().__init__()
        self.slot = slot
        self.pid = pid
        self.dump: StackDump | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="stack-dialog", classes="dialog"):
            yield Label(f"Python stack of {self.slot} (pid {self.pid})", classes="dialog-title")
            with VerticalScroll():
                yield Static(
                    Text(f"running py-spy dump --pid {self.pid} …", style="italic"), id="stack-text"
                )
            yield Label("escape closes", classes="dialog-hint")

    def show_dump(self, dump: StackDump) -> None:
        self.dump = dump
        if not self.is_attached:
            return
        style = "" if dump.ok else "bold"
        self.query_one("#stack-text", Static).update(Text(dump.text, style=style))
        self.set_class(not dump.ok, "-error")

    def action_close(self) -> None:
        self.dismiss(None)


def open_stack(parent: Screen, slot: str, pid: int) -> StackScreen:
    """Open the dialog over ``parent`` at once and fill it in from ``py-spy dump`` on a worker thread."""
    dialog = StackScreen(slot, pid)
    parent.app.push_screen(dialog)

    def dump() -> None:
        result = dump_stack(slot, pid)
        parent.app.call_from_thread(dialog.show_dump, result)

    parent.run_worker(dump, thread=True, group="stack", exit_on_error=False)
    return dialog
