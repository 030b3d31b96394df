"""Run directory reader and CSV/Parquet export (format: docs/trace.md).

Only complete lines are read: a trailing line without its newline (what a kill
can leave) is dropped. pandas is imported only by the functions that return
DataFrames, so listing runs stays light (a big run's rates come from its steps cache, read
with pyarrow alone).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from gpumon.core.records.decode import read_json
from gpumon.core.records.plainfile import read_plain
from gpumon.core.records.enums import RunStatus
from gpumon.core.records.model import (
    DEVICE_COLUMNS,
    GPM_COLUMNS,
    HOST_COLUMNS,
    OTHER_COLUMNS,
    PROCESS_COLUMNS,
    STEP_COLUMNS,
)
from gpumon.core.records.rates import exclusive_rate
from gpumon.core.store import columnar, tablecheck
from gpumon.core.store.exportcolumns import export_columns
from gpumon.core.store.runrecord import (
    DamagedRun,
    RunRecord,
    RunSummary,
    TraceError,
    read_meta,
    recorded_summary,
    summary_row,
)
from gpumon.core.store.runner import INTERRUPTED, run_status
from gpumon.core.store.runsfolder import run_names
from gpumon.core.store.summary import RunSummaryRecord
from gpumon.errors import EnvironmentFailure, UsageError
from gpumon.safewrite import ensure_folder, replacing_together, write_text

# numpy, pandas and pyarrow are imported in the functions that use them: at the top they would add 0.08 s
# CPU (numpy) and 0.40 s (pandas) to gpumon runs, which imports this module; pyarrow is the analysis extra
if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

_T = TypeVar("_T")
# the steps columns that rates (exclusive_ends) and evidence (copies per step) read
READ_STEP_COLUMNS = ("t", "step", "warmup", "copy_bytes", "copy_s")
TABLES: dict[str, tuple[str, ...]] = {
    "steps": STEP_COLUMNS,
    "device": DEVICE_COLUMNS,
    "processes": PROCESS_COLUMNS,
    "host": HOST_COLUMNS,
    "gpu_others": OTHER_COLUMNS,  # absent from runs recorded before it: Run.others() is then empty
}
# Headers of runs recorded before columns were added: read as the current layout, new columns empty.
OLDER_HEADERS: dict[str, tuple[str, ...]] = {
    "device": tuple(c for c in DEVICE_COLUMNS if c not in GPM_COLUMNS),
    "host": HOST_COLUMNS[:-1],  # per_core came later
}


def complete_text(path: Path) -> str:
    """The file's text up to its last newline (a torn last line is dropped)."""
    try:
        data = read_plain(path)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror}") from None
    end = data.rfind(b"\n")
    try:
        return data[: end + 1].decode("utf-8") if end >= 0 else ""
    except UnicodeDecodeError:
        raise TraceError(f"{path} is not a gpumon trace (not UTF-8 text)") from None


@dataclass(frozen=True)
class Run(RunRecord):
    """One run directory: its metadata (``RunRecord``) and lazy access to its tables.

    The steps of a finished run are read once per ``Run`` (``steps()``, ``job_steps()``) by those that want them
    whole (an hour of two jobs is ~1.4 M rows); compare reads them a row group at a time (``stepchunks``).
    """

    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def table_text(self, table: str) -> str:
        path = self.path / f"{table}.csv"
        if not path.exists():
            raise TraceError(f"{self.path}: missing {table}.csv")
        text = complete_text(path)
        expected = list(TABLES[table])
        if (
            not text
        ):  # not even a whole header (a kill while the recorder wrote it): a table without rows
            return ",".join(expected) + "\n"
        header = text.split("\n", 1)[0].split(",")
        if header == list(OLDER_HEADERS.get(table, ())):
            return _widen(text, expected[len(header) :])
        if header != expected:
            raise TraceError(f"{path}: corrupt header (expected {','.join(expected)})")
        return text

    def table_bytes(self, table: str) -> bytes:
        """``table_text`` as UTF-8 bytes, without decoding a table already in the current layout (pandas parses
        bytes; decoding and encoding the 33 MB of an hour's steps.csv again took ~0.1 s)."""
        path = self.path / f"{table}.csv"
        try:
            data = read_plain(path)
        except OSError:
            return self.table_text(table).encode("utf-8")  # its error: missing or unreadable
        end = data.rfind(b"\n")
        header = data[: data.find(b"\n")] if end >= 0 else b""
        if header != ",".join(TABLES[table]).encode() or not data[: end + 1].isascii():
            return self.table_text(table).encode(
                "utf-8"
            )  # an older layout, or text to check as UTF-8
        return data[: end + 1]

    def rows(self, table: str) -> Iterator[dict[str, str]]:
        """Rows as dicts of strings, with the csv module (no pandas); rows of the wrong width are skipped."""
        columns = TABLES[table]
        for row in self._lists(table):
            yield dict(zip(columns, row))

    def _lists(self, table: str) -> Iterator[list[str]]:
        """The rows of ``table`` as lists of strings (the header and rows of the wrong width left out)."""
        header = list(TABLES[table])
        width = len(header)
        for row in csv.reader(io.StringIO(self.table_text(table))):
            if len(row) == width and row != header:
                yield row

    def frame(self, table: str) -> "pd.DataFrame":
        """A table as a pandas DataFrame with the documented columns (steps from its columnar copy if it has one)."""
        if table == "steps":
            copy = self.columnar()
            if copy is not None:
                # a block per column: no consolidating copy, and the split by job takes columns one by one
                return copy.to_pandas(split_blocks=True, self_destruct=True)
        frame = self._frame_of(table)
        if table == "steps":
            frame = tablecheck.checked_steps(frame)
            # a few job names over millions of rows: categorical, as the columnar copy stores them
            frame["process"] = frame["process"].astype("category")
        return frame

    def columnar_file(self, make: bool = True) -> "pq.ParquetFile | None":
        """The steps' columnar copy (``core/store/columnar.py``), made (``make``) in the user's cache for a finished
        run without one; None: none (the base install, a run still recording, a table it does not type): read
        steps.csv."""
        found = columnar.open_copy(self.path)
        if found is None and make and self.meta.status != RunStatus.RECORDING:
            found = columnar.open_copy(self.path) if columnar.ensure_cached(self.path) else None
        return found

    def columnar(
        self, columns: Sequence[str] | None = None, make: bool = True
    ) -> "pa.Table | None":
        """``columns`` (all: None) of the steps' columnar copy (``columnar_file``), else None."""
        copy = self.columnar_file(make)
        return columnar.read_file(copy, columns) if copy is not None else None

    def _frame_of(self, table: str, columns: Sequence[str] | None = None) -> "pd.DataFrame":
        """``table``'s CSV parsed by pandas (only ``columns``, if given)."""
        import pandas as pd

        try:
            # bytes, not StringIO: pandas' C parser reads them at twice the speed
            return pd.read_csv(
                io.BytesIO(self.table_bytes(table)), usecols=list(columns) if columns else None
            )
        except (ValueError, pd.errors.ParserError) as exc:
            raise TraceError(
                f"{self.path / (table + '.csv')}: corrupt ({str(exc).splitlines()[0]})"
            ) from None

    def cached(self, name: str, path: Path, read: Callable[[], _T]) -> _T:
        """``read()``, kept under ``name`` while ``path`` keeps its size and mtime (a recording run: every time)."""
        key = None if self.meta.status == RunStatus.RECORDING else _file_key(path)
        held = self._memo.get(name)
        if key is not None and held is not None and held[0] == key:
            return held[1]
        value = read()
        if key is not None:
            self._memo[name] = (key, value)
        return value

    def steps(self) -> "pd.DataFrame":
        """The steps table; a finished run's is read once and shared while steps.csv is unchanged (do not modify it)."""
        return self.cached("steps", self.path / "steps.csv", lambda: self.frame("steps"))

    def jobs(self) -> "dict[Any, pd.DataFrame]":
        """The steps table split by process (rows in file order; rows without a process left out), split once.

        From the whole table (read from the columnar copy where there is one), not a row group at a time: on a
        2 M-step run that took 477 MB at most against 565–590 MB split from the copy as it was read, in the same
        time (benchmarks/scale.py's capture, 2-core VM)."""
        steps = self.steps()
        held = self._memo.get("jobs")
        if held is None or held[0] is not steps:
            held = (steps, _split_by_process(steps))
            self._memo["jobs"] = held
        return held[1]

    def job_steps(self, slot: str) -> "pd.DataFrame":
        """``slot``'s rows of the steps table, in file order (none: an empty frame)."""
        jobs = self.jobs()
        return jobs[slot] if slot in jobs else self.steps().iloc[0:0]

    def step_columns(
        self, wanted: Sequence[str], whole: bool = True
    ) -> "tuple[np.ndarray, list[Any], list[np.ndarray]]":
        """Each step row's job (a code into the returned job names) and the ``wanted`` columns as numpy arrays (nulls:
        NaN), in file order: from the steps already read, else from the columnar copy with pyarrow alone (no pandas
        frame, only those columns), else through ``steps()``; ``whole=False``: else only the columns rates and
        evidence read (``READ_STEP_COLUMNS``) are parsed from steps.csv (``_read_steps``, no pandas where pyarrow
        reads them): what a reader that needs them once pays where no copy can be made."""
        light = set(wanted) <= set(READ_STEP_COLUMNS) and ("read_steps" in self._memo or not whole)
        if "steps" not in self._memo and "read_steps" not in self._memo:
            table = self.columnar(("process", *wanted), make=whole)
            if table is not None:
                slots = table.column("process").unify_dictionaries().combine_chunks()
                names = slots.dictionary.to_pylist()
                return _numpy(slots.indices), names, [_numpy(table.column(c)) for c in wanted]
        if light and "steps" not in self._memo:
            codes, names, columns = self.cached(
                "read_steps", self.path / "steps.csv", self._read_steps
            )
            return codes, names, [columns[c] for c in wanted]
        steps = self.steps()
        slots = steps["process"].astype("category")
        return (
            slots.cat.codes.to_numpy(),
            list(slots.cat.categories),
            [steps[c].to_numpy() for c in wanted],
        )

    def _read_steps(self) -> "tuple[np.ndarray, list[Any], dict[str, np.ndarray]]":
        """The job codes and names and ``READ_STEP_COLUMNS`` of steps.csv: by pyarrow where it reads them as pandas
        would, else by pandas (those columns only)."""
        parsed = csv_columns(
            self.table_bytes("steps"), ("process", *READ_STEP_COLUMNS), jobs_as_pandas=True
        )
        if parsed is not None:
            return parsed
        steps = self._frame_of("steps", ("process", *READ_STEP_COLUMNS))
        slots = steps["process"].astype("category")
        columns = {c: steps[c].to_numpy() for c in READ_STEP_COLUMNS}
        return slots.cat.codes.to_numpy(), list(slots.cat.categories), columns

    def columns(self, table: str) -> dict[str, list[str]]:
        """``rows(table)`` as columns of strings; a finished run's is read once while the file is unchanged."""

        def read() -> dict[str, list[str]]:
            rows = list(self._lists(table))
            return {name: [row[i] for row in rows] for i, name in enumerate(TABLES[table])}

        return self.cached(f"columns:{table}", self.path / f"{table}.csv", read)

    def device(self) -> "pd.DataFrame":
        return self.frame("device")

    def processes(self) -> "pd.DataFrame":
        return self.frame("processes")

    def host(self) -> "pd.DataFrame":
        return self.frame("host")

    def others(self) -> "pd.DataFrame":
        """The GPU processes that were not our jobs (gpu_others.csv); empty for runs recorded before it."""
        import pandas as pd

        if not (self.path / "gpu_others.csv").exists():
            return pd.DataFrame({c: pd.Series(dtype=object) for c in OTHER_COLUMNS})
        return self.frame("gpu_others")


def _split_by_process(steps: "pd.DataFrame") -> "dict[Any, pd.DataFrame]":
    """Each job's rows of ``steps`` in file order (the whole frame, uncopied, when it holds one job); rows naming
    no job (``tablecheck.is_job``) are left out.

    Taken column by column into a frame of one block per column: 2.5 times faster than ``DataFrame.take``,
    which goes through 2-D blocks (0.08 s against 0.2 s for the 1.4 M rows of an hour of two jobs).
    """
    import numpy as np
    import pandas as pd

    slots = steps["process"]  # categorical: Run.steps() reads it so, from steps.csv or the cache
    codes = slots.cat.codes.to_numpy()
    out = {}
    for code, name in enumerate(slots.cat.categories):
        if not tablecheck.is_job(name):
            continue
        rows = np.flatnonzero(codes == code)
        if len(rows) == len(steps):
            out[name] = steps
        elif len(rows):
            columns = {column: steps[column].array.take(rows) for column in steps.columns}
            out[name] = pd.DataFrame(columns, index=steps.index[rows], copy=False)
    return out


def _widen(text: str, added: list[str]) -> str:
    """An older table's text in the current layout: the ``added`` columns appended, empty in every row."""
    pad = "," * len(added)
    lines = text.split("\n")
    header = ",".join([lines[0], *added])
    return "\n".join([header, *(line + pad if line else line for line in lines[1:])])


def _file_key(path: Path) -> bytes | None:
    """The size and mtime of ``path`` (None: unreadable), what a value read from it is valid for."""
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}".encode()


def load_run(path: str | os.PathLike[str]) -> Run:
    """Open a run directory, checking that run.json is a gpumon trace of a known schema."""
    root = (path if isinstance(path, Path) else Path(path)).expanduser()
    return Run(root, read_meta(root))


def load_live(path: str | os.PathLike[str]) -> tuple[Run, str]:
    """A run and its status now (``running``, ``interrupted``, ``complete``…, ``core/store/runner.py``).

    A run that reads ``interrupted`` is read once more: its runner may have finalised run.json and
    exited between the first read and the check that it is gone, and the second read sees the final file.
    """
    run = load_run(path)
    status = run_status(run.meta.status, run.meta.runner, run.path)
    if status == INTERRUPTED:
        run = load_run(path)
        status = run_status(run.meta.status, run.meta.runner, run.path)
    return run, status


def scan_runs(runs_dir: Path) -> tuple[list[Run], list[DamagedRun]]:
    """The runs directly below ``runs_dir`` (a directory with a run.json), oldest first: those that read, and those
    that do not, with why."""
    names = run_names(runs_dir)
    found = [runs_dir / name for name in names if os.path.isfile(runs_dir / name / "run.json")]
    runs, damaged = [], []
    for child in found:
        try:
            runs.append(load_run(child))
        except TraceError as exc:
            damaged.append(DamagedRun(child, str(exc)))
    return runs, damaged


def list_runs(runs_dir: Path) -> list[Run]:
    """Every readable run directly below ``runs_dir``, oldest first (damaged ones left out: ``scan_runs`` has them)."""
    return scan_runs(runs_dir)[0]


# steps.csv from which exclusive_rates reads columns (~80 k rows: about 0.3 s row by row, what
# importing pandas or pyarrow costs).
COLUMNS_BYTES = 4 << 20


def exclusive_rates(run: Run) -> dict[str, float]:
    """Each process's ``exclusive_rate`` over its post-warm-up steps: from its first to its last by time."""
    return {slot: exclusive_rate(ts, ns) for slot, (ts, ns) in exclusive_ends(run).items()}


def _is_big(run: Run) -> bool:
    """Whether steps.csv is big enough to read by column (``COLUMNS_BYTES``)."""
    try:
        return (run.path / "steps.csv").stat().st_size >= COLUMNS_BYTES
    except OSError:
        return False


def exclusive_ends(run: Run, whole: bool = True) -> dict[str, tuple[list[float], list[float]]]:
    """Each process's first and last post-warm-up step by time, as (times, step numbers) (one step: itself alone),
    in the order of each job's first counted step in steps.csv.

    A small steps.csv is read row by row with the csv module. In a big one only those two steps matter:
    the job names, times, step numbers and warm-up flags are read as columns, a million rows at a time from the
    columnar copy with pyarrow alone (memory does not grow with the run), else at once (``Run.step_columns``),
    and each job's two ends found with numpy; a table that does not read as numbers is read row by row instead.
    ``whole``: as ``Run.step_columns``'s (False: no copy made, only the columns read parsed).
    """
    big = _is_big(run)
    # a small run row by row: no numpy, pyarrow or pandas to import, so listing runs stays light; predict (whole=False)
    # reads the step columns anyway, so its steps are parsed once, for both
    if not big and whole:
        return _exclusive_ends_by_row(run)
    try:
        return _ends_of(_rate_chunks(run, whole))
    except (TraceError, _ByRow):
        return _exclusive_ends_by_row(run)


class _ByRow(Exception):
    """The steps do not read as numbers in every row: read them row by row instead."""


RATE_COLUMNS = ("t", "step", "warmup", "copy_bytes")
CHUNK_ROWS = 1 << 20


def _rate_chunks(
    run: Run, whole: bool
) -> "Iterator[tuple[np.ndarray, list[Any], np.ndarray, np.ndarray, np.ndarray]]":
    """The steps' job codes, job names, times, step numbers and warm-up flags (floats), a chunk at a time: a row
    group of the columnar copy, else the whole table (``_rate_columns``). _ByRow where reading row by row would
    differ (a short row: the recorder fills ``warmup`` and ``copy_bytes`` in every row)."""
    import numpy as np

    copy = None
    if "steps" not in run._memo and "read_steps" not in run._memo:
        copy = run.columnar_file(make=whole)
    if copy is None:
        columns = _rate_columns(run, whole)
        if columns is None:
            raise _ByRow
        yield columns
        return
    for batch in copy.iter_batches(batch_size=CHUNK_ROWS, columns=["process", *RATE_COLUMNS]):
        jobs = batch.column(0)
        t, n, warmup, copy_bytes = (_numpy(batch.column(c)).astype(float) for c in RATE_COLUMNS)
        if np.isnan(warmup).any() or np.isnan(copy_bytes).any():
            raise _ByRow
        yield _numpy(jobs.indices), jobs.dictionary.to_pylist(), t, n, warmup


def _ends_of(
    chunks: "Iterator[tuple[np.ndarray, list[Any], np.ndarray, np.ndarray, np.ndarray]]",
) -> dict[str, tuple[list[float], list[float]]]:
    """``exclusive_ends`` of the steps in ``chunks`` (in file order): per job its first counted row, its first step by
    time (the first of equal times) and its last (the last of equal times), and how many it counted."""
    import numpy as np

    found: dict[
        str, list[float]
    ] = {}  # job: [first row, t first, n first, t last, n last, counted]
    offset = 0
    for codes, names, t, n, warmup in chunks:
        counted = tablecheck.counted(t, n, warmup)
        for code, slot in enumerate(names):
            at = np.flatnonzero(counted & (codes == code))
            if not len(at) or not tablecheck.is_job(slot):
                continue
            ts = t[at]
            first = at[int(np.argmin(ts))]  # the first of equal times, as a stable sort leaves them
            last = at[len(ts) - 1 - int(np.argmax(ts[::-1]))]  # the last of equal times
            held = found.setdefault(
                str(slot), [offset + int(at[0]), math.inf, 0.0, -math.inf, 0.0, 0]
            )
            if t[first] < held[1]:
                held[1:3] = [float(t[first]), float(n[first])]
            if t[last] >= held[3]:
                held[3:5] = [float(t[last]), float(n[last])]
            held[5] += len(at)
        offset += len(t)
    # in the order of each job's first counted step in steps.csv, as reading it row by row gives them
    out = {}
    for slot, (_, t0, n0, t1, n1, count) in sorted(found.items(), key=lambda kv: kv[1][0]):
        out[slot] = ([t0], [n0]) if count == 1 else ([t0, t1], [n0, n1])
    return out


def _rate_columns(
    run: Run, whole: bool = True
) -> "tuple[np.ndarray, list[Any], np.ndarray, np.ndarray, np.ndarray] | None":
    """Each step row's job (a code into the names), time, step number and warm-up flag, as floats.

    None where reading row by row would differ: a column that is not numbers, or a short row (the recorder
    fills ``warmup`` and ``copy_bytes`` in every row; pandas pads a short one with NaN, the csv module skips it).
    """
    import numpy as np

    codes, names, numbers = run.step_columns(RATE_COLUMNS, whole)
    if not all(c.dtype.kind in "biuf" for c in numbers):
        return None
    t, n, warmup, copy_bytes = (c.astype(float) for c in numbers)
    if np.isnan(warmup).any() or np.isnan(copy_bytes).any():
        return None
    return codes, names, t, n, warmup


def _numpy(column: "pa.Array | pa.ChunkedArray") -> "np.ndarray":
    """A numeric pyarrow column as a numpy array (nulls: NaN). pyarrow's own conversion imports pandas (half a
    second of ``gpumon runs``), so numbers are read from their buffers, nulls from the validity bitmap; a column of
    one chunk without nulls is its buffer, read-only (not copied: a column of 5 M steps is 40 MB)."""
    import numpy as np
    import pyarrow as pa

    parts = []
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        kind = (
            "f"
            if pa.types.is_floating(chunk.type)
            else "i"
            if pa.types.is_signed_integer(chunk.type)
            else ""
        )
        if not kind:
            parts.append(chunk.to_numpy(zero_copy_only=False))
            continue
        dtype = np.dtype(f"{kind}{chunk.type.bit_width // 8}")
        validity, data = chunk.buffers()[:2]
        values = np.frombuffer(
            data, dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize
        )
        if chunk.null_count:
            bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
            values = np.where(
                bits[chunk.offset : chunk.offset + len(chunk)].astype(bool), values, np.nan
            )
        parts.append(values)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.array([], dtype=float)


def csv_columns(
    data: bytes, wanted: Sequence[str], jobs_as_pandas: bool
) -> "tuple[np.ndarray, list[Any], dict[str, np.ndarray]] | None":
    """``wanted`` columns of a table's CSV bytes (``Run.table_bytes``), parsed at once by pyarrow's reader: each row's
    job (if ``process`` is wanted: a code into the job names, in no particular order; NaN: none) and the other
    columns as floats (missing: NaN). An hour of device.csv (36,000 rows) takes ~3 ms against ~50 ms with the csv
    module, and an hour of steps.csv needs no pandas. ``jobs_as_pandas``: a job name pandas reads as missing is
    one (pyarrow's null strings are pandas' less "<NA>" and "None", left to pandas); else names are kept as
    written, as the csv module keeps them. None where those readers must read it: no pyarrow (the light install),
    a row of the wrong width, text where a number goes (the header repeated inside the table, say), an empty
    file."""
    import numpy as np

    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return None
    types = {
        n: pa.dictionary(pa.int32(), pa.string()) if n == "process" else pa.float64()
        for n in wanted
    }
    try:
        parsed = pacsv.read_csv(
            pa.BufferReader(data),
            convert_options=pacsv.ConvertOptions(
                include_columns=list(wanted), column_types=types, strings_can_be_null=jobs_as_pandas
            ),
        )
    except (pa.ArrowInvalid, ValueError):
        return None
    codes, job_names = np.array([]), []
    if "process" in wanted:
        jobs = parsed.column("process").unify_dictionaries().combine_chunks()
        codes, job_names = _numpy(jobs.indices), jobs.dictionary.to_pylist()
        if jobs_as_pandas and {"<NA>", "None"} & set(job_names):
            return None
    return codes, job_names, {n: _numpy(parsed.column(n)) for n in wanted if n != "process"}


def _exclusive_ends_by_row(run: Run) -> dict[str, tuple[list[float], list[float]]]:
    """``exclusive_ends`` with the csv module, row by row: a damaged row is skipped, the valid ones still count."""
    points: dict[str, list[tuple[float, int]]] = {}
    for r in run.rows("steps"):
        if r["warmup"] == "1" or not r["t"] or not r["step"] or not tablecheck.is_job(r["process"]):
            continue
        point = tablecheck.step_point(r["t"], r["step"])
        if point is not None:  # else a damaged row: the valid ones still give the rate
            points.setdefault(r["process"], []).append(point)
    out = {}
    for key, pairs in points.items():
        pairs.sort(key=lambda p: p[0])
        chosen = pairs[:1] if len(pairs) == 1 else [pairs[0], pairs[-1]]
        out[key] = ([float(p[0]) for p in chosen], [float(p[1]) for p in chosen])
    return out


def baseline_rate(slot: str, path: str | os.PathLike[str]) -> float:
    """The exclusive rate of ``slot`` in a recorded run (its only job's rate if it ran one job), for ``--baseline``."""
    run = load_run(path)
    known = {k: v for k, v in exclusive_rates(run).items() if not math.isnan(v)}
    if slot in known:
        return known[slot]
    if len(known) == 1:
        return next(iter(known.values()))
    raise UsageError(
        f"baseline run {run.path.name} has no post-warm-up rate for {slot}: no job in it stepped past "
        "its warm-up (capture it for longer)"
    )


def summarize(run: Run) -> RunSummary:
    """What ``gpumon runs`` shows: metadata and each process's exclusive rate (post-warm-up slope) and steps."""
    return summary_row(run, summary_of(run))


def steps_summary(run: Run) -> RunSummaryRecord:
    """Each job's exclusive rate and step rows, read from the run's steps (what its recorder writes into run.json)."""
    return RunSummaryRecord(exclusive_rates(run), step_counts(run))


def step_counts(run: Run) -> dict[str, int]:
    """The rows of each job in steps.csv (by the job column of its columnar copy, a row group at a time, where it has
    one)."""
    copy = run.columnar_file() if _is_big(run) else None
    out: dict[str, int] = {}
    if copy is not None:
        for batch in copy.iter_batches(batch_size=CHUNK_ROWS, columns=["process"]):
            for c in batch.column(0).dictionary_decode().value_counts().to_pylist():
                if c["values"] is not None:
                    out[str(c["values"])] = out.get(str(c["values"]), 0) + int(c["counts"])
        return out
    for row in run._lists("steps"):
        if row[0]:  # a row without a job is no job's
            out[row[0]] = out.get(row[0], 0) + 1
    return out


def summary_of(run: Run) -> RunSummaryRecord:
    """run.json's summary; a finished run recorded without one gets it computed once into the user's cache, keyed
    by the run and its files' identity (a run still recording: computed every time, never kept)."""
    recorded = recorded_summary(run.meta)
    if recorded is not None:
        return recorded
    if run.meta.status == RunStatus.RECORDING:
        return steps_summary(run)
    where = columnar.user_cache_path(run.path, "summaries", ("run.json", "steps.csv"), ".json")
    if where is None:
        return steps_summary(run)
    try:
        held = RunSummaryRecord.from_json(read_json(where, max_bytes=1 << 20))
    except (OSError, ValueError):
        held = None
    if held is not None:
        return held
    made = steps_summary(run)
    try:
        ensure_folder(where.parent, mode=0o700)
        write_text(where, json.dumps(made.to_json()), replace=True)
    except (OSError, UsageError):
        pass  # no cache is only slower
    return made


def refuse_run_folder(out_dir: Path, runs: Sequence[Run]) -> None:
    """UsageError when ``out_dir`` is, or lies inside, one of the run directories ``runs`` a command reads: a reader
    never writes where it reads (an export with --force into its own run would replace the run's tables)."""
    target = os.path.realpath(out_dir)
    for run in runs:
        home = os.path.realpath(run.path)
        if target == home or target.startswith(home + os.sep):
            raise UsageError(
                f"{out_dir} is in the run directory {run.path}, which this command reads: gpumon does not "
                "write into a run it reads (choose another folder)"
            )


def export(run: Run, out_dir: Path, fmt: str = "csv", overwrite: bool = False) -> list[Path]:
    """Write each table as clean CSV (complete rows only) or Parquet into ``out_dir``, with the columns a notebook
    reads (``exportcolumns.export_columns``), and the run's run.json, all or nothing.

    Files of those names already there are refused unless ``overwrite``. Each table is streamed (a block at a time:
    memory does not grow with the run) into a temporary file of the safe writer (``gpumon/safewrite.py``), and the
    temporaries are renamed into place only once every one is complete, so a write that fails (a full disk, a
    read-only directory) leaves no truncated file behind, and no directory that this call created.
    """
    refuse_run_folder(out_dir, [run])
    targets = [
        (table, out_dir / f"{table}.{fmt}")
        for table in TABLES
        if (run.path / f"{table}.csv").exists()
    ]
    if not overwrite:
        names = [target for _, target in targets] + [out_dir / "run.json"]
        there = [target.name for target in names if os.path.lexists(target)]
        if there:
            raise TraceError(
                f"{out_dir} already has {', '.join(there)}: not overwritten (choose another folder, or "
                "--force to replace them)"
            )
    created = not out_dir.exists()
    try:
        ensure_folder(out_dir)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot create {out_dir}: {exc.strerror}") from None
    target = out_dir
    try:
        with replacing_together(replace=overwrite) as batch:
            for table, target in targets:
                with batch.file(target, binary=fmt != "csv") as out:
                    _write_table(run, table, out, fmt)
            with batch.file(out_dir / "run.json", binary=True) as out:
                out.write(read_plain(run.path / "run.json", follow=False))
    except (
        Exception
    ) as exc:  # a table that does not read (its TraceError) leaves nothing behind either
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        if not isinstance(exc, OSError):
            raise
        raise EnvironmentFailure(
            f"cannot write {target}: {exc.strerror or exc}; nothing was exported"
        ) from None
    return [target for _, target in targets] + [out_dir / "run.json"]


EXPORT_CHUNK_ROWS = 1 << 18


def _export_chunks(run: Run, table: str) -> "Iterator[pd.DataFrame]":
    """``table``'s rows with the columns export writes (``export_columns``), a chunk at a time: the steps a row
    group at a time from their columnar copy where they have one, any other table whole."""
    copy = run.columnar_file() if table == "steps" else None
    if copy is None:
        yield export_columns(run.meta, table, run.frame(table))
        return
    for batch in copy.iter_batches(batch_size=EXPORT_CHUNK_ROWS):
        yield export_columns(run.meta, table, batch.to_pandas())


def _write_table(run: Run, table: str, out: IO, fmt: str) -> None:
    """``table`` as CSV (text) or Parquet (bytes) into ``out``, a chunk at a time."""
    if fmt == "csv":
        for i, chunk in enumerate(_export_chunks(run, table)):
            chunk.to_csv(out, index=False, header=i == 0)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    try:
        for chunk in _export_chunks(run, table):
            frame = pa.Table.from_pandas(chunk, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(out, frame.schema)
            writer.write(frame.cast(writer.schema))  # into the safe writer's file
    finally:
        if writer is not None:
            writer.close()
