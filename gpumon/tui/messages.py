"""Messages from the refresh thread to the screens."""

from __future__ import annotations

from textual.message import Message

from gpumon.tui.view import View


class Refresh(Message):
    """A new view to draw; a newer one replaces one still queued (a refresh signal, not data)."""

    def __init__(self, view: View) -> None:
        super().__init__()
        self.view = view

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Refresh)
