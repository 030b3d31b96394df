"""Run directory reader and CSV/Parquet export (format: docs/trace.md).

Only complete lines are read: a trailing line without its newline (what a kill
can leave) is dropped. pandas is imported only by the functions that return
DataFrames, so listing runs stays light.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from gpumon.core.model import DEVICE_COLUMNS, GPM_COLUMNS, HOST_COLUMNS, PROCESS_COLUMNS, STEP_COLUMNS
from gpumon.core.mps import share_of
from gpumon.core.rates import exclusive_rate
from gpumon.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1
TABLES: dict[str, tuple[str, ...]] = {
    "steps": STEP_COLUMNS,
    "device": DEVICE_COLUMNS,
    "processes": PROCESS_COLUMNS,
    "host": HOST_COLUMNS,
}
# Headers of runs recorded before columns were added: read as the current layout, new columns empty.
OLDER_HEADERS: dict[str, tuple[str, ...]] = {
    "device": tuple(c for c in DEVICE_COLUMNS if c not in GPM_COLUMNS),
}


class TraceError(UsageError):
    """A run directory that is missing, unreadable or corrupt."""


def complete_text(path: Path) -> str:
    """The file's text up to its last newline (a torn last line is dropped)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror}") from None
    end = data.rfind(b"\n")
    try:
        return data[: end + 1].decode("utf-8") if end >= 0 else ""
    except UnicodeDecodeError:
        raise TraceError(f"{path} is not a gpumon trace (not UTF-8 text)") from None


@dataclass(frozen=True)
class Run:
    """One run directory: its metadata and lazy access to its tables."""

    path: Path
    meta: dict[str, Any]

    @property
    def label(self) -> str:
        return str(self.meta.get("label", self.path.name))

    @property
    def mode(self) -> str:
        return str(self.meta.get("mode", "?"))

    @property
    def share(self) -> str:
        """How the jobs shared the GPU: ``timeslice`` (also for runs recorded before modes), ``mps``..."""
        return share_of(self.meta)

    @property
    def workloads(self) -> list[dict[str, Any]]:
        return list(self.meta.get("workloads", []))

    def table_text(self, table: str) -> str:
        path = self.path / f"{table}.csv"
        if not path.exists():
            raise TraceError(f"{self.path}: missing {table}.csv")
        text = complete_text(path)
        header = text.split("\n", 1)[0].split(",") if text else []
        expected = list(TABLES[table])
        if header == list(OLDER_HEADERS.get(table, ())):
            return _widen(text, expected[len(header):])
        if header != expected:
            raise TraceError(f"{path}: corrupt header (expected {','.join(expected)})")
        return text

    def rows(self, table: str) -> Iterator[dict[str, str]]:
        """Rows as dicts of strings, with the csv module (no pandas)."""
        yield from csv.DictReader(io.StringIO(self.table_text(table)))

    def frame(self, table: str) -> "pd.DataFrame":
        """A table as a pandas DataFrame with the documented columns."""
        import pandas as pd

        try:
            return pd.read_csv(io.StringIO(self.table_text(table)))
        except (ValueError, pd.errors.ParserError) as exc:
            raise TraceError(f"{self.path / (table + '.csv')}: corrupt ({str(exc).splitlines()[0]})") from None

    def steps(self) -> "pd.DataFrame":
        return self.frame("steps")

    def device(self) -> "pd.DataFrame":
        return self.frame("device")

    def processes(self) -> "pd.DataFrame":
        return self.frame("processes")

    def host(self) -> "pd.DataFrame":
        return self.frame("host")


def _widen(text: str, added: list[str]) -> str:
    """An older table's text in the current layout: the ``added`` columns appended, empty in every row."""
    pad = "," * len(added)
    lines = text.split("\n")
    header = ",".join([lines[0], *added])
    return "\n".join([header, *(line + pad if line else line for line in lines[1:])])


def load_run(path: str | os.PathLike[str]) -> Run:
    """Open a run directory, checking that run.json is a gpumon trace of a known schema."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise TraceError(f"{root}: no such run directory")
    meta_path = root / "run.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceError(f"{root}: not a gpumon run (no run.json)") from None
    except OSError as exc:
        raise TraceError(f"cannot read {meta_path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TraceError(f"{meta_path}: corrupt (not valid JSON)") from None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA_VERSION:
        raise TraceError(f"{meta_path}: not a gpumon run of schema {SCHEMA_VERSION}")
    if not isinstance(meta.get("workloads"), list):
        raise TraceError(f"{meta_path}: corrupt (no workloads list)")
    return Run(root, meta)


def list_runs(runs_dir: Path) -> list[Run]:
    """Every readable run directly below ``runs_dir``, oldest first (unreadable ones skipped)."""
    if not runs_dir.is_dir():
        raise TraceError(f"{runs_dir}: no such runs directory")
    runs = []
    for child in sorted(runs_dir.iterdir()):
        if (child / "run.json").is_file():
            try:
                runs.append(load_run(child))
            except TraceError:
                continue
    return runs


@dataclass(frozen=True)
class RunSummary:
    """What ``gpumon runs`` prints for one run."""

    name: str
    label: str
    mode: str
    share: str
    status: str
    workloads: str
    duration_s: float
    rates: dict[str, float]


def exclusive_rates(run: Run) -> dict[str, float]:
    """Each process's ``exclusive_rate`` over its post-warm-up steps, read without pandas."""
    points: dict[str, list[tuple[float, int]]] = {}
    for r in run.rows("steps"):
        if r["warmup"] == "1" or not r["t"] or not r["step"]:
            continue
        try:
            points.setdefault(r["process"], []).append((float(r["t"]), int(r["step"])))
        except ValueError:
            raise TraceError(f"{run.path / 'steps.csv'}: corrupt row {r}") from None
    out = {}
    for key, pairs in points.items():
        pairs.sort(key=lambda p: p[0])
        out[key] = exclusive_rate([p[0] for p in pairs], [p[1] for p in pairs])
    return out


def baseline_rate(slot: str, path: str | os.PathLike[str]) -> float:
    """The exclusive rate of ``slot`` in a recorded run (its only job's rate if it ran one job), for ``--baseline``."""
    run = load_run(path)
    known = {k: v for k, v in exclusive_rates(run).items() if not math.isnan(v)}
    if slot in known:
        return known[slot]
    if len(known) == 1:
        return next(iter(known.values()))
    raise UsageError(f"baseline run {run.path.name} has no post-warm-up rate for {slot}")


def summarize(run: Run) -> RunSummary:
    """What ``gpumon runs`` shows: metadata and each process's exclusive rate (post-warm-up slope)."""
    specs = " + ".join(f"{w.get('process', '?')}={w.get('spec', '?')}" for w in run.workloads)
    return RunSummary(
        name=run.path.name,
        label=run.label,
        mode=run.mode,
        share=run.share,
        status=str(run.meta.get("status", "?")),
        workloads=specs,
        duration_s=float(run.meta.get("duration_s") or math.nan),
        rates=exclusive_rates(run),
    )


def export(run: Run, out_dir: Path, fmt: str = "csv") -> list[Path]:
    """Write each table as clean CSV (complete rows only) or Parquet into ``out_dir``."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceError(f"cannot create {out_dir}: {exc.strerror}") from None
    written = []
    for table in TABLES:
        if not (run.path / f"{table}.csv").exists():
            continue
        target = out_dir / f"{table}.{fmt}"
        if fmt == "csv":
            target.write_text(run.table_text(table), encoding="utf-8")
        else:
            run.frame(table).to_parquet(target, index=False)
        written.append(target)
    return written
