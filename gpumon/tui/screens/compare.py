"""The compare screen: the analysis of the runs marked on the runs screen, as text tables."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, Static

from gpumon.errors import UsageError


class CompareScreen(Screen):
    """Runs ``gpumon.analysis`` on a worker thread (it imports pandas, and scipy when installed) and shows its tables."""

    BINDINGS = [Binding("escape,q", "close", "Back")]

    def __init__(self, paths: list[Path]) -> None:
        super().__init__()
        self.paths = paths
        self.lines: list[str] = []

    def compose(self) -> ComposeResult:
        yield Label(f"Compare {len(self.paths)} runs: " + ", ".join(p.name for p in self.paths), markup=False)
        with VerticalScroll():
            yield Static(Text("analysing…", style="italic"), id="compare-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._analyse()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _analyse(self) -> None:
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
        self.query_one("#compare-text", Static).update(Text("\n".join(lines), no_wrap=True))

    def action_close(self) -> None:
        self.dismiss()
