"""The replay screen: a recorded run played back in the monitor's panels."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding

from gpumon.core.records.bus import Bus
from gpumon.core.sources.replay import AS_FAST_AS_POSSIBLE, ReplaySource
from gpumon.tui.model import LiveModel
from gpumon.tui.pump import DEFAULT_HZ
from gpumon.tui.screens.monitor import VIEW_BINDINGS, Feed, MonitorScreen
from gpumon.tui.view import View

if TYPE_CHECKING:
    from gpumon.core.sources.follow import FollowSource

MAX_SPEED = 64.0


def replay_feed(source: "ReplaySource | FollowSource", model: LiveModel) -> Feed:
    """Subscribe ``model`` to the bus of a source of recorded data (a replay, a followed run) and give it what
    run.json knows."""
    source.bus.subscribe(model.handle, *LiveModel.TAKES)
    model.gpu = source.run.gpu
    for slot, spec in source.run.specs.items():
        if slot in ("A", "B"):
            model.set_spec(slot, spec)
    return Feed(model, source.now)


def open_replay(path: Path, speed: float = 1.0) -> tuple[ReplaySource, Feed]:
    """A replay of ``path`` on a fresh bus, with the model that shows it."""
    source = ReplaySource(path, Bus(), speed)
    return source, replay_feed(source, LiveModel())


class ReplayScreen(MonitorScreen, inherit_bindings=False):
    """Plays ``source`` (``play=False``: shows it as already seeked, for snapshots)."""

    BINDINGS = [
        Binding("f", "faster", "Faster", tooltip="play twice as fast (up to 64x)"),
        Binding("F", "slower", "Slower", tooltip="play half as fast (shift+f)"),
        Binding("end", "to_end", "To end", tooltip="play the rest at once"),
        *VIEW_BINDINGS,
        Binding("escape,q", "close", "Back", tooltip="back to the runs"),
    ]

    def __init__(
        self,
        source: ReplaySource,
        feed: Feed,
        *,
        play: bool = True,
        refresh_hz: float = DEFAULT_HZ,
        **kwargs,
    ) -> None:
        super().__init__(feed, refresh_hz, **kwargs)
        self.source = source
        self.play = play

    def on_mount(self) -> None:
        if self.play:
            self._start()

    def _start(self) -> None:
        self.run_worker(self._load_and_play, thread=True, group="replay", exit_on_error=False)

    def _load_and_play(self) -> None:
        self.source.load()
        self.source.seek(self.source.start_t)
        self.source.play()

    def on_unmount(self) -> None:
        self.source.stop()

    def no_rates_hint(self) -> str:
        """A replay takes no options: the run's slowdown, with exclusive runs, is compare's."""
        return "no exclusive phase: gpumon compare --exclusive RUN --shared <this run>"

    def status_text(self, view: View) -> Text:
        text = Text("replay ", style="bold")
        text.append(self.source.run.path.name)
        speed = "max" if self.source.speed == AS_FAST_AS_POSSIBLE else f"×{self.source.speed:g}"
        text.append(f"  t {view.t:.1f}/{self.source.end_t:.1f} s  {speed}", style="dim")
        if self.source.finished:
            text.append("  (end)", style="dim")
        return self.paused_suffix(self.others_mark(text, view))

    def action_faster(self) -> None:
        self.source.set_speed(min(MAX_SPEED, self.source.speed * 2))

    def action_slower(self) -> None:
        self.source.set_speed(max(0.25, self.source.speed / 2))

    def action_to_end(self) -> None:
        self.source.set_speed(AS_FAST_AS_POSSIBLE)
