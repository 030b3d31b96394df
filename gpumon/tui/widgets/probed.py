"""One line under the workloads: this user's probed processes gpumon did not start, with their live rate."""

from __future__ import annotations

from typing import Callable

from rich.text import Text

from gpumon.core.capture.probescan import Probed, ProbeScanner
from gpumon.core.records.units import fmt_rate
from gpumon.tui.widgets.lines import TextLine


def probed_text(found: list[Probed]) -> Text:
    """``probed, not ours: 4242 python train.py 12.5 it/s  ·  w watches one as B``."""
    text = Text("probed, not ours: ", style="dim")
    for p in found:
        text.append(f"{p.pid} ", style="bold")
        text.append(f"{p.command[:40]} ")
        text.append(f"{fmt_rate(p.iter_per_s)}  ", style="cyan")
    text.append("·  w watches one as B", style="dim")
    return text


class ProbedLine(TextLine):
    """Shown only while there are probed processes and slot B is free (``b_free``); brought up to date with each frame
    (``update_line``), not by a timer of its own that would wake the UI thread once more a second."""

    def __init__(self, scanner: ProbeScanner, b_free: Callable[[], bool], **kwargs) -> None:
        super().__init__(**kwargs)
        self.scanner = scanner
        self.b_free = b_free

    def on_mount(self) -> None:
        self.display = False

    def update_line(self) -> None:
        found = self.scanner.processes() if self.b_free() else []
        self.display = bool(found)
        if found:
            self.show(probed_text(found))
