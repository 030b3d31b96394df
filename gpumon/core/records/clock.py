"""The run's time base: seconds since t0 on CLOCK_MONOTONIC, shared by the monitor and its children."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone


@dataclass(frozen=True)
class RunClock:
    t0_ns: int
    started_at: str

    @classmethod
    def start(cls) -> "RunClock":
        t0 = time.monotonic_ns()
        wall = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return cls(t0, wall)

    def now(self) -> float:
        return (time.monotonic_ns() - self.t0_ns) / 1e9

    def at(self, monotonic_ns: int) -> float:
        """Run time of a ``time.monotonic_ns()`` stamp taken in any process on this host."""
        return (monotonic_ns - self.t0_ns) / 1e9
