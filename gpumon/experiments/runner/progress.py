"""A progress bar with an ETA on stderr: redrawn in place on a terminal, one line per cell otherwise."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from gpumon.console.color import use_color

BAR_WIDTH = 24
DEFAULT_EXTRA_S = 8.0
COLORS = {"ok": "32", "failed": "31", "interrupted": "33", "skipped": "33"}


def clock(seconds: float) -> str:
    """``1:05`` or ``1:02:03``."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class Progress:
    """Cells done out of ``total``; the ETA is the remaining measured seconds plus the mean extra per cell.

    ``extra`` is what a cell takes beyond its measured seconds (start-up, warm-up, shutdown), learnt
    from the cells finished so far.
    """

    total: int
    remaining_s: float
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    extras: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    cell: str = ""
    cell_started: float = 0.0
    cell_planned: float = 0.0

    def __post_init__(self) -> None:
        self.tty = self.stream.isatty()
        self.color = use_color(self.stream)

    @property
    def extra(self) -> float:
        return sum(self.extras) / len(self.extras) if self.extras else DEFAULT_EXTRA_S

    def eta(self) -> float:
        running = time.monotonic() - self.cell_started if self.cell else 0.0
        current = max(0.0, self.cell_planned + self.extra - running) if self.cell else 0.0
        later = self.remaining_s + self.extra * max(
            0, self.total - self.done - (1 if self.cell else 0)
        )
        return current + later

    def start(self, cell: str, measured_s: float) -> None:
        self.cell, self.cell_started, self.cell_planned = cell, time.monotonic(), measured_s
        self.remaining_s -= measured_s
        if self.tty:
            self.tick()
        else:
            self._line(f"[{self.done + 1}/{self.total}] {cell}: running (ETA {clock(self.eta())})")

    def finish(self, status: str, elapsed: float | None, detail: str = "") -> None:
        """End the current cell; ``elapsed`` None for a cell that did not run (reused or skipped)."""
        if elapsed is not None and status == "ok":
            self.extras.append(max(0.0, elapsed - self.cell_planned))
        self.done += 1
        took = f" in {clock(elapsed)}" if elapsed is not None else ""
        shown = (
            f"\x1b[{COLORS[status]}m{status}\x1b[0m" if self.color and status in COLORS else status
        )
        cell, self.cell = self.cell, ""
        self._line(
            f"[{self.done}/{self.total}] {cell}: {shown}{took}{': ' + detail if detail else ''}"
        )

    def skip(self, cell: str, measured_s: float, status: str, detail: str) -> None:
        """A cell that is not run now (already done, or impossible here)."""
        self.record(cell, measured_s, status, None, detail)

    def record(
        self, cell: str, measured_s: float, status: str, elapsed: float | None, detail: str
    ) -> None:
        """A cell that ran elsewhere (on a Ray worker) or not at all: one line, counted as done."""
        self.cell, self.cell_planned = cell, measured_s
        self.remaining_s -= measured_s
        self.finish(status, elapsed, detail)

    def tick(self) -> None:
        """Redraw the bar (terminal only)."""
        if not self.tty:
            return
        filled = int(BAR_WIDTH * self.done / max(1, self.total))
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        running = (
            f"  {self.cell} {clock(time.monotonic() - self.cell_started)}" if self.cell else ""
        )
        text = (
            f"[{bar}] {self.done}/{self.total}{running}  elapsed {clock(time.monotonic() - self.started)}"
            f"  ETA {clock(self.eta())}"
        )
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        """Take the bar off the terminal line."""
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(f"gpumon: {text}\n")
        if self.tty:
            self.tick()
        self.stream.flush()
