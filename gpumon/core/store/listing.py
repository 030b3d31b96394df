"""``gpumon runs``' rows: each run's summary, from run.json alone, kept in the user's cache while run.json is unchanged.

A finished run's row (its ``RunSummary``) depends on its run.json only (the summary the recorder wrote into it, or the
one computed once into the user's cache for an older run: ``trace.summary_of``). So the rows of a runs folder are
kept in one file of the user's cache (``$XDG_CACHE_HOME/gpumon/listings``, never in the runs folder), each with the
identity of the run.json it came from (device, inode, size, mtime_ns): a later listing stats each run.json and reads
only those that changed. A run still recording, or one that does not read (damaged), is read every time.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpumon.core.records.decode import read_json
from gpumon.core.store import columnar
from gpumon.core.store.runner import RECORDING, RunnerInfo
from gpumon.core.store.trace import (
    DamagedRun,
    RunSummary,
    TraceError,
    load_run,
    run_names,
    summarize,
)
from gpumon.errors import UsageError
from gpumon.safewrite import ensure_folder, write_text

LAYOUT = 1


def listing(runs_dir: Path, newest: int | None = None) -> tuple[list[RunSummary | DamagedRun], int]:
    """The rows of the runs below ``runs_dir``, newest first (only the ``newest`` of them, if given), and how many
    older runs were left out."""
    names = run_names(runs_dir)
    where = columnar.user_cache_path(runs_dir, "listings", (), ".json")
    held = _read(where)
    rows: list[RunSummary | DamagedRun] = []
    kept: dict[str, Any] = {}
    for at in range(len(names) - 1, -1, -1):
        name = names[at]
        identity = _identity(runs_dir / name / "run.json")
        if identity is None:
            continue  # not a run
        if newest is not None and len(rows) == newest:
            left = sum(os.path.isfile(runs_dir / n / "run.json") for n in names[: at + 1])
            break
        entry = held.get(name)
        kept_row = _row(entry["row"]) if entry is not None and entry["id"] == identity else None
        row = kept_row if kept_row is not None else _read_row(runs_dir / name)
        rows.append(row)
        if isinstance(row, RunSummary) and row.status != RECORDING:
            kept[name] = {"id": identity, "row": _json(row)}
    else:
        left = 0
    if where is not None and any(held.get(name) != entry for name, entry in kept.items()):
        _write(where, {**held, **kept})
    return rows, left


def _identity(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _read_row(run_dir: Path) -> RunSummary | DamagedRun:
    try:
        return summarize(load_run(run_dir))
    except TraceError as exc:  # run.json does not read, or a table it needs does not
        return DamagedRun(run_dir, str(exc))


def _read(where: Path | None) -> dict[str, Any]:
    """The kept rows by run name (none: no cache, or one that does not read as this layout)."""
    if where is None:
        return {}
    try:
        data = read_json(where, max_bytes=256 << 20)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("layout") != LAYOUT:
        return {}
    rows = data.get("runs")
    if not isinstance(rows, dict):
        return {}
    return {
        name: entry
        for name, entry in rows.items()
        if isinstance(entry, dict) and isinstance(entry.get("id"), list) and "row" in entry
    }


def _write(where: Path, rows: dict[str, Any]) -> None:
    try:
        ensure_folder(where.parent, mode=0o700)
        write_text(where, json.dumps({"layout": LAYOUT, "runs": rows}), replace=True)
    except (OSError, UsageError):
        pass  # no cache is only slower


def _json(row: RunSummary) -> dict[str, Any]:
    out = asdict(row)
    out["duration_s"] = None if math.isnan(row.duration_s) else row.duration_s
    out["rates"] = {k: None if math.isnan(v) else v for k, v in row.rates.items()}
    out["runner"] = row.runner.to_json() if row.runner is not None else None
    return out


def _row(entry: object) -> RunSummary | None:
    """A kept row, or None where it does not read as one (then the run is read again)."""
    if not isinstance(entry, dict):
        return None
    try:
        rates = {str(k): math.nan if v is None else float(v) for k, v in entry["rates"].items()}
        duration = entry["duration_s"]
        return RunSummary(
            name=str(entry["name"]),
            label=str(entry["label"]),
            mode=str(entry["mode"]),
            share=str(entry["share"]),
            status=str(entry["status"]),
            workloads=str(entry["workloads"]),
            duration_s=math.nan if duration is None else float(duration),
            rates=rates,
            runner=RunnerInfo.from_json(entry["runner"]),
            device=str(entry["device"]),
            steps={str(k): int(v) for k, v in entry["steps"].items()},
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
