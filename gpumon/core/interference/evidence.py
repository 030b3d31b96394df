"""Evidence for the slowdown attribution (gpumon/core/interference/attribution.py), from run directories or live records.

The small tables (device, processes, host) are parsed by pyarrow's CSV reader where it reads them as
the csv module does (``trace.csv_columns``), else with the csv module; the steps table, the one
that grows to millions of rows in an hour, a row group at a time and only those of the window asked for
(``core/store/stepchunks.py``: its steps.parquet copy with pyarrow alone, else the table once), imported only
when evidence is asked for: the live line's first frame never waits for it.
Step times come from the callers (the one definition of rates), never from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from gpumon.core.interference.attribution import Box, Side, link_capacity
from gpumon.core.records.machine import GpuInfo
from gpumon.core.store.stepchunks import window_sums
from gpumon.core.store import tablecheck
from gpumon.core.store.trace import TABLES, Run, TraceError, csv_columns

if TYPE_CHECKING:
    import numpy as np

NAN = math.nan
TEXT_COLUMNS = ("per_core",)  # host.csv: each core's CPU %, space-separated in one cell
DEVICE_FIELDS = {
    "gpu_util": "gpu_util",
    "pcie_rx_bps": "pcie_rx_bps",
    "sm_active": "sm_active_pct",
    "sm_occupancy": "sm_occupancy_pct",
}


@dataclass(frozen=True)
class Window:
    """Where one job's side was measured: a run, the job's slot there, and the interval in run time."""

    run: Run
    slot: str
    start: float
    end: float


def _float(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else NAN
    except ValueError:
        return NAN


def _parsed(run: Run, table: str) -> "dict[str, np.ndarray] | None":
    """The columns of a small table at once (``trace.csv_columns``, pyarrow), ``process`` as text as the csv module
    gives it, those of numbers as floats (not ``TEXT_COLUMNS``); None where the csv module reads it instead (a row
    of the wrong width, which it skips; text in a number, which it reads as NaN)."""
    # deferred: +0.07 s CPU (numpy) on a session's start
    import numpy as np

    wanted = [c for c in TABLES[table] if c not in TEXT_COLUMNS]
    try:
        parsed = csv_columns(run.table_bytes(table), wanted, jobs_as_pandas=False)
    except TraceError:
        return None
    if parsed is None:
        return None
    codes, names, columns = parsed
    if "process" in wanted:
        columns["process"] = np.array(names, dtype=object)[codes.astype(int)]
    return columns


def _column(run: Run, table: str, column: str) -> "np.ndarray":
    """One column of a small table, numbers as floats (NaN: empty or not a number; ``process`` as text),
    read once per finished run; none when the run lacks the table or it is unreadable."""

    def read() -> "np.ndarray":
        # deferred: +0.07 s CPU (numpy) on a session's start
        import numpy as np

        whole = run.cached(
            f"evidence:{table}", run.path / f"{table}.csv", lambda: _parsed(run, table)
        )
        if whole is not None and column in whole:
            return whole[column]
        try:
            values = run.columns(table)[column]
        except TraceError:
            values = []
        if column == "process":
            return np.array(values, dtype=object)
        try:
            return np.array(
                values, dtype=float
            )  # numpy parses the texts at once; an empty cell stops it
        except ValueError:
            return np.array([_float(v) for v in values], dtype=float)

    return run.cached(f"evidence:{table}:{column}", run.path / f"{table}.csv", read)


def window_values(
    run: Run, table: str, column: str, start: float, end: float, slot: str | None = None
) -> "np.ndarray":
    """The known values of ``column`` in the rows of a sampled ``table`` timed inside ``[start, end]`` (of ``slot``
    only, if given); none when the run lacks the table. What compare's distributions and the means here share."""
    # deferred: +0.07 s CPU (numpy) on a session's start
    import numpy as np

    t, values = _column(run, table, "t"), _column(run, table, column)
    with np.errstate(
        invalid="ignore"
    ):  # NaN: not known; beyond SAMPLE_LIMIT (1e308): no measurement
        keep = (t >= start) & (t <= end) & (np.abs(values) <= tablecheck.SAMPLE_LIMIT)
    if slot is not None:
        keep &= _column(run, table, "process") == slot
    return values[keep]


def _window_mean(w: Window, table: str, column: str, slot: str | None = None) -> float:
    """The mean of the known values of ``column`` over the rows of ``table`` inside ``w`` (of ``slot`` only, if given)."""
    values = window_values(w.run, table, column, w.start, w.end, slot)
    return float(values.mean()) if len(values) else NAN


def _step_means(w: Window) -> tuple[float, float]:
    """Mean copy seconds and copy bytes per post-warm-up step of ``w.slot`` in the window (NaN: none), from the steps'
    row groups (``stepchunks.window_sums``: those the window holds whole from their sums; no copy is made)."""
    try:
        count, (copy_s, copy_bytes) = window_sums(w.run, w.slot, w.start, w.end)
    except TraceError:
        return NAN, NAN
    return (copy_s / count, copy_bytes / count) if count else (NAN, NAN)


def run_side(w: Window, step_s: float) -> Side:
    """What was measured for ``w.slot`` inside ``[w.start, w.end]`` of ``w.run``; ``step_s`` from the caller."""
    copy_s, copy_bytes = _step_means(w)
    return Side(
        step_s=step_s,
        copy_s=copy_s,
        copy_bytes=copy_bytes,
        cpu_pct=_window_mean(w, "processes", "cpu_pct", w.slot),
        host_cpu_pct=_window_mean(w, "host", "cpu_pct"),
        **{name: _window_mean(w, "device", column) for name, column in DEVICE_FIELDS.items()},
    )


def cores_busy(w: Window, cores: frozenset[int]) -> float:
    """How busy ``cores`` were inside ``w``, with anything (the job's own work included), as a share 0..1: host.csv's
    per-core CPU % averaged over those cores and the window's rows (NaN: no per-core samples, as in runs recorded
    before them, or cores the samples do not hold)."""

    def read() -> tuple[list[float], list[str]]:
        try:
            columns = w.run.columns("host")
        except TraceError:
            return [], []
        return [_float(t) for t in columns["t"]], columns["per_core"]

    if not cores:
        return NAN
    times, texts = w.run.cached("evidence:host:per_core", w.run.path / "host.csv", read)
    means = []
    for t, text in zip(times, texts):
        try:
            each = [float(x) for x in text.split()]
        except ValueError:
            continue
        if w.start <= t <= w.end and max(cores) < len(each):
            means.append(sum(each[c] for c in cores) / len(cores))
    return sum(means) / len(means) / 100 if means else NAN


def merge(sides: Sequence[tuple[Side, float]], step_s: float) -> Side:
    """Sides of repeats as one, each field weighted by its window's duration (unknown fields skipped)."""

    def weighted(name: str) -> float:
        pairs = [
            (getattr(s, name), w) for s, w in sides if not math.isnan(getattr(s, name)) and w > 0
        ]
        total = sum(w for _, w in pairs)
        return sum(v * w for v, w in pairs) / total if total else NAN

    names = [f for f in Side.__dataclass_fields__ if f != "step_s"]
    return Side(step_s=step_s, **{name: weighted(name) for name in names})


def cores(meta: dict[str, Any] | None) -> frozenset[int]:
    """The CPUs a workload could run on, from the meta it reported (run.json's or its probe's; empty: unknown)."""
    affinity = meta.get("affinity") if meta is not None else None
    if isinstance(affinity, list) and all(isinstance(c, int) for c in affinity):
        return frozenset(affinity)
    return frozenset()


def workload_cores(run: Run, slot: str) -> frozenset[int]:
    entry = run.meta.workload(slot)
    return cores(entry.meta) if entry is not None else frozenset()


def has_nvml_data(run: Run) -> bool:
    """run.json says NVML was available and device.csv holds at least one GPU utilisation reading."""
    if not run.meta.nvml.available:
        return False
    # deferred: +0.07 s CPU (numpy) on a session's start
    import numpy as np

    return bool((~np.isnan(_column(run, "device", "gpu_util"))).any())


def device_of(run: Run) -> str:
    """``cpu`` or ``cuda[:N]``: what the workloads said they trained on, else run.json's device ("?" if neither)."""
    return run.trained_on


def device_identity(run: Run) -> tuple[str, str]:
    """What must match between runs compared: the kind (``cpu``, ``cuda``) and the GPU's name ("" unknown)."""
    device = device_of(run)
    kind = device.split(":")[0]
    name = run.gpu.name if run.gpu is not None else None
    return kind, (name or "") if kind == "cuda" else ""


def mixed_devices(runs: Sequence[Run]) -> str:
    """A one-line complaint when ``runs`` come from different kinds of device or GPU models, else ""."""
    found: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        found.setdefault(device_identity(run), []).append(run.path.name)
    kinds = {kind for kind, _ in found if kind != "?"}
    names = {name for _, name in found if name}
    if len(kinds) < 2 and len(names) < 2:
        return ""
    listing = "; ".join(
        f"{(kind + ' ' + name).strip()} ({', '.join(v)})" for (kind, name), v in found.items()
    )
    return f"runs come from different devices, so their rates cannot be compared: {listing}"


def box_of(runs: Sequence[Run], h2d_bps: float | None = None) -> Box:
    """The machine of ``runs`` (assumed one: callers check): device, NVML data in every run, link capacity."""
    first = runs[0].meta
    gpu = first.gpu or GpuInfo()
    link = link_capacity(gpu.pcie_max_bps, h2d_bps, gpu.pcie_gen, gpu.pcie_width)
    return Box(
        device=device_of(runs[0]),
        nvml=all(has_nvml_data(r) for r in runs),
        link=link,
        host_cpus=(first.host.cpus if first.host is not None else None) or 0,
        pcie_method=gpu.pcie_method,
        share=next((r.share for r in runs if r.mode == "shared"), "timeslice"),
    )


def copy_bandwidth(side: Side) -> float:
    """Bytes over the CUDA-event time of the copies (includes time-slice waits under sharing)."""
    if side.copy_s > 0 and not math.isnan(side.copy_bytes):
        return side.copy_bytes / side.copy_s
    return NAN
