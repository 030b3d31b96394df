"""``gpumon runs``' rows: each run's summary, from run.json alone, kept in the user's cache while run.json is unchanged.

A finished run's row (its ``RunSummary``) depends on its run.json only (the summary the recorder wrote into it, or the
one computed once into the user's cache for an older run: ``trace.summary_of``). So the rows of a runs folder are
kept in one file of the user's cache (``$XDG_CACHE_HOME/gpumon/listings``, never in the runs folder), each with the
identity of the run.json it came from (device, inode, size, mtime_ns, ctime_ns): a later listing stats each run.json
and reads only those that changed. A run still recording, or one that does not read (damaged), is read every time;
so is one whose run.json changed within the last second (``FRESH_NS``: a file's times advance by a clock tick of a
few milliseconds, so a second change of the same size within one tick would keep its identity).

The first listing of a folder reads every run.json (``runrecord.read_head``: the fields a row shows, each through
RunMeta's own check, ``damaged: <reason>`` rows): what it costs per run beyond ``json.loads`` is measured by ``benchmarks/scale.py`` (README).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from gpumon.core.records.decode import read_json
from gpumon.core.store import columnar
from gpumon.core.store.runner import RECORDING, RunnerInfo
from gpumon.core.store.runrecord import (
    DamagedRun,
    RunSummary,
    TraceError,
    head_row,
    read_head,
    read_meta,
    recorded_summary,
)
from gpumon.core.store.runsfolder import run_names
from gpumon.errors import UsageError
from gpumon.safewrite import ensure_folder, write_text

LAYOUT = 2
# the cache's rows hold no cycle, and it is read by nobody but this module: no check, no spaces (a tenth of its writing)
_ENCODER = json.JSONEncoder(check_circular=False, separators=(",", ":"))
FRESH_NS = 1_000_000_000  # a run.json changed this recently is read again next time (the module's docstring)


def listing(runs_dir: Path, newest: int | None = None) -> tuple[list[RunSummary | DamagedRun], int]:
    """The rows of the runs below ``runs_dir``, newest first (only the ``newest`` of them, if given), and how many
    older runs were left out."""
    names = run_names(runs_dir)
    where = columnar.user_cache_path(runs_dir, "listings", (), ".json")
    held = _read(where)
    settled = (
        time.time_ns() - FRESH_NS
    )  # a run.json changed since may change again within its clock tick
    folder = os.fspath(runs_dir)
    rows: list[RunSummary | DamagedRun] = []
    kept: dict[str, Any] = {}
    left = 0
    for at in range(len(names) - 1, -1, -1):
        name = names[at]
        identity = _identity(os.path.join(folder, name, "run.json"))
        if identity is None:
            continue  # not a run
        if newest is not None and len(rows) == newest:
            left = sum(os.path.isfile(os.path.join(folder, n, "run.json")) for n in names[: at + 1])
            break
        entry = held.get(name)
        kept_row = _row(name, entry[1]) if entry is not None and entry[0] == identity else None
        row = kept_row if kept_row is not None else _read_row(runs_dir / name)
        rows.append(row)
        if isinstance(row, RunSummary) and row.status != RECORDING and identity[-1] < settled:
            kept[name] = entry if kept_row is not None else [identity, _json(row)]
    if where is not None and any(held.get(name) is not entry for name, entry in kept.items()):
        _write(where, {**held, **kept})
    return rows, left


def _identity(path: str) -> list[int] | None:
    """What the row read from run.json at ``path`` is valid for (None: no run.json there). Its last item is when
    the file last changed (its ctime, which no one can set back)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _read_row(run_dir: Path) -> RunSummary | DamagedRun:
    """The row of ``run_dir``: from the fields of its run.json a row shows where that holds its summary (``read_head``),
    else from its steps."""
    try:
        head = read_head(run_dir)
        summary = recorded_summary(head)
        if summary is not None:
            return head_row(run_dir, head, summary)
        # deferred: the tables' reader, for a run recorded before summaries or still recording (trace.summary_of);
        # with it at the top, gpumon runs started in 100 M more instructions (callgrind, benchmarks/scale.py's runs)
        from gpumon.core.store.trace import Run, summarize

        return summarize(Run(run_dir, read_meta(run_dir)))
    except TraceError as exc:  # run.json does not read, or a table it needs does not
        return DamagedRun(run_dir, str(exc))


def _read(where: Path | None) -> dict[str, list[Any]]:
    """The kept entries by run name, each ``[identity, row]`` (none: no cache, or one that does not read as this
    layout)."""
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
        if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list)
    }


def _write(where: Path, rows: dict[str, Any]) -> None:
    try:
        ensure_folder(where.parent, mode=0o700)
        write_text(where, _ENCODER.encode({"layout": LAYOUT, "runs": rows}), replace=True)
    except (OSError, UsageError):
        pass  # no cache is only slower


def _json(row: RunSummary) -> list[Any]:
    """A row as the cache keeps it: its fields but the name (the entry's key), in ``_row``'s order."""
    runner = row.runner
    return [
        row.label,
        row.mode,
        row.share,
        row.status,
        row.workloads,
        None if math.isnan(row.duration_s) else row.duration_s,
        {k: None if math.isnan(v) else v for k, v in row.rates.items()},
        None if runner is None else runner.to_json(),
        row.device,
        row.steps,
    ]


def _row(name: str, entry: Any) -> RunSummary | None:
    """A kept row, or None where it does not read as one (then the run is read again)."""
    try:
        label, mode, share, status, workloads, duration, rates, runner, device, steps = entry
        return RunSummary(
            name=name,
            label=str(label),
            mode=str(mode),
            share=str(share),
            status=str(status),
            workloads=str(workloads),
            duration_s=math.nan if duration is None else float(duration),
            rates={str(k): math.nan if v is None else float(v) for k, v in rates.items()},
            runner=RunnerInfo.from_json(runner),
            device=str(device),
            steps={str(k): int(v) for k, v in steps.items()},
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
