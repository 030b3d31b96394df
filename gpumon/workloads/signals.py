"""SIGTERM/SIGINT handling: the first one asks the loop to stop after the current step."""

from __future__ import annotations

import os
import signal
from types import FrameType


class StopRequest:
    """Records the first stop signal; a second one gets the signal's default action (terminate)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signal: int | None = None

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def install(self) -> None:
        for signum in self.SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal is not None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signal = signum
