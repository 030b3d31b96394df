"""The compare screen: the analysis of the runs marked on the runs screen, as text tables.

Prose is wrapped to the screen's width; a table is never wrapped (its columns would fall apart): a table wider
than the screen scrolls sideways."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import Footer, Label, Static

from gpumon.core.records.printable import printable
from gpumon.analysis.text import TableLine
from gpumon.errors import UsageError


class CompareScreen(Screen):
    """Runs ``gpumon.analysis`` on a worker thread (it imports pandas, and scipy when installed) and shows its tables."""

    BINDINGS = [Binding("escape,q", "close", "Back")]

    def __init__(self, paths: list[Path]) -> None:
        super().__init__()
        self.paths = paths
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        yield Label(
            printable(f"Compare {len(self.paths)} runs: " + ", ".join(p.name for p in self.paths)),
            markup=False,
        )
        with ScrollableContainer(id="compare-scroll"):
            yield Static(Text("analysing…", style="italic"), id="compare-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._analyse()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _analyse(self) -> None:
        # deferred: +0.09 s CPU (numpy; pandas when it runs) on the monitor's first frame
        from gpumon.analysis.compare import compare_paths
        from gpumon.analysis.text import render_tables

        try:
            comparison, _ = compare_paths(self.paths)
            lines = render_tables(comparison)
        except UsageError as exc:
            lines = [f"cannot compare these runs: {exc}"]
        self.app.call_from_thread(self._show, lines)

    def _show(self, lines: list[str]) -> None:
        if not self.is_attached:
            return
        self.lines = lines
        self._draw()

    def on_resize(self) -> None:
        if self.lines:
            self._draw()

    def _draw(self) -> None:
        """Prose wrapped to the width (continuations indented as their line), tables as they are."""
        width = max(20, self.size.width - 2)
        shown = []
        for line in self.lines:
            if isinstance(line, TableLine) or len(line) <= width:
                shown.append(line)
                continue
            indent = " " * (len(line) - len(line.lstrip()) + 2)
            shown += textwrap.wrap(
                line, width, subsequent_indent=indent, break_on_hyphens=False
            ) or [""]
        self.query_one("#compare-text", Static).update(
            Text("\n".join(shown), no_wrap=True, overflow="ignore")
        )

    def action_close(self) -> None:
        self.dismiss()
