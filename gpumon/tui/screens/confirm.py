"""A yes/no question before something that cannot be undone (stopping a detached run)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label


class ConfirmScreen(ModalScreen[bool]):
    """Dismissed with True on y, False on n, escape or q."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape,q", "answer(False)", "No"),
    ]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog", classes="dialog"):
            yield Label(self.question, classes="dialog-title")
            if self.detail:
                yield Label(self.detail)
            yield Label("y: yes   n / esc: no", classes="dialog-hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
