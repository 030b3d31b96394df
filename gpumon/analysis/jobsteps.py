"""Each job's steps as compare reads them (issue 41): a run's steps a row group at a time, only the columns needed,
never the whole table (``core/store/stepchunks.py``).

One pass over a run gives each job its post-warm-up cumulative-steps curve (16 bytes a step: what every rate and
interval is read off), when it ran and how many rows it has, and, a byte a step, which of its steps timed a copy.
A copy metric's samples inside windows are chosen from those bytes before any is read (at most ``cap`` a side,
evenly spaced in time order); their values are read in a second pass, from the row groups that hold them alone,
and only where a chosen step copied something.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from gpumon.analysis import distributions as dist
from gpumon.analysis.rates import Curve, Window
from gpumon.core.store import tablecheck
from gpumon.core.store.stepchunks import StepChunk, scan, step_chunks
from gpumon.core.store.trace import Run

TRACK_COLUMNS = ("t", "step", "warmup", "iter_s", "copy_bytes", "copy_s")
COPY_COLUMNS = ("copy_bytes", "copy_s", "iter_s")
# a post-warm-up step's flags: it timed a copy (copy_bytes and copy_s > 0); it took time (iter_s > 0); it copied
TIMED_COPY, WALL, COPIED = 1, 2, 4
BLOCK = 1 << 20  # steps scanned at once when choosing samples


@dataclass(frozen=True, eq=False)
class JobSteps:
    """One job of a run: its rows, when it ran (its first step's start, its last step's end), and its post-warm-up
    steps sorted by time (stable), with their flags and, where sorting moved them, their order in the file."""

    rows: int
    span: tuple[float, float]
    t: np.ndarray
    n: np.ndarray
    flags: np.ndarray
    order: np.ndarray | None
    groups: dict[
        int, tuple[int, int]
    ]  # row group: (its first post-warm-up step in file order, how many)

    def curve(self) -> Curve | None:
        """The cumulative-steps curve (None with fewer than two steps)."""
        return Curve(self.t, self.n) if len(self.t) >= 2 else None

    def positions(self, window: Window) -> tuple[int, int]:
        """The steps inside ``window``: positions ``[first, end)`` in time order."""
        return (
            int(np.searchsorted(self.t, window.start, side="left")),
            int(np.searchsorted(self.t, window.end, side="right")),
        )


@dataclass
class _Builder:
    """A job's steps as the chunks come, written into arrays as long as the table (no job has more rows; the pages
    past its last step are never touched, so they take no memory)."""

    size: int
    rows: int = 0
    first: float = math.inf
    last: float = -math.inf
    count: int = 0
    held: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    groups: dict[int, tuple[int, int]] = field(default_factory=dict)

    def add(self, group: int, mine: np.ndarray, rows: "_Rows") -> None:
        self.rows += int(np.count_nonzero(mine))
        # the rows' positions, found once: gathering by them is many times faster than a mask per column
        timed = np.flatnonzero(mine & rows.timed)
        if len(timed):
            self.first = min(self.first, float(rows.starts.take(timed).min()))
            self.last = max(self.last, float(rows.t.take(timed).max()))
        keep = mine & rows.post  # of the timed rows: the same rows where none of them is warm-up
        at = timed if np.count_nonzero(keep) == len(timed) else np.flatnonzero(keep)
        count = len(at)
        if not count:
            return
        if self.held is None:
            self.held = (np.empty(self.size), np.empty(self.size), np.empty(self.size, np.uint8))
        into = slice(self.count, self.count + count)
        for source, out in zip((rows.t, rows.n, rows.flags), self.held):
            # mode clip: written straight into ``out`` (raise buffers it), and every index is in range
            np.take(source, at, out=out[into], mode="clip")
        self.groups[group] = (self.count, count)
        self.count += count

    def done(self) -> JobSteps:
        t, n, flags = (
            (a[: self.count] for a in self.held)
            if self.held is not None
            else (np.array([]), np.array([]), np.array([], np.uint8))
        )
        order = None
        if len(t) > 1 and bool(np.any(t[1:] < t[:-1])):
            order = np.argsort(
                t, kind="stable"
            )  # rows out of time order: as a stable sort leaves them
            t, n, flags = t[order], n[order], flags[order]
        return JobSteps(self.rows, (self.first, self.last), t, n, flags, order, self.groups)


@dataclass(frozen=True)
class _Rows:
    """A chunk's rows as compare sees them: timed (a time and a step number), post-warm-up, flagged."""

    t: np.ndarray
    n: np.ndarray
    timed: np.ndarray
    post: np.ndarray
    starts: np.ndarray
    flags: np.ndarray


def _rows(chunk: StepChunk) -> _Rows:
    t, n, warmup, iter_s, copy_bytes, copy_s = (chunk.columns[c] for c in TRACK_COLUMNS)
    timed = ~np.isnan(t) & ~np.isnan(n)
    # post-warm-up: a warm-up flag that truncates to 0 (or none); the flags as bytes, the copy bits only where a
    # step copied something
    post = timed & ~(np.abs(warmup) >= 1)
    flags = (iter_s > 0).view(np.uint8) * np.uint8(WALL)
    copied = copy_bytes > 0
    if copied.any():
        flags |= copied.view(np.uint8) * np.uint8(COPIED)
        flags |= (copied & (copy_s > 0)).view(np.uint8) * np.uint8(TIMED_COPY)
    starts = t - np.where(np.isnan(iter_s), 0, iter_s)
    return _Rows(t, n, timed, post, starts, flags)


def read_jobs(run: Run) -> dict[str, JobSteps]:
    """Each job of the run with rows in its steps, from one pass over them."""
    builders: dict[str, _Builder] = {}
    for chunk in scan(
        run, TRACK_COLUMNS
    ):  # and the evidence's sums by row group, from the same pass
        rows = _rows(chunk)
        for name in chunk.names:
            if not tablecheck.is_job(name):
                continue  # a row naming no slot is no job's step (core/store/tablecheck.py)
            mine = chunk.rows_of(name)
            if mine.any():
                builders.setdefault(name, _Builder(chunk.table_rows)).add(chunk.group, mine, rows)
    return {name: b.done() for name, b in builders.items()}


def jobs_of(run: Run) -> dict[str, JobSteps]:
    """``read_jobs(run)``, kept on the run while its steps.csv is unchanged (compare and its report read them once)."""
    return run.cached("jobsteps", run.path / "steps.csv", lambda: read_jobs(run))


@dataclass(frozen=True)
class Part:
    """One window of one job of a run: where a condition's samples come from."""

    run: Run
    slot: str
    steps: JobSteps
    window: Window


@dataclass(frozen=True)
class Picked:
    """One side's chosen steps of a metric: per part their positions in time order, and how many there were."""

    total: int
    positions: list[np.ndarray]

    def copied(self, parts: Sequence[Part]) -> bool:
        """Whether a chosen step copied something."""
        return any(bool(np.any(p.steps.flags[at] & COPIED)) for p, at in zip(parts, self.positions))


def pick(parts: Sequence[Part], bit: int, cap: int, locate: bool = True) -> Picked:
    """The steps flagged ``bit`` inside each part's window: all, or ``cap`` of them evenly spaced over the parts
    (``locate=False``: only how many, as where no step of either side so flagged copied anything)."""
    counts = []
    for p in parts:
        first, end = p.steps.positions(p.window)
        counts.append(int(np.count_nonzero(p.steps.flags[first:end] & bit)))
    total = sum(counts)
    if not locate:
        return Picked(total, [np.array([], dtype=np.intp) for _ in parts])
    chosen = np.arange(total) if total <= cap else np.linspace(0, total - 1, cap).astype(np.intp)
    out, offset = [], 0
    for p, count in zip(parts, counts):
        lo, hi = np.searchsorted(chosen, [offset, offset + count])
        out.append(_nth_flagged(p, bit, chosen[lo:hi] - offset))
        offset += count
    return Picked(total, out)


def _nth_flagged(part: Part, bit: int, ranks: np.ndarray) -> np.ndarray:
    """The positions of the ``ranks``-th (sorted) steps flagged ``bit`` inside the part's window, a block at a time."""
    first, end = part.steps.positions(part.window)
    out, seen = [], 0
    for start in range(first, end, BLOCK):
        if not len(ranks):
            break
        at = start + np.flatnonzero(part.steps.flags[start : min(end, start + BLOCK)] & bit)
        lo, hi = np.searchsorted(ranks, [seen, seen + len(at)])
        out.append(at[ranks[lo:hi] - seen])
        ranks, seen = ranks[hi:], seen + len(at)
    return np.concatenate(out) if out else np.array([], dtype=np.intp)


def read_picked(parts: Sequence[Part], picks: Sequence[Picked]) -> list[dict[str, np.ndarray]]:
    """Each pick's steps' ``COPY_COLUMNS``, pooled over the parts in order; each part's row groups read once."""
    pooled: list[dict[str, list[np.ndarray]]] = [{c: [] for c in COPY_COLUMNS} for _ in picks]
    if not picks:
        return []
    for k, part in enumerate(parts):
        union = np.unique(np.concatenate([p.positions[k] for p in picks]))
        raw = _read_at(part, union)
        for p, out in zip(picks, pooled):
            at = np.searchsorted(union, p.positions[k])
            for c in COPY_COLUMNS:
                out[c].append(raw[c][at])
    return [{c: np.concatenate(v) if v else np.array([]) for c, v in out.items()} for out in pooled]


def _read_at(part: Part, positions: np.ndarray) -> dict[str, np.ndarray]:
    """``COPY_COLUMNS`` of the job's post-warm-up steps at ``positions`` (time order, sorted), from the row groups
    that hold them."""
    steps = part.steps
    out = {c: np.full(len(positions), np.nan) for c in COPY_COLUMNS}
    if not len(positions):
        return out
    index = steps.order[positions] if steps.order is not None else positions  # in file order
    sort = np.argsort(index, kind="stable")
    wanted = index[sort]
    groups = [
        g
        for g, (first, count) in steps.groups.items()
        if np.searchsorted(wanted, first) < np.searchsorted(wanted, first + count)
    ]
    for chunk in step_chunks(part.run, TRACK_COLUMNS, groups=groups):
        first, _ = steps.groups.get(chunk.group, (0, 0))
        rows = np.flatnonzero(chunk.rows_of(part.slot) & _rows(chunk).post)
        lo, hi = np.searchsorted(wanted, [first, first + len(rows)])
        at = rows[wanted[lo:hi] - first]
        for c in COPY_COLUMNS:
            out[c][sort[lo:hi]] = chunk.columns[c][at]
    return out


def _bandwidth(raw: dict[str, np.ndarray]) -> np.ndarray:
    """Per-copy bandwidth: bytes over the copy's own time."""
    return raw["copy_bytes"] / raw["copy_s"]


def _wall(raw: dict[str, np.ndarray]) -> np.ndarray:
    """Copy bytes per second of wall time (a step without copy bytes: none)."""
    return np.where(np.isnan(raw["copy_bytes"]), 0.0, raw["copy_bytes"]) / raw["iter_s"]


# each copy metric: which steps have one, and its value
COPY_METRICS: dict[str, tuple[int, Callable[[dict[str, np.ndarray]], np.ndarray]]] = {
    dist.COPY_BANDWIDTH.key: (TIMED_COPY, _bandwidth),
    dist.COPY_RATE.key: (WALL, _wall),
}


@dataclass(frozen=True)
class CopySamples:
    """A copy metric's samples of both sides (None: no chosen step copied anything, so it is not compared), and the
    most steps a side had before the cap."""

    exclusive: np.ndarray | None
    shared: np.ndarray | None
    total: int


def _copying(parts: Sequence[Part], bit: int) -> bool:
    """Whether a step flagged ``bit`` inside a part's window copied something."""
    both = bit | COPIED
    for p in parts:
        first, end = p.steps.positions(p.window)
        if np.any((p.steps.flags[first:end] & both) == both):
            return True
    return False


def copy_samples(
    exclusive: Sequence[Part], shared: Sequence[Part], cap: int
) -> dict[str, CopySamples]:
    """Each copy metric's samples inside the parts' windows, at most ``cap`` a side."""
    picks = {}
    for key, (bit, _) in COPY_METRICS.items():
        locate = _copying(exclusive, bit) or _copying(shared, bit)
        picks[key] = (pick(exclusive, bit, cap, locate), pick(shared, bit, cap, locate))
    kept = [key for key, (x, s) in picks.items() if x.copied(exclusive) or s.copied(shared)]
    x_raw = read_picked(exclusive, [picks[k][0] for k in kept])
    s_raw = read_picked(shared, [picks[k][1] for k in kept])
    out = {}
    for key, (x, s) in picks.items():
        total = max(x.total, s.total)
        if key in kept:
            value = COPY_METRICS[key][1]
            i = kept.index(key)
            out[key] = CopySamples(value(x_raw[i]), value(s_raw[i]), total)
        else:
            out[key] = CopySamples(None, None, total)
    return out
