"""SIGTERM, SIGINT and SIGHUP end gpumon within seconds, with the capture finalised, whatever the terminal does.

A front end's own way of stopping runs on its main thread (the headless loop, Textual's event
loop). That thread can be stuck writing to a terminal or pipe that stopped reading: Textual's
writer thread blocks on a full pty and the event loop then blocks on the writer's full queue;
a headless status line blocks in ``print``. So the handler here is a plain ``signal.signal``
handler (it runs on the main thread even while that thread waits in a blocking call), which
nudges the front end and starts one thread: if the front end has not finished ``grace_s`` later,
that thread finishes the capture itself (or waits for the shutdown under way) and, ``grace_s``
after that, ends the process with ``os._exit``.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 5.0


def unblock() -> None:
    """Let the stop signals in. A blocked signal mask is inherited through fork and exec, and some parents
    block them (a Ray worker blocks SIGINT): gpumon, and through it its workloads, would be deaf to them, and
    a stopped Ray cell would run on until killed. Call it first thing, before any thread or child starts."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


class StopGuard:
    """Install with ``install()``; the front end calls ``done()`` once it has finished on its own."""

    def __init__(
        self,
        nudge: Callable[[int], None],
        finish: Callable[[], int],
        grace_s: float = GRACE_S,
    ) -> None:
        """``nudge(signum)`` asks the front end to stop (must not block); ``finish()`` stops the
        children and finalises the capture, safely from any thread and more than once, and returns
        the exit status."""
        self.nudge = nudge
        self.finish = finish
        self.grace_s = grace_s
        self.signum: int | None = None
        self._done = threading.Event()
        self._previous: dict[int, object] = {}

    def install(self) -> "StopGuard":
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def done(self) -> None:
        """The front end finished (capture final, terminal restored): the last resort stands down."""
        self._done.set()

    def _on_signal(self, signum: int, frame: object) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
            threading.Thread(target=self._last_resort, name="gpumon-stop", daemon=True).start()
        self.nudge(signum)

    def _last_resort(self) -> None:
        """Leave the front end ``grace_s`` to finish on its own; then finish the capture here (or wait
        for the shutdown under way) and give it ``grace_s`` more before ending the process."""
        if self._done.wait(self.grace_s):
            return
        try:
            code = self.finish()
        except Exception:  # noqa: BLE001 - the front end reports its own failure; this thread only ends the process
            code = 1
        if not self._done.wait(self.grace_s):
            os._exit(code)
