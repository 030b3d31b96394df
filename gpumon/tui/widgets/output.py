"""The child output panel: the last lines of each workload's merged stdout/stderr."""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult

from gpumon.core.records.printable import printable
from gpumon.tui.view import View
from gpumon.tui.widgets.box import CachedBox, Row

# OSC (a title, a clipboard write: ESC ] ... BEL or ESC \\) whole, CSI, then any other two-character escape
ANSI = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(line: str) -> str:
    """What a terminal would leave of a line: the part after the last carriage return, no escapes; what is left
    that is not printable (C1 controls, bidirectional overrides) escaped."""
    line = line.rsplit("\r", 1)[-1]
    return printable(CONTROL.sub("", ANSI.sub("", line)).expandtabs(4))


class Tail(CachedBox):
    """The last lines that fit, cropped to the width; repaints only on change."""

    def __init__(self, slot: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.slot = slot
        self._lines: tuple[str, ...] = ()

    def on_mount(self) -> None:
        self.border_title = f"output {self.slot}"

    def show(self, lines: tuple[str, ...]) -> None:
        if lines != self._lines:
            self._lines = lines
            self.refresh()

    def render(self) -> Text:
        height = max(1, self.size.height)
        shown = self._lines[-height:] if self._lines else ("(no output yet)",)
        return Text("\n".join(clean(line) for line in shown), no_wrap=True, overflow="ellipsis")


class ChildOutput(Row):
    """Both slots side by side."""

    def compose(self) -> ComposeResult:
        yield Tail("A", id="tail-A")
        yield Tail("B", id="tail-B")

    def on_mount(self) -> None:
        self._tails = {tail.slot: tail for tail in self.query(Tail)}

    def show(self, view: View) -> None:
        for workload in view.workloads:
            self._tails[workload.slot].show(workload.log)
