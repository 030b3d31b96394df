"""The process table's filter (``/``, as in nvitop): a line of text that rows must contain; Enter keeps it, an empty
line or escape shows every row again."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class FilterScreen(ModalScreen[str]):
    """Dismissed with the text typed (Enter), or "" (escape): no filter."""

    BINDINGS = [Binding("escape", "clear", "No filter")]

    def __init__(self, current: str = "") -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-dialog", classes="dialog"):
            yield Label(
                "Show the processes whose PID, user or command contains:", classes="dialog-title"
            )
            yield Input(self.current, placeholder="e.g. python, alice, 4242", id="filter-text")
            yield Label("enter: filter   esc: every process", classes="dialog-hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_clear(self) -> None:
        self.dismiss("")
