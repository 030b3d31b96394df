"""What every report needs: the cells with their records and runs, rates with intervals, markdown."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from gpumon.analysis.text import fmt
from gpumon.core.records.slots import SLOTS
from gpumon.core.store.others import disturbances
from gpumon.core.store.trace import Run, TraceError, load_run
from gpumon.experiments.runner.cells import Cell
from gpumon.experiments.runner.manifest import OK, CellRecord, Manifest
from gpumon.experiments.runner.spec import ExperimentSpec, Settings
from gpumon.safewrite import replacing, write_text
from gpumon.analysis import rates, slowdown
from gpumon.analysis.slowdown import Estimate

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


NA = "n/a"


@dataclass
class Context:
    """One experiment directory's cells, records and runs, as the reports read them."""

    spec: ExperimentSpec
    settings: Settings
    preset: str
    device: str
    cells: list[Cell]
    manifest: Manifest
    predict: bool = (
        False  # --predict: the pairwise report puts each pair's prediction beside its measurement
    )
    force: bool = (
        False  # --force: outputs already in a folder that is not this experiment's are replaced
    )
    _runs: dict[str, Run | None] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.manifest.directory

    @property
    def replace(self) -> bool:
        """Whether outputs already there are replaced: in this experiment's own folder (one that held its
        manifest, or where it saved one: a folder of other files was refused before, unless ``--force``)."""
        return self.force or self.manifest.own

    def output_text(self, name: str, text: str) -> Path:
        """Write the output ``name`` (gpumon.safewrite: never through a symlink)."""
        write_text(self.out / name, text, replace=self.replace)
        return self.out / name

    def output_csv(self, frame: "pd.DataFrame", name: str) -> Path:
        with replacing(self.out / name, replace=self.replace) as f:
            frame.to_csv(f, index=False)
        return self.out / name

    def save(self, fig: "Figure", name: str) -> Path:
        """The PNG ``name`` of ``fig``."""
        with replacing(self.out / name, replace=self.replace, binary=True) as f:
            fig.savefig(f, format="png", dpi=100)
        return self.out / name

    def record(self, cell: Cell) -> CellRecord | None:
        record = self.manifest.records.get(cell.id)
        return record if record is not None and record.config == cell.config() else None

    def run(self, cell: Cell) -> Run | None:
        """The cell's run when it completed (and still reads), else None."""
        if cell.id not in self._runs:
            record = self.record(cell)
            run = None
            if record is not None and record.status == OK and record.run:
                try:
                    run = load_run(self.out / record.run)
                except TraceError:
                    run = None
            self._runs[cell.id] = run
        return self._runs[cell.id]

    def runs(self, cells: Sequence[Cell]) -> list[Run]:
        return [r for r in (self.run(c) for c in cells) if r is not None]

    def status(self, cells: Sequence[Cell]) -> str:
        """``ok`` when any cell completed, else the first cell's status and reason (``not run`` if none)."""
        records = [self.record(c) for c in cells]
        if any(r is not None and r.status == OK for r in records):
            return OK
        for record in records:
            if record is not None:
                return f"{record.status}: {record.reason}" if record.reason else record.status
        return "not run"

    def link(self, path: Path | str) -> str:
        """A path relative to the experiment directory, as markdown links want it."""
        path = Path(path)
        return str(path.relative_to(self.out)) if path.is_absolute() else str(path)


def run_links(ctx: Context, cells: Sequence[Cell]) -> str:
    """Markdown links to the run directories of the cells that completed (``r1``, ``r2``... by repeat)."""
    links = []
    for cell in cells:
        record = ctx.record(cell)
        if record is not None and record.status == OK and record.run:
            links.append(f"[r{cell.repeat}]({record.run})")
    return " ".join(links)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + [
        "| " + " | ".join(cell(c) for c in row) + " |" for row in rows
    ]


def fmt_ci(e: "Estimate", digits: int = 2) -> str:
    """``1.23 (1.10–1.40)``: the estimate and its 95 % interval (parentheses so it can sit in a link)."""
    if math.isnan(e.value):
        return NA
    if not e.has_interval:
        return fmt(e.value, digits)
    return f"{fmt(e.value, digits)} ({fmt(e.low, digits)}–{fmt(e.high, digits)})"


def fmt_share(x: float) -> str:
    return NA if math.isnan(x) else f"{100 * x:.1f}%"


def exclusive_estimate(runs: Sequence[Run], slot: str = "A", seed: int = 0) -> "Estimate":
    """A job's steady-state iterations/s over its runs (repeats), with the bootstrap interval compare uses."""
    rng = np.random.default_rng(seed)
    samples = []
    for run in runs:
        c = rates.curve(run, slot)
        if c is not None:
            samples.append(slowdown.window_rates([c], c.span(), rng))
    if not samples:
        return Estimate(math.nan)
    combined = slowdown.combine(samples, rng)
    replicates = None if combined.replicates is None else combined.replicates[:, 0]
    return slowdown.interval(float(combined.points[0]), replicates)


def inverse(e: "Estimate", factor: float = 1.0) -> "Estimate":
    """``factor / e`` with the interval's bounds swapped (time per iteration from a rate)."""

    def inv(x: float) -> float:
        return factor / x if x and not math.isnan(x) else math.nan

    return Estimate(inv(e.value), inv(e.high), inv(e.low))


def scaled(e: "Estimate", factor: float) -> "Estimate":
    return Estimate(e.value * factor, e.low * factor, e.high * factor)


def workload_meta(run: Run, slot: str = "A") -> dict[str, Any]:
    """The ``meta`` a workload reported (model, batch, threads, ignored options...)."""
    entry = run.meta.workload(slot)
    return dict(entry.meta or {}) if entry is not None else {}


def median_metric(runs: Sequence[Run], slot: str, metric: str) -> float:
    """Median over the runs' post-warm-up steps of copy bandwidth, or of sampled CPU % / GPU util."""
    values: list[np.ndarray] = []
    for run in runs:
        if metric == "copy_bandwidth":
            rows = rates.post_warmup(run, slot)
            rows = rows[(rows["copy_bytes"] > 0) & (rows["copy_s"] > 0)]
            values.append((rows["copy_bytes"] / rows["copy_s"]).to_numpy(dtype=float))
        elif metric == "copy_share":
            rows = rates.post_warmup(run, slot)
            rows = rows[rows["iter_s"] > 0]
            values.append((rows["copy_s"].fillna(0) / rows["iter_s"]).to_numpy(dtype=float))
        elif metric == "cpu_pct":
            frame = run.processes()
            values.append(frame[frame["process"] == slot]["cpu_pct"].to_numpy(dtype=float))
        elif metric == "gpu_util":
            values.append(run.device()["gpu_util"].to_numpy(dtype=float))
    pooled = np.concatenate(values) if values else np.array([])
    pooled = pooled[np.isfinite(pooled)]
    return float(np.median(pooled)) if len(pooled) else math.nan


def figure(rows: int, cols: int, width: float = 5.0, height: float = 3.4) -> "Figure":
    """A matplotlib figure without pyplot (no display, no global state)."""
    # deferred: matplotlib is the analysis extra (+0.44 s CPU)
    from matplotlib.figure import Figure

    return Figure(figsize=(width * cols, height * rows), layout="constrained")


def cells_section(ctx: Context) -> list[str]:
    """Every cell with its status and run directory: what each table cell traces back to."""
    rows = []
    for cell in ctx.cells:
        record = ctx.record(cell)
        if record is None:
            rows.append([cell.id, "not run", "", ""])
            continue
        run = f"[{Path(record.run).name}]({record.run})" if record.run else ""
        detail = record.reason or record.note or ""
        run_read = ctx.run(cell)
        duration = run_read.meta.duration_s if run_read is not None else None
        others = (
            disturbances(run_read, [(0.0, duration)])
            if run_read is not None and duration is not None
            else []
        )
        status = record.status
        if (
            others
        ):  # the whole capture's window: a cell is marked when anything else used the GPU in it
            status += " ⚠ disturbed"
            detail = "; ".join(
                x
                for x in (detail, "not alone on the GPU: " + "; ".join(d.phrase() for d in others))
                if x
            )
        profiles = ", ".join(f"[{k}]({v})" for k, v in sorted(record.profiles.items()))
        rows.append([cell.id, status, run, "; ".join(x for x in (detail, profiles) if x)])
    return [
        "## Cells",
        "",
        "Every number above comes from these runs (`cells.json` has the commands).",
        "",
    ] + md_table(["cell", "status", "run directory", "reason / note / profiles"], rows)


def recorded_profiles(ctx: Context, prefix: str) -> Iterator[tuple[Path, str, str | None]]:
    """(file, job, partner or None) of every ``<prefix>-<slot>`` profile of the cells that ran."""
    for cell in ctx.cells:
        record = ctx.record(cell)
        if record is None or ctx.run(cell) is None:
            continue
        for i, (slot, key) in enumerate(zip(SLOTS, cell.keys)):
            path = record.profiles.get(f"{prefix}-{slot}")
            if path:
                partner = cell.keys[1 - i] if cell.mode == "shared" else None
                yield ctx.out / path, key, partner
