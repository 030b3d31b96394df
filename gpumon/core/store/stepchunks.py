"""A run's steps a chunk at a time, only the columns asked for (issue 41).

From the steps' columnar copy (``core/store/columnar.py``) a row group at a time, only the row groups asked for
(by number, or those whose times meet some windows: each row group's ``t`` statistics say when it starts and
ends); without a copy (the base install, a run still recording, a table the copy does not type) the table as one
chunk (``Run.step_columns``). Each chunk holds each row's job, as a code into its job names (-1: none), and the
wanted columns as float64 with the values out of their bounds NaN (``tablecheck.BOUNDS``, as ``checked_steps`` makes
them in a parsed table), so a copy and steps.csv read the same. Memory: one row group, never the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Sequence

from gpumon.core.store import tablecheck
from gpumon.core.store.trace import Run, TraceError, _numpy

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

Span = tuple[float, float]


@dataclass(frozen=True)
class StepChunk:
    """Consecutive rows of a run's steps: the row group they are (0 for a whole table), each row's job, the columns,
    and how many rows the whole table has."""

    group: int
    codes: "np.ndarray"
    names: list[str]
    columns: "dict[str, np.ndarray]"
    table_rows: int
    masks: "dict[str, np.ndarray]" = field(default_factory=dict, repr=False, compare=False)

    def rows_of(self, slot: str) -> "np.ndarray":
        """Which rows are ``slot``'s (a boolean mask, made once: every reader of the chunk shares it)."""
        import numpy as np

        if slot not in self.masks:
            self.masks[slot] = (
                self.codes == self.names.index(slot)
                if slot in self.names
                else np.zeros(len(self.codes), dtype=bool)
            )
        return self.masks[slot]


def step_chunks(
    run: Run,
    wanted: Sequence[str],
    within: Sequence[Span] | None = None,
    groups: Sequence[int] | None = None,
    make: bool = True,
) -> Iterator[StepChunk]:
    """``wanted`` columns of ``run``'s steps, a row group at a time in file order: only the row groups that meet one
    of the time spans ``within`` and are among ``groups`` (None: no limit). ``make``: as ``Run.columnar_file``'s (a
    finished run without a copy gets one in the user's cache); no copy: the whole table, as one chunk."""
    copy = run.columnar_file(make)
    if copy is None:
        if groups is None or 0 in groups:
            yield _whole(run, wanted, make)
        return
    chosen = set(groups) if groups is not None else None
    for i, span in enumerate(group_spans(copy)):
        if chosen is not None and i not in chosen:
            continue
        if within is not None and not any(span[0] <= e and s <= span[1] for s, e in within):
            continue
        yield _group(copy, i, wanted)


def group_spans(copy: "pq.ParquetFile") -> list[Span]:
    """Each row group's first and last ``t`` (unknown: all time, so it is never left out)."""
    meta = copy.metadata
    t_index = copy.schema_arrow.get_field_index("t")
    spans = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(t_index).statistics
        known = stats is not None and stats.has_min_max
        spans.append((float(stats.min), float(stats.max)) if known else (-math.inf, math.inf))
    return spans


def read_group(copy: "pq.ParquetFile", i: int, columns: Sequence[str]) -> "pa.Table":
    """Row group ``i`` of the copy, only ``columns`` (what a test counts)."""
    return copy.read_row_group(i, columns=list(columns))


def _group(copy: "pq.ParquetFile", i: int, wanted: Sequence[str]) -> StepChunk:
    try:
        table = read_group(copy, i, ["process", *wanted])
    except Exception as exc:  # noqa: BLE001 - a copy damaged past its footer: say so in one line
        raise TraceError(f"cannot read the steps' columnar copy: {exc}") from None
    jobs = table.column("process").unify_dictionaries().combine_chunks()
    names = [str(n) for n in jobs.dictionary.to_pylist()]
    inside = _within_bounds(copy, i)
    columns = {c: _bounded(c, _numpy(table.column(c)), c in inside) for c in wanted}
    return StepChunk(i, _codes(_numpy(jobs.indices)), names, columns, copy.metadata.num_rows)


def _whole(run: Run, wanted: Sequence[str], make: bool) -> StepChunk:
    """The table as one chunk (no copy): steps.csv parsed once (``Run.step_columns``); text in a number is a corrupt
    file."""
    import numpy as np

    codes, names, columns = run.step_columns(wanted, whole=make)
    numbers = {}
    for name, values in zip(wanted, columns):
        try:
            numbers[name] = _bounded(name, np.asarray(values, dtype=float), False)
        except (TypeError, ValueError):
            raise TraceError(
                f"{run.path / 'steps.csv'}: corrupt (non-numeric values in column {name})"
            ) from None
    return StepChunk(0, _codes(np.asarray(codes)), [str(n) for n in names], numbers, len(codes))


def _codes(codes: "np.ndarray") -> "np.ndarray":
    """Job codes as integers, -1 where a row has no job (read as NaN from a column with nulls)."""
    import numpy as np

    if codes.dtype.kind == "f":
        codes = np.where(np.isnan(codes), -1, codes)
    return codes.astype(np.int64, copy=False)


def _within_bounds(copy: "pq.ParquetFile", i: int) -> set[str]:
    """The columns whose values in row group ``i`` all lie within their bounds, by its statistics."""
    group, schema = copy.metadata.row_group(i), copy.schema_arrow
    inside = set()
    for column, (low, high) in tablecheck.BOUNDS.items():
        at = schema.get_field_index(column)
        stats = group.column(at).statistics if at >= 0 else None
        if stats is not None and stats.has_min_max and low <= stats.min and stats.max <= high:
            inside.add(column)
    return inside


def _bounded(column: str, values: "np.ndarray", inside: bool) -> "np.ndarray":
    """``values`` as float64, those out of the column's bounds NaN ("not recorded"); ``inside``: all are within."""
    import numpy as np

    values = values.astype(float, copy=False)
    if column not in tablecheck.BOUNDS or inside:
        return values
    low, high = tablecheck.BOUNDS[column]
    with np.errstate(invalid="ignore"):
        out = (values < low) | (values > high)
    return np.where(out, np.nan, values) if out.any() else values


SUM_COLUMNS = ("copy_s", "copy_bytes")
COUNT_COLUMNS = ("t", "warmup", *SUM_COLUMNS)
SUMS = "stepchunks:sums"
# a job's counted rows in one row group: first and last time, how many, and the sums of SUM_COLUMNS (NaN left out)
GroupSum = tuple[float, float, int, float, float]


@dataclass
class StepSums:
    """Per row group of a copy, each job's rows that count for a window's means (not warm-up, with a time): a window
    that holds a row group's rows of the job whole takes their sums, without reading them again."""

    groups: dict[int, dict[str, GroupSum]]

    def add(self, chunk: StepChunk) -> None:
        import numpy as np

        t = chunk.columns["t"]
        counted = (chunk.columns["warmup"] != 1) & ~np.isnan(t)
        blank = [_sums_to_zero(chunk.columns[c]) for c in SUM_COLUMNS]
        for name in chunk.names:
            # the rows' positions, found once: gathering by them is many times faster than a mask per column
            at = np.flatnonzero(counted & chunk.rows_of(name))
            if len(at):
                ts = t.take(at)
                copy_s, copy_bytes = (
                    0.0 if zero else float(np.nansum(chunk.columns[c].take(at)))
                    for c, zero in zip(SUM_COLUMNS, blank)
                )
                held = (float(ts.min()), float(ts.max()), len(at), copy_s, copy_bytes)
                self.groups.setdefault(chunk.group, {})[name] = held


def _sums_to_zero(values: "np.ndarray") -> bool:
    """Whether ``np.nansum`` of any of ``values`` is exactly 0.0 (each is +0.0 or a NaN without its sign bit, as a
    column without copies is: no copy bytes, no copy time), so no rows need gathering to sum them."""
    import numpy as np

    return not bool(np.any(values > 0)) and not bool(np.any(np.signbit(values)))


def scan(run: Run, wanted: Sequence[str]) -> Iterator[StepChunk]:
    """``step_chunks(run, wanted)`` (all of them), keeping what ``window_sums`` needs from the same pass (``wanted``
    holds ``COUNT_COLUMNS``) where they come from a copy."""
    sums = StepSums({})
    for chunk in step_chunks(run, wanted):
        sums.add(chunk)
        yield chunk
    if run.columnar_file(make=False) is not None:
        run.cached(SUMS, run.path / "steps.csv", lambda: sums)


def window_sums(run: Run, slot: str, start: float, end: float) -> tuple[int, list[float]]:
    """How many of ``slot``'s steps are not warm-up and timed inside ``[start, end]``, and their sums of
    ``SUM_COLUMNS`` (NaN left out): from a copy, whole row groups from their sums (``StepSums``, one pass per run) and
    only the row groups the window cuts read again; without one, the table (no copy is made)."""
    partial: Sequence[int] | None = None
    count, sums = 0, [0.0] * len(SUM_COLUMNS)
    if run.columnar_file(make=False) is not None:
        held = run.cached(SUMS, run.path / "steps.csv", lambda: _sums_of(run))
        partial = []
        for group, by_slot in held.groups.items():
            first, last, n, *group_sums = by_slot.get(slot, (math.inf, -math.inf, 0))
            if not n or last < start or first > end:
                continue
            if start <= first and last <= end:
                count += n
                sums = [a + b for a, b in zip(sums, group_sums)]
            else:
                partial.append(group)
    more, extra = _counted(run, slot, start, end, partial)
    return count + more, [a + b for a, b in zip(sums, extra)]


def _sums_of(run: Run) -> StepSums:
    sums = StepSums({})
    for chunk in step_chunks(run, COUNT_COLUMNS, make=False):
        sums.add(chunk)
    return sums


def _counted(
    run: Run, slot: str, start: float, end: float, groups: Sequence[int] | None
) -> tuple[int, list[float]]:
    """``window_sums`` read from the rows of ``groups`` (None: all)."""
    import numpy as np

    count, sums = 0, [0.0] * len(SUM_COLUMNS)
    if groups is not None and not groups:
        return count, sums
    for chunk in step_chunks(run, COUNT_COLUMNS, within=[(start, end)], groups=groups, make=False):
        t, warmup = chunk.columns["t"], chunk.columns["warmup"]
        inside = chunk.rows_of(slot) & (warmup != 1) & (t >= start) & (t <= end)
        count += int(np.count_nonzero(inside))
        sums = [a + float(np.nansum(chunk.columns[c][inside])) for a, c in zip(sums, SUM_COLUMNS)]
    return count, sums
