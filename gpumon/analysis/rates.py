"""Cumulative-steps curves from steps.csv (pandas/numpy), for the rates defined in ``gpumon.core.records.rates``.

A job's progress is its cumulative step count against time. Rates are read off
that curve by linear interpolation at the edges of a window, so a window need
not start or end on one of the job's steps; the rate itself is always
``gpumon.core.records.rates.slope`` (vectorised here only for the bootstrap bins).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpumon.core.records import rates as defs

if TYPE_CHECKING:
    import pandas as pd

    from gpumon.core.store.trace import Run

MIN_SEGMENT_STEPS = 3


@dataclass(frozen=True)
class Window:
    """A time interval ``[start, end]`` in seconds since the run's t0."""

    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, eq=False)
class Curve:
    """A job's post-warm-up step ends ``t`` and their step numbers ``n`` (sorted by time)."""

    t: np.ndarray
    n: np.ndarray

    def __len__(self) -> int:
        return len(self.t)

    @property
    def first_t(self) -> float:
        return float(self.t[0])

    @property
    def last_t(self) -> float:
        return float(self.t[-1])

    def at(self, t: float | np.ndarray) -> float | np.ndarray:
        """The cumulative step count at time(s) ``t``, linearly interpolated between steps."""
        return np.interp(t, self.t, self.n)

    def rate(self, window: Window) -> float:
        """Iterations/s inside ``window``: the slope between the curve's interpolated points at its edges."""
        start = defs.Point(window.start, float(self.at(window.start)))
        return defs.slope(start, defs.Point(window.end, float(self.at(window.end))))

    def steps_in(self, window: Window) -> int:
        """Whole steps completed inside ``window`` (0 for an empty or inverted one)."""
        return max(0, math.floor(float(self.at(window.end) - self.at(window.start)) + 1e-9))

    def span(self) -> Window:
        """From the first to the last post-warm-up step (an exclusive run's window)."""
        return Window(self.first_t, self.last_t)


def job_steps(run: "Run", slot: str) -> "pd.DataFrame":
    """One job's rows with a valid time and step number, sorted by time (from the run's split by job)."""
    return timed(run.job_steps(slot))


def timed(rows: "pd.DataFrame") -> "pd.DataFrame":
    """One job's ``rows`` with a valid time and step number, sorted by time (``rows`` itself when they already are)."""
    rows = where(rows, rows["t"].notna() & rows["step"].notna())
    return rows if rows["t"].is_monotonic_increasing else rows.sort_values("t", kind="stable")


def without_warmup(rows: "pd.DataFrame") -> "pd.DataFrame":
    """``rows`` without the warm-up steps."""
    return where(rows, rows["warmup"].fillna(0).astype(int) == 0)


def where(rows: "pd.DataFrame", keep: "pd.Series") -> "pd.DataFrame":
    """``rows[keep]``, as a slice (no copy) when the kept rows are consecutive, as warm-up steps leave them."""
    at = np.flatnonzero(keep.to_numpy(dtype=bool))
    if len(at) == len(rows):
        return rows
    if len(at) and at[-1] - at[0] + 1 == len(at):
        return rows.iloc[at[0] : at[-1] + 1]
    return rows[keep]


def post_warmup(run: "Run", slot: str) -> "pd.DataFrame":
    """One job's steps without its warm-up steps."""
    return without_warmup(job_steps(run, slot))


def inside(rows: "pd.DataFrame", window: Window) -> "pd.DataFrame":
    """The rows of ``timed`` steps whose time is inside ``window`` (a slice: they are sorted by time)."""
    t = rows["t"]
    return rows.iloc[
        int(t.searchsorted(window.start, side="left")) : int(
            t.searchsorted(window.end, side="right")
        )
    ]


def curve(run: "Run", slot: str) -> Curve | None:
    """The post-warm-up cumulative-steps curve of one job (None with fewer than two steps)."""
    return curve_of(post_warmup(run, slot))


def curve_of(rows: "pd.DataFrame") -> Curve | None:
    """The cumulative-steps curve of one job's post-warm-up steps (None with fewer than two)."""
    if len(rows) < 2:
        return None
    return Curve(rows["t"].to_numpy(dtype=float), rows["step"].to_numpy(dtype=float))


def overlap(a: Curve, b: Curve) -> Window | None:
    """The pair's ``gpumon.core.records.rates.overlap_window`` (None if they never ran together after warm-up)."""
    window = defs.overlap_window((a.first_t, b.first_t), (a.last_t, b.last_t))
    return Window(*window) if window is not None else None


def solo_windows(job: Curve, other_start: float, other_end: float) -> list[Window]:
    """Where ``job`` ran alone: before the other process started and after it stopped."""
    windows = []
    head = Window(job.first_t, min(other_start, job.last_t))
    if job.steps_in(head) >= MIN_SEGMENT_STEPS:
        windows.append(head)
    tail = Window(max(other_end, job.first_t), job.last_t)
    if job.steps_in(tail) >= MIN_SEGMENT_STEPS:
        windows.append(tail)
    return windows


def rate_over_time(c: Curve, window: Window, bins: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Iterations/s in ``bins`` equal slices of ``window``: (slice mid-times from the window start, rates)."""
    edges = np.linspace(window.start, window.end, bins + 1)
    counts = np.diff(c.at(edges))
    width = window.duration / bins
    return (edges[:-1] + width / 2) - window.start, counts / width


@dataclass(frozen=True)
class Segment:
    """Where a rate was measured: a run, the job's slot in that run, the role and the window."""

    run: str
    slot: str
    role: str
    start: float
    end: float
    steps: int

    @property
    def window(self) -> Window:
        return Window(self.start, self.end)

    @property
    def name(self) -> str:
        return Path(self.run).name

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "slot": self.slot,
            "role": self.role,
            "start": self.start,
            "end": self.end,
            "duration": self.end - self.start,
            "steps": self.steps,
        }
