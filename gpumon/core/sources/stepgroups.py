"""A finished run's steps read from their columnar copy a row group at a time, as the replay reaches them.

The replay's first frame then reads the Parquet footer and the row groups that start before it, not the whole
table (issue 41). Each row group's ``t`` statistics say when it starts and ends; a copy without them is read
whole at once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gpumon.core.records.model import StepEvent, field_of
from gpumon.core.store import tablecheck

if TYPE_CHECKING:
    import pyarrow.parquet as pq

INT_FIELDS = frozenset({"pid", "step", "copy_bytes"})


def _value(name: str, v: Any) -> Any:
    """A copy's cell as the CSV reader gives it (an empty integer 0, an empty number NaN)."""
    if name == "process":
        return v or ""
    if name == "warmup":
        return v == 1
    missing = v is None or (isinstance(v, float) and math.isnan(v))
    if name in INT_FIELDS:
        return 0 if missing else int(v)
    return math.nan if missing else float(v)


class StepGroups:
    """The row groups of a steps copy, read in file order (``groups_read`` counts them)."""

    def __init__(self, copy: "pq.ParquetFile") -> None:
        self.copy = copy
        self.groups_read = 0
        meta = copy.metadata
        t_index = copy.schema_arrow.get_field_index("t")
        self.spans: list[tuple[float, float]] = []
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(t_index).statistics
            if stats is None or not stats.has_min_max:
                self.spans = [(-math.inf, math.inf)] * meta.num_row_groups
                break
            self.spans.append((float(stats.min), float(stats.max)))

    @property
    def remaining(self) -> bool:
        return self.groups_read < len(self.spans)

    @property
    def next_start(self) -> float:
        """The first ``t`` of the next row group not read (inf: none left)."""
        return self.spans[self.groups_read][0] if self.remaining else math.inf

    def bounds(self) -> tuple[float, float] | None:
        """The first and last ``t`` of the whole table (None: no rows with a time)."""
        spans = [s for s in self.spans if not math.isnan(s[0])]
        if not spans:
            return None
        return min(s[0] for s in spans), max(s[1] for s in spans)

    def read_next(self) -> list[StepEvent]:
        """The next row group's steps, in file order."""
        table = self.copy.read_row_group(self.groups_read)
        self.groups_read += 1
        columns = {name: table.column(name).to_pylist() for name in table.column_names}
        names = list(columns)
        fields = [field_of(n) for n in names]
        steps = (
            StepEvent(**{f: _value(n, v) for f, n, v in zip(fields, names, row)})
            for row in zip(*(columns[n] for n in names))
        )
        return [step for step in steps if tablecheck.is_job(step.slot)]  # another name's: no step
