"""The runs screen: recorded runs (as ``gpumon runs``); open one as a replay, mark runs to compare."""

from __future__ import annotations

import math
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label

from gpumon.core.records.printable import printable
from gpumon.core.store.trace import RunSummary, TraceError, list_runs, summarize, load_live
from gpumon.core.records.units import DASH, fmt_rate
from gpumon.tui.pump import DEFAULT_HZ
from gpumon.core.store.runner import RUNNING
from gpumon.tui.screens.attached import AttachedScreen, open_follow
from gpumon.tui.screens.replay import ReplayScreen, open_replay

MARK = "●"
COLUMNS = (
    ("mark", " "),
    ("name", "run"),
    ("mode", "mode"),
    ("share", "share"),
    ("status", "status"),
    ("duration", "time"),
    ("rates", "iter/s"),
    ("workloads", "workloads"),
)


def summary_cells(summary: RunSummary) -> tuple[str, ...]:
    rates = (
        "  ".join(f"{k} {fmt_rate(v, '')}".rstrip() for k, v in sorted(summary.rates.items()))
        or "no steps"
    )
    duration = DASH if math.isnan(summary.duration_s) else f"{summary.duration_s:.0f}s"
    cells = (
        summary.name,
        summary.mode,
        summary.shown_share,
        summary.status,
        duration,
        rates,
        summary.workloads,
    )
    return tuple(printable(cell) for cell in cells)  # names, specs: text from the run directories


class RunsScreen(Screen):
    """Lists the runs directory; marks are kept by run name."""

    BINDINGS = [
        Binding("enter", "open", "Replay", priority=True),
        Binding("m,space", "mark", "Mark"),
        Binding("c", "compare", "Compare marked"),
        Binding("g", "reload", "Reload"),
        Binding("escape,q", "close", "Back"),
    ]

    def __init__(self, runs_dir: Path, refresh_hz: float = DEFAULT_HZ) -> None:
        super().__init__()
        self.runs_dir = runs_dir
        self.refresh_hz = refresh_hz
        self.marked: set[str] = set()
        self.summaries: dict[str, RunSummary] = {}

    def compose(self) -> ComposeResult:
        yield Label(f"Runs in {self.runs_dir}", id="runs-title", markup=False)
        table: DataTable = DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Label("loading…", id="runs-message", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="runs", exit_on_error=False)
    def _load(self) -> None:
        try:
            summaries = [summarize(run) for run in list_runs(self.runs_dir)]
            message = (
                ""
                if summaries
                else f"no runs in {self.runs_dir} yet (c on the monitor captures one)"
            )
        except TraceError as exc:
            summaries, message = [], str(exc)
        self.app.call_from_thread(self._show, summaries, message)

    def _show(self, summaries: list[RunSummary], message: str) -> None:
        if not self.is_attached:
            return
        table = self.query_one(DataTable)
        self.summaries = {s.name: s for s in summaries}
        current = set(str(key.value) for key in table.rows)
        for summary in summaries:
            cells = (MARK if summary.name in self.marked else "", *summary_cells(summary))
            if summary.name in current:
                for (key, _), value in zip(COLUMNS, cells):
                    table.update_cell(summary.name, key, value)
            else:
                table.add_row(*cells, key=summary.name)
        for gone in current - set(self.summaries):
            table.remove_row(gone)
        self.set_message(message or "enter replays · m marks · c compares the marked runs")
        table.focus()

    def set_message(self, text: str) -> None:
        self.query_one("#runs-message", Label).update(text)

    def _current(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_mark(self) -> None:
        name = self._current()
        if name is None:
            return
        self.marked.symmetric_difference_update({name})
        self.query_one(DataTable).update_cell(name, "mark", MARK if name in self.marked else "")
        self.set_message(f"{len(self.marked)} marked · c compares them")

    def action_open(self) -> None:
        """A finished run as a replay; one that its runner is still writing, followed live (as gpumon attach)."""
        name = self._current()
        if name is None:
            return
        path = self.runs_dir / name
        try:
            if load_live(path)[1] == RUNNING:
                self.app.push_screen(AttachedScreen(*open_follow(path), refresh_hz=self.refresh_hz))
                return
            source, feed = open_replay(path)
        except TraceError as exc:
            self.set_message(str(exc))
            return
        self.app.push_screen(ReplayScreen(source, feed, refresh_hz=self.refresh_hz))

    def action_compare(self) -> None:
        # deferred: +0.09 s CPU (numpy) on the monitor's first frame
        from gpumon.tui.screens.compare import CompareScreen

        if len(self.marked) < 2:
            self.set_message(
                "mark at least two runs (m): exclusive runs of each job and a shared run"
            )
            return
        self.app.push_screen(CompareScreen([self.runs_dir / name for name in sorted(self.marked)]))

    def action_close(self) -> None:
        self.dismiss()
