"""A real Listener reading one probe pipe, fed bytes by the test: the steps it published, once the pipe closed."""

from __future__ import annotations

import os
import queue

from gpumon.core.probing.listener import Listener
from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.records.model import StepBatch, StepEvent


class PipedListener:
    """A started Listener watching a fresh pipe as job A's probe (``since_ns``: the child's launch, when given)."""

    def __init__(self, since_ns: int | None = None) -> None:
        bus, self.clock = Bus(), RunClock.start()
        self._steps: queue.SimpleQueue[StepBatch] = queue.SimpleQueue()
        bus.subscribe(self._steps.put, StepBatch)
        self.listener = Listener(bus, self.clock)
        self.listener.start()
        read, self._write = os.pipe()
        extra = {} if since_ns is None else {"since_ns": since_ns}
        self._closed = self.listener.watch(read, "A", "probe", **extra)

    def feed(self, data: bytes) -> list[StepEvent]:
        """Write ``data``, close the pipe, stop the listener: every step it published."""
        with os.fdopen(self._write, "wb") as f:
            f.write(data)
        assert self._closed.wait(30)
        self.listener.stop()
        self.listener.join(30)
        got = []
        while not self._steps.empty():
            got.extend(self._steps.get().steps)
        return got
