"""The attached viewer: the live monitor's panels on a run its runner is writing (``gpumon attach``).

It owns nothing: the data comes from the run directory (``FollowSource``), quitting leaves the run
running, and the only way it acts on the run is ``x``, which asks first and then stops the runner as
``gpumon stop`` does.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.binding import Binding

from gpumon.core.records.bus import Bus
from gpumon.core.jobs.runnerstop import stop_runner
from gpumon.core.store.runner import INTERRUPTED
from gpumon.errors import UsageError
from gpumon.core.sources.follow import FollowSource
from gpumon.tui.controller import export_csv, load_baselines
from gpumon.tui.model import LiveModel
from gpumon.tui.pump import DEFAULT_HZ
from gpumon.tui.screens.monitor import STACK_BINDINGS, VIEW_BINDINGS, Feed, MonitorScreen
from gpumon.tui.screens.replay import replay_feed
from gpumon.tui.view import View
from gpumon.tui.screens.confirm import ConfirmScreen
from gpumon.tui.screens.stack import open_stack


def open_follow(path: Path) -> tuple[FollowSource, Feed]:
    """A follower of the run at ``path`` on a fresh bus, and the model that shows it (its specs and GPU known)."""
    source = FollowSource(path, Bus())
    return source, replay_feed(
        source, LiveModel(jobs_user=source.runner.user if source.runner is not None else None)
    )


class AttachedScreen(MonitorScreen, inherit_bindings=False):
    """Follows ``source`` until the run ends, then stays on the final picture."""

    BINDINGS = [
        Binding(
            "x",
            "stop_run",
            "Stop run",
            tooltip="stop the run (asks first): its jobs stop and the capture is "
            "finalised, as gpumon stop does",
        ),
        *STACK_BINDINGS,
        Binding(
            "e",
            "export",
            "CSV",
            tooltip="export the run as written so far as plain CSV into ./<run>-csv",
        ),
        *VIEW_BINDINGS,
        Binding(
            "q",
            "close",
            "Leave",
            tooltip="close this viewer; the run goes on (gpumon attach comes back)",
        ),
    ]

    def __init__(
        self,
        source: FollowSource,
        feed: Feed,
        refresh_hz: float = DEFAULT_HZ,
        baselines: tuple[tuple[str, str], ...] = (),
        any_user: bool = False,
        **kwargs,
    ) -> None:
        """``baselines``: this viewer's own ``--baseline`` runs (slot, run directory); each replaces the run's own of
        that slot, here only. ``any_user``: ``x`` may stop another user's runner (``gpumon attach --any-user``)."""
        super().__init__(feed, refresh_hz, **kwargs)
        self.source = source
        self.baselines = baselines
        self.any_user = any_user
        self.runner = source.runner
        self._said_end = False

    def on_mount(self) -> None:
        self.run_worker(self._load_and_follow, thread=True, group="follow", exit_on_error=False)
        self.set_interval(1.0, self._check_end)

    def _load_and_follow(self) -> None:
        baselines = {**self.source.run.meta.baselines, **dict(self.baselines)}
        load_baselines(
            self.feed.model, tuple(sorted(baselines.items())), self.source.run.meta.share.kind
        )
        self.source.poll()  # the history so far, at once
        self.source.start()

    def on_unmount(self) -> None:
        self.source.stop()

    def _check_end(self) -> None:
        if self.source.ended and not self._said_end:
            self._said_end = True
            self.notify(
                f"the run ended ({self.source.status}): this is its final picture; q quits",
                severity="error" if self.source.status == INTERRUPTED else "information",
                timeout=30,
            )
            if self.pump is not None:
                self.pump.poke()

    def no_rates_hint(self) -> str:
        return "no exclusive rates yet: gpumon attach --baseline A=RUN --baseline B=RUN"

    def status_text(self, view: View) -> Text:
        share = self.source.run.meta.share
        text = self.status_head("gpumon attach", view, share.describe(), share.mps)
        if self.source.ended:
            text.append(
                f"■ ended: {self.source.status}",
                style="bold red" if self.source.status == INTERRUPTED else "bold",
            )
        else:
            pid = f"runner pid {self.runner.pid} " if self.runner is not None else ""
            text.append(f"● {pid}", style="bold green")
        return self.paused_suffix(self.path_tail(text, self.source.run.path))

    # -- stop the run -------------------------------------------------------------

    def action_stop_run(self) -> None:
        if self.source.ended or self.runner is None:
            self.notify(f"the run is not running ({self.source.status})", severity="warning")
            return
        question = f"Stop the run {self.source.run.path.name}?"
        detail = "Its jobs stop and the capture is finalised, as gpumon stop does.\n(q would close this viewer and leave the run running.)"
        self.app.push_screen(ConfirmScreen(question, detail), self._confirmed)

    def _confirmed(self, yes: bool | None) -> None:
        if not yes or self.runner is None:
            return
        try:
            stopping = stop_runner(self.source.run.path, self.runner, self.any_user)
        except UsageError as exc:
            self.notify(str(exc), severity="error")
            return
        if stopping:
            self.notify("stopping the run: its jobs stop and the capture is finalised…", timeout=15)
        else:
            self.notify(f"the run is not running ({self.source.status})", severity="warning")

    # -- stack and export -----------------------------------------------------------

    def action_stack(self, slot: str) -> None:
        view = self.latest
        workload = (
            next((w for w in view.workloads if w.slot == slot), None) if view is not None else None
        )
        if workload is None or not workload.active or workload.pid is None:
            self.notify(f"nothing runs in slot {slot}", severity="warning")
            return
        open_stack(self, slot, workload.pid)

    def action_export(self) -> None:
        self._export()

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _export(self) -> None:
        out, files = export_csv(self.source.run)
        self.app.call_from_thread(self.notify, f"exported {len(files)} CSV files to {out}")
