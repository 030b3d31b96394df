"""Follows a running cell's ``steps.csv`` to tell when every job has been measured long enough."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpumon.core.records.model import STEP_COLUMNS
from gpumon.core.records.rates import overlap_window

PROCESS, T, WARMUP = (STEP_COLUMNS.index(c) for c in ("process", "t", "warmup"))


@dataclass
class StepsTail:
    """Reads only the new complete lines of a growing steps.csv; keeps each job's steady-state span."""

    path: Path
    offset: int = 0
    pending: bytes = b""
    header_seen: bool = False
    first: dict[str, float] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()
        for line in lines:
            if not self.header_seen:
                self.header_seen = True
                continue
            cells = line.decode("utf-8", "replace").split(",")
            if len(cells) != len(STEP_COLUMNS) or cells[WARMUP] != "0":
                continue
            try:
                t = float(cells[T])
            except ValueError:
                continue
            self.first.setdefault(cells[PROCESS], t)
            self.last[cells[PROCESS]] = t

    def started(self, slots: tuple[str, ...]) -> bool:
        """Every job in ``slots`` is past its warm-up."""
        return all(s in self.first for s in slots)

    def measured(self, slots: tuple[str, ...]) -> float:
        """Seconds in which all ``slots`` ran past warm-up together (0 before they all started)."""
        if not self.started(slots):
            return 0.0
        window = overlap_window([self.first[s] for s in slots], [self.last[s] for s in slots])
        return window[1] - window[0] if window is not None else 0.0
