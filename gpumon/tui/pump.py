"""The refresh thread: woken by the model, builds one view at most every 1/hz s, hands it to the UI.

A new view is only built after the UI said it drew the last one, so a slow UI
merges ticks instead of queueing them (memray's update thread).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from gpumon.tui.model import LiveModel
from gpumon.tui.view import View

log = logging.getLogger(__name__)

DEFAULT_HZ = 1.0
ACK_TIMEOUT_S = 5.0


class RefreshPump(threading.Thread):
    """Calls ``deliver(view)`` (thread-safe, e.g. ``post_message``) whenever the model changed.

    ``deliver`` returning False means the view was not queued (the screen is closing). ``gather``, when given, is
    called before each view is built (a live session's: read the probes now, so the frame shows every step flushed).
    """

    def __init__(
        self,
        model: LiveModel,
        now: Callable[[], float],
        deliver: Callable[[View], bool | None],
        hz: float = DEFAULT_HZ,
        gather: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(name="gpumon-refresh", daemon=True)
        if not hz > 0:
            raise ValueError(f"refresh rate must be positive, got {hz}")
        self.model = model
        self.now = now
        self.deliver = deliver
        self.gather = gather
        self.period_s = 1.0 / hz
        self._drawn = threading.Event()
        self._drawn.set()
        self._stop_event = threading.Event()

    def drawn(self) -> None:
        """The UI has drawn (or skipped) the last view; the next may come."""
        self._drawn.set()

    def poke(self) -> None:
        """Refresh soon even if no data arrived (a resize, a resumed screen)."""
        self.model.wake.set()

    def stop(self) -> None:
        self._stop_event.set()
        self.model.wake.set()
        self._drawn.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.model.wake.wait()
            if self._stop_event.is_set():
                return
            started = time.monotonic()
            try:
                if self.gather is not None:
                    self.gather()
                self.model.wake.clear()
                view = self.model.view(self.now())
            except Exception:
                log.exception("building a view failed")
                self._stop_event.wait(self.period_s)
                continue
            self._drawn.clear()
            if self.deliver(view) is False:
                self._drawn.set()
            # the period first: the UI has drawn long before it ends, so the draw's wait rarely sleeps (one wake-up a
            # frame fewer than waiting for the draw, then for the period: observer_cost)
            self._stop_event.wait(max(0.0, self.period_s - (time.monotonic() - started)))
            if not self._drawn.is_set() and not self._drawn.wait(ACK_TIMEOUT_S):
                log.debug("the UI did not draw a view within %.0f s", ACK_TIMEOUT_S)
