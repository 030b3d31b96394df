"""Sweeps (threads, input pipeline, batch size, memory cap) and device cost, from exclusive cells."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gpumon.experiments.runner.cells import Cell, point_label
from gpumon.experiments.runner.manifest import OK
from gpumon.experiments.study.results import (
    NA,
    Context,
    exclusive_estimate,
    figure,
    fmt,
    fmt_ci,
    inverse,
    md_table,
    median_metric,
    run_links,
    scaled,
    workload_meta,
)
from gpumon.experiments.runner.spec import device_kind

if TYPE_CHECKING:
    from gpumon.analysis.slowdown import Estimate


@dataclass
class Point:
    """One job at one sweep point (or device): its repeats and what they measured."""

    key: str
    spec: str
    point: tuple[tuple[str, str], ...]
    cells: list[Cell]
    status: str
    rate: "Estimate"
    batch: float
    copy_bandwidth: float
    cpu_pct: float
    ignored: dict[str, str]

    @property
    def samples(self) -> "Estimate":
        return scaled(self.rate, self.batch)

    @property
    def ms_per_iter(self) -> "Estimate":
        return inverse(self.rate, 1000.0)


def points(ctx: Context) -> list[Point]:
    """Cells grouped by job and point, in the spec's order."""
    groups: dict[str, list[Cell]] = {}
    for cell in ctx.cells:
        groups.setdefault(cell.group, []).append(cell)
    out = []
    for cells in groups.values():
        first = cells[0]
        runs = ctx.runs(cells)
        meta = workload_meta(runs[0]) if runs else {}
        out.append(
            Point(
                key=first.keys[0],
                spec=first.jobs[0].spec,
                point=first.point,
                cells=cells,
                status=ctx.status(cells),
                rate=exclusive_estimate(runs),
                batch=float(meta.get("batch") or math.nan),
                copy_bandwidth=median_metric(runs, "A", "copy_bandwidth") if runs else math.nan,
                cpu_pct=median_metric(runs, "A", "cpu_pct") if runs else math.nan,
                ignored=dict(meta.get("ignored") or {}),
            )
        )
    return out


def sweep_rows(ctx: Context, job: list[Point], keys: list[str]) -> list[list[str]]:
    rows = []
    for p in job:
        values = dict(p.point)
        head = [values.get(k, "") for k in keys]
        if p.status != OK:
            rows.append(head + [p.status] + [""] * 6)
            continue
        ignored = "; ".join(f"{k} ignored: {why}" for k, why in p.ignored.items() if k in values)
        rows.append(
            head
            + [
                fmt_ci(p.rate),
                fmt_ci(p.ms_per_iter, 1),
                fmt_ci(p.samples, 0),
                fmt(p.copy_bandwidth / 1e9, 2) if not math.isnan(p.copy_bandwidth) else "no copies",
                fmt(p.cpu_pct, 0),
                ignored,
                run_links(ctx, p.cells),
            ]
        )
    return rows


def outcome_lines(job: list[Point], keys: list[str]) -> list[str]:
    """For a one-key sweep: which values completed and which failed (e.g. OOM below a memory cap)."""
    if len(keys) != 1:
        return []
    ok = [dict(p.point)[keys[0]] for p in job if p.status == OK]
    failed = [f"{dict(p.point)[keys[0]]} ({p.status})" for p in job if p.status != OK]
    lines = [f"- completed at {keys[0]} = {', '.join(ok) or 'none'}"]
    if failed:
        lines.append(f"- did not complete at {keys[0]} = {', '.join(failed)}")
    return lines


def sweep_figure(ctx: Context, jobs: dict[str, list[Point]]) -> Path:
    fig = figure(len(jobs), 2, width=max(4.5, 0.8 * max(len(j) for j in jobs.values()) + 2))
    axes = fig.subplots(len(jobs), 2, squeeze=False)
    for (key, job), (left, right) in zip(jobs.items(), axes):
        labels = [point_label(p.point) for p in job]
        x = np.arange(len(job))
        use_samples = all(not math.isnan(p.batch) for p in job if p.status == OK)
        for ax, pick, title in (
            (
                left,
                (lambda p: p.samples) if use_samples else (lambda p: p.rate),
                "samples/s" if use_samples else "iterations/s",
            ),
            (right, lambda p: p.ms_per_iter, "ms per iteration"),
        ):
            estimates = [pick(p) for p in job]
            values = np.array([e.value for e in estimates])
            errors = np.array(
                [
                    [e.value - e.low, e.high - e.value] if e.has_interval else [0, 0]
                    for e in estimates
                ]
            ).T
            ax.bar(
                x, np.nan_to_num(values), yerr=np.nan_to_num(errors), capsize=4, color="tab:blue"
            )
            for i, p in enumerate(job):
                if p.status != OK:
                    ax.text(
                        i,
                        0,
                        p.status.split(":")[0],
                        rotation=90,
                        ha="center",
                        va="bottom",
                        color="tab:red",
                    )
            ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{key}: {title} (95 % CI)", fontsize=9)
    return ctx.save(fig, "sweep.png")


def sweep_section(ctx: Context) -> list[str]:
    everything = points(ctx)
    declared = [k for p in ctx.settings.points for k in p] + list(ctx.settings.sweep)
    keys = list(dict.fromkeys(declared + [k for p in everything for k, _ in p.point]))
    jobs: dict[str, list[Point]] = {}
    for p in everything:
        jobs.setdefault(p.key, []).append(p)
    lines = [
        "## Results",
        "",
        "Each job alone at every point. Rates are steady-state iterations/s (warm-up excluded) with 95 % "
        "intervals (bootstrap within a run, across runs with repeats); samples/s = iterations/s × batch. "
        "Copy bandwidth and CPU % are medians over the run.",
    ]
    headers = [
        *keys,
        "it/s",
        "ms/iteration",
        "samples/s",
        "per-copy bandwidth (GB/s)",
        "CPU %",
        "note",
        "runs",
    ]
    for key, job in jobs.items():
        lines += ["", f"### {key}", "", *md_table(headers, sweep_rows(ctx, job, keys))]
        extra = outcome_lines(job, keys)
        if extra:
            lines += ["", *extra]
    frame = pd.DataFrame(
        [
            {
                "job": p.key,
                "spec": p.spec,
                **dict(p.point),
                "status": p.status,
                "rate": p.rate.value,
                "rate_low": p.rate.low,
                "rate_high": p.rate.high,
                "batch": p.batch,
                "ms_per_iter": p.ms_per_iter.value,
                "copy_bandwidth": p.copy_bandwidth,
                "cpu_pct": p.cpu_pct,
                "runs": ";".join(ctx.link(r.path) for r in ctx.runs(p.cells)),
            }
            for p in everything
        ]
    )
    ctx.output_csv(frame, "sweep.csv")
    lines += ["", "CSV: [sweep.csv](sweep.csv)."]
    if any(p.status == OK for p in everything):
        sweep_figure(ctx, jobs)
        lines += ["", "![sweep](sweep.png)"]
    return lines


@dataclass(frozen=True)
class Cost:
    """One job on one device, priced: seconds and cost per 1000 iterations (95 % intervals)."""

    point: Point
    device: str
    price: float  # per hour, in the spec's currency
    seconds: "Estimate"
    cost: "Estimate"

    @classmethod
    def of(cls, p: Point, per_hour: dict[str, float]) -> Cost:
        device = dict(p.point)["device"]
        price = per_hour[device_kind(device)]
        seconds = inverse(p.rate, 1000.0)
        return cls(p, device, price, seconds, scaled(seconds, price / 3600))

    def row(self, ctx: Context) -> list[str]:
        """Its row of the report's table (the status instead of figures for a point that did not measure)."""
        p = self.point
        if p.status != OK:
            return [p.key, self.device, p.status, "", f"{self.price:g}", "", ""]
        return [
            p.key,
            self.device,
            fmt_ci(p.rate),
            fmt_ci(self.seconds, 1),
            f"{self.price:g}",
            fmt_ci(self.cost, decimals(self.cost.value)),
            run_links(ctx, p.cells),
        ]

    def record(self, ctx: Context, currency: str) -> dict[str, object]:
        """Its row of device_cost.csv."""
        p, seconds, cost = self.point, self.seconds, self.cost
        return {
            "job": p.key,
            "spec": p.spec,
            "device": self.device,
            "status": p.status,
            "rate": p.rate.value,
            "seconds_per_1000": seconds.value,
            "seconds_low": seconds.low,
            "seconds_high": seconds.high,
            "price_per_hour": self.price,
            "cost_per_1000": cost.value,
            "cost_low": cost.low,
            "cost_high": cost.high,
            "currency": currency,
            "runs": ";".join(ctx.link(r.path) for r in ctx.runs(p.cells)),
        }


def cost_section(ctx: Context) -> list[str]:
    """Time and cost per 1000 iterations of each job on each device, from the spec's prices per hour."""
    prices = ctx.spec.prices
    assert prices is not None
    costs = [Cost.of(p, prices.per_hour) for p in points(ctx)]
    by_job: dict[str, dict[str, Point]] = {}
    for c in costs:
        by_job.setdefault(c.point.key, {})[c.device] = c.point
    records = [c.record(ctx, prices.currency) for c in costs]
    ctx.output_csv(pd.DataFrame(records), "device_cost.csv")
    return [
        "## Time and cost per 1000 iterations",
        "",
        f"Seconds per 1000 iterations = 1000 / steady-state it/s; cost = that time × the price per hour "
        f"({prices.currency}, from the spec's [prices]) / 3600. 95 % intervals in parentheses.",
        "",
        *md_table(
            [
                "job",
                "device",
                "it/s",
                "s per 1000 it",
                f"{prices.currency}/h",
                f"{prices.currency} per 1000 it",
                "runs",
            ],
            [c.row(ctx) for c in costs],
        ),
        "",
        *comparison_lines(by_job, prices.per_hour),
        "",
        "CSV: [device_cost.csv](device_cost.csv).",
    ]


def decimals(x: float, significant: int = 3) -> int:
    """Decimal places that show ``x`` (a small cost) with ``significant`` digits."""
    if not x or math.isnan(x):
        return 2
    return max(2, significant - 1 - math.floor(math.log10(abs(x))))


def comparison_lines(by_job: dict[str, dict[str, Point]], per_hour: dict[str, float]) -> list[str]:
    """GPU vs CPU per job: how much faster, how much cheaper, or why there is no GPU side."""
    lines = []
    for key, devices in by_job.items():
        cpu = next((p for d, p in devices.items() if device_kind(d) == "cpu"), None)
        gpu = next((p for d, p in devices.items() if device_kind(d) == "cuda"), None)
        if cpu is None or gpu is None:
            continue
        if gpu.status != OK:
            lines.append(
                f"- {key}: the GPU side needs a GPU ({gpu.status}); only the CPU side was measured here."
            )
            continue
        if cpu.status != OK or math.isnan(cpu.rate.value) or math.isnan(gpu.rate.value):
            lines.append(
                f"- {key}: no comparison ({cpu.status if cpu.status != OK else 'too few steps'})."
            )
            continue
        speedup = gpu.rate.value / cpu.rate.value
        cost_ratio = (
            (per_hour["cuda"] / gpu.rate.value) / (per_hour["cpu"] / cpu.rate.value)
            if per_hour["cpu"]
            else math.nan
        )
        cheaper = (
            NA
            if math.isnan(cost_ratio)
            else (
                f"{1 / cost_ratio:.1f}× cheaper per iteration on the GPU"
                if cost_ratio < 1
                else f"{cost_ratio:.1f}× dearer per iteration on the GPU"
            )
        )
        lines.append(f"- {key}: the GPU is {speedup:.1f}× faster and {cheaper}.")
    return lines
