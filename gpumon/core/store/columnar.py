"""The columnar copy of a finished run's steps: Parquet (LZ4), read by column (docs/trace.md).

steps.csv stays the record (crash-safe, appended live, the export format); this copy only makes reading
faster and lighter. It lives in one of two places, never a third:

- ``RUN/steps.parquet``, written once by the run's own recorder when it finalises (``write_run_copy``);
- the user's cache folder (``$XDG_CACHE_HOME/gpumon/steps``, default ``~/.cache/gpumon/steps``; or
  ``$GPUMON_CACHE_DIR/steps``), for runs
  recorded before that or by a recorder without pyarrow, keyed by the run directory and the identity of
  its steps.csv (device, inode, size, mtime_ns), written by the first reader (``ensure_cached``).

A reader never writes into a run directory. Either copy is used only while steps.csv keeps the size and
mtime it was made from, and only in this layout (typed columns, so a table without rows still has a job
column of job names: an untyped empty table once poisoned every later read); anything else about it is
ignored and steps.csv is read. Without pyarrow (the base install) there is no copy and steps.csv is read.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from gpumon.core.records.model import STEP_COLUMNS
from gpumon.core.records.plainfile import open_plain
from gpumon.errors import UsageError
from gpumon.safewrite import ensure_folder, replacing

# pyarrow is the analysis extra (the base install has none): imported in the functions that use it
if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

STEPS_COLUMNAR = "steps.parquet"
CSV_KEY = b"gpumon_steps_csv"
LAYOUT_KEY, LAYOUT = b"gpumon_steps_layout", b"3"
# what the recorder writes in each column of steps.csv (pandas reads the same CSV to the same dtypes:
# an integer column with an empty cell becomes float64 either way)
INTEGER_COLUMNS = ("pid", "step", "warmup", "copy_bytes")
BLOCK_BYTES = 8 << 20  # CSV read and Parquet row groups written per block: memory stays ~ one block
# the columns the recorder fills in every row, written as required (no nulls): a reader decodes them without
# definition levels (compare's seven columns of 5 M steps: 0.07 s of CPU instead of 0.10 s); a table with an empty
# cell in one is written again with every column nullable
FILLED_COLUMNS = ("process", "pid", "step", "t", "warmup", "copy_bytes")
# job names that pandas reads as missing but pyarrow does not: such a table is left to pandas
PANDAS_NULLS = {"<NA>", "None", "n/a", "NULL", "nan", "-nan", "1.#IND", "1.#QNAN", "#N/A N/A"}


def step_types(integers: bool = True) -> "dict[str, pa.DataType]":
    """Each steps column's type in a copy (``integers=False``: every number a float, as pandas reads a column of
    whole numbers with one that is not)."""
    import pyarrow as pa

    return {
        c: pa.dictionary(pa.int32(), pa.string())
        if c == "process"
        else pa.int64()
        if c in INTEGER_COLUMNS and integers
        else pa.float64()
        for c in STEP_COLUMNS
    }


def csv_identity(run_dir: Path) -> os.stat_result | None:
    try:
        return os.stat(run_dir / "steps.csv")
    except OSError:
        return None


def _key(st: os.stat_result) -> bytes:
    """What a copy is valid for: steps.csv's size and mtime (a copied run directory keeps both)."""
    return f"{st.st_size}:{st.st_mtime_ns}".encode()


def cache_folder(kind: str = "steps") -> Path:
    """``$GPUMON_CACHE_DIR/<kind>``, else ``$XDG_CACHE_HOME/gpumon/<kind>`` (default ``~/.cache/gpumon/<kind>``):
    what gpumon derives from runs it reads."""
    if os.environ.get("GPUMON_CACHE_DIR"):
        return Path(os.environ["GPUMON_CACHE_DIR"]).expanduser() / kind
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(home) / "gpumon" / kind


def _identity(st: os.stat_result) -> str:
    return f"{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}"


def cache_path(run_dir: Path, st: os.stat_result) -> Path:
    """The user's cached copy of ``run_dir``'s steps as its steps.csv is now (device, inode, size, mtime)."""
    return cache_folder() / f"{_digest([os.path.realpath(run_dir), _identity(st)])}.parquet"


def user_cache_path(run_dir: Path, kind: str, files: Sequence[str], suffix: str) -> Path | None:
    """Where the user's cache keeps ``kind`` derived from ``run_dir`` as its ``files`` are now (their device,
    inode, size and mtime); None where one of them cannot be read."""
    parts = [os.path.realpath(run_dir)]
    for name in files:
        try:
            parts.append(_identity(os.stat(run_dir / name)))
        except OSError:
            return None
    return cache_folder(kind) / f"{_digest(parts)}{suffix}"


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def open_copy(run_dir: Path) -> "pq.ParquetFile | None":
    """The valid columnar copy of ``run_dir``'s steps (the run's own, else the user's cache), else None."""
    st = csv_identity(run_dir)
    if st is None:
        return None
    for path in (run_dir / STEPS_COLUMNAR, cache_path(run_dir, st)):
        found = _valid(path, _key(st))
        if found is not None:
            return found
    return None


def _valid(path: Path, key: bytes) -> "pq.ParquetFile | None":
    if not path.is_file():
        return None
    try:
        import pyarrow.parquet as pq

        source = open_plain(path)
    except (ImportError, OSError):
        return None
    try:
        copy = pq.ParquetFile(source, read_dictionary=["process"])
        weakref.finalize(copy, source.close)  # the file closes with the copy that reads it
        schema = copy.schema_arrow
        meta = schema.metadata or {}
        if (meta.get(CSV_KEY), meta.get(LAYOUT_KEY)) != (key, LAYOUT):
            return None
        whole, floats = step_types(), step_types(integers=False)
        if [f.name for f in schema] != list(whole) or any(
            f.type not in (whole[f.name], floats[f.name]) for f in schema
        ):
            return None
        return copy
    except Exception:  # noqa: BLE001 - a damaged or foreign copy is ignored: steps.csv is the record
        source.close()
        return None


def read_columns(run_dir: Path, columns: Sequence[str] | None = None) -> "pa.Table | None":
    """``columns`` (all: None) of the valid copy, else None."""
    copy = open_copy(run_dir)
    return read_file(copy, columns) if copy is not None else None


def read_file(copy: "pq.ParquetFile", columns: Sequence[str] | None = None) -> "pa.Table | None":
    """``columns`` (all: None) of an open copy, else None (damaged past its footer)."""
    try:
        return copy.read(columns=list(columns) if columns is not None else None)
    except Exception:  # noqa: BLE001 - damaged past its footer: steps.csv is the record
        return None


def write_run_copy(run_dir: Path) -> bool:
    """The recorder's copy, written once as it finalises (False: no pyarrow, or a table it does not type)."""
    return _convert(run_dir, lambda st: run_dir / STEPS_COLUMNAR)


def ensure_cached(run_dir: Path) -> bool:
    """The user's cached copy of a finished run with none (False: not made; the caller reads steps.csv)."""
    if open_copy(run_dir) is not None:
        return True

    def place(st: os.stat_result) -> Path:
        ensure_folder(cache_folder(), mode=0o700)
        return cache_path(run_dir, st)

    return _convert(run_dir, place)


def _convert(run_dir: Path, place: "Callable[[os.stat_result], Path]") -> bool:
    """steps.csv streamed into Parquet at ``place(identity)``, a block at a time; best effort."""
    try:
        import pyarrow.csv  # noqa: F401 - the base install has no pyarrow: no copy
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    st = csv_identity(run_dir)
    if st is None or not _plain(run_dir / "steps.csv", st.st_size):
        return False
    try:
        dest = place(st)
    except (OSError, UsageError):  # the cache folder cannot be made, or is not safe to write into
        return False
    tries = [(integers, filled) for integers in (True, False) for filled in (True, False)]
    return any(_stream(run_dir, dest, st, integers, filled) for integers, filled in tries)


def _stream(run_dir: Path, dest: Path, st: os.stat_result, integers: bool, filled: bool) -> bool:
    """steps.csv into ``dest`` with the column types of ``step_types(integers)``, ``FILLED_COLUMNS`` required if
    ``filled``; False: it does not read so."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    types = step_types(integers)
    required = FILLED_COLUMNS if filled else ()
    schema = pa.schema(
        [pa.field(c, kind, nullable=c not in required) for c, kind in types.items()],
        metadata={CSV_KEY: _key(st), LAYOUT_KEY: LAYOUT},
    )
    try:
        source = open_plain(run_dir / "steps.csv")
    except OSError:
        return False
    try:
        reader = pacsv.open_csv(
            source,
            read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES, use_threads=False),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=list(STEP_COLUMNS), strings_can_be_null=True
            ),
        )
        if reader.schema.names != list(STEP_COLUMNS):
            return False
        with replacing(dest, replace=True, binary=True) as f:
            with pq.ParquetWriter(f, schema, **_encoding(types)) as out:
                for batch in reader:
                    jobs = batch.column("process")
                    if PANDAS_NULLS & set(jobs.dictionary.to_pylist()):
                        raise ValueError("a job name pandas reads as missing")
                    if any(batch.column(c).null_count for c in required):
                        raise ValueError("an empty cell in a column the recorder fills")
                    out.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=schema))
        return True
    except Exception:  # noqa: BLE001 - no copy is only slower: steps.csv is the record
        return False
    finally:
        source.close()


def _encoding(types: "dict[str, pa.DataType]") -> dict[str, object]:
    """How a copy's columns are written. Times and step numbers are nearly all distinct, so a dictionary only grows
    them (and is decoded on every read): times split by byte (their high bytes repeat), step numbers as deltas.
    LZ4, not zstd: on benchmarks/scale.py's 5 M-step capture (2-core x86_64 VM, loaded) the copy took 39 MB instead of zstd's 63 MB
    with dictionaries, and reading compare's seven columns 0.12 s of CPU instead of 0.27 s."""
    import pyarrow as pa

    split = {"t": "BYTE_STREAM_SPLIT"}
    split["step"] = (
        "DELTA_BINARY_PACKED" if pa.types.is_integer(types["step"]) else "BYTE_STREAM_SPLIT"
    )
    return {
        "compression": "lz4",
        "use_dictionary": [c for c in types if c not in split],
        "column_encoding": split,
    }


def _plain(path: Path, size: int) -> bool:
    """Whether the file starts with the documented header and ends with a newline (anything else, a torn last line
    or another header, is left to the CSV reader, which says what is wrong)."""
    header = (",".join(STEP_COLUMNS) + "\n").encode()
    try:
        with open_plain(path) as f:
            if f.readline() != header:
                return False
            f.seek(size - 1)
            return f.read(1) == b"\n"
    except OSError:
        return False
