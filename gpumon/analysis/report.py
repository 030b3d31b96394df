"""``--report DIR``: report.md, summary.json, CSVs of the tables, and PNG plots (matplotlib, Agg; without it the
report says it drew none and how to get them)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from gpumon.analysis import jobsteps, rates
from gpumon.analysis.why import cause_columns
from gpumon.analysis.distributions import (
    COPY_BANDWIDTH,
    CPU,
    GPU_UTIL,
    display_scale,
    METRICS,
    histogram_counts,
)
from gpumon.analysis.text import (
    comparison_json,
    distribution_notes,
    distribution_rows,
    fmt_estimate,
    pair_share,
    rate_rows,
    verdict_sentence,
    verdict_text,
    why_evidence,
    why_rows,
)
from gpumon.core.store.trace import Run, refuse_run_folder
from gpumon.errors import EnvironmentFailure
from gpumon.extras import ANALYSIS, install_hint, installed
from gpumon.safewrite import ensure_folder, replacing_together

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gpumon.analysis.compare import Comparison

PLOTS = ("rate_over_time.png", "copy_bandwidth.png", "utilisation.png", "slowdown.png")
PLOTS_NEED = (
    f"plots not drawn: they need matplotlib, which is not installed ({install_hint(ANALYSIS)})"
)


def write_report(
    comparison: "Comparison", runs: Sequence[Run], out_dir: Path, *, replace: bool = False
) -> list[Path]:
    """Write the report files into ``out_dir`` (created if needed), all or none; returns their paths.

    Files already there are replaced only when ``replace`` (``--force``); a symlinked one never is, nor is a
    folder in one of ``runs`` written into."""
    refuse_run_folder(out_dir, runs)
    try:
        ensure_folder(out_dir)
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot create report directory {out_dir}: {exc.strerror}"
        ) from None
    frames = tables(comparison, runs)
    plots = installed("matplotlib")
    written = []
    with replacing_together(replace=replace) as batch:
        for name, frame in frames.items():
            with batch.file(out_dir / f"{name}.csv") as f:
                frame.to_csv(f, index=False)
            written.append(out_dir / f"{name}.csv")
        with batch.file(out_dir / "summary.json") as f:
            f.write(json.dumps(comparison_json(comparison), indent=2, allow_nan=False) + "\n")
        written.append(out_dir / "summary.json")
        for name, figure in (_figures(comparison, frames) if plots else {}).items():
            with batch.file(out_dir / name, binary=True) as f:
                figure.savefig(f, format="png", dpi=100)
            written.append(out_dir / name)
        with batch.file(out_dir / "report.md") as f:
            f.write(markdown(comparison, plots))
        written.append(out_dir / "report.md")
    return written


def _figures(comparison: "Comparison", frames: dict[str, "pd.DataFrame"]) -> dict[str, "Figure"]:
    return {
        "rate_over_time.png": _rate_figure(comparison, frames["rate_over_time"]),
        "copy_bandwidth.png": _histogram_figure(comparison, [COPY_BANDWIDTH.key]),
        "utilisation.png": _histogram_figure(comparison, [GPU_UTIL.key, CPU.key]),
        "slowdown.png": _slowdown_figure(comparison),
    }


def tables(comparison: "Comparison", runs: Sequence[Run]) -> dict[str, "pd.DataFrame"]:
    """The data behind the tables and plots, one DataFrame per CSV."""
    return {
        "rates": rates_table(comparison),
        "pair": pair_table(comparison),
        "distributions": distributions_table(comparison),
        "windows": windows_table(comparison),
        "rate_over_time": rate_over_time(comparison, runs),
    }


def rates_table(comparison: "Comparison") -> "pd.DataFrame":
    """One row per workload: its rates, slowdown and normalised throughput (with bounds) and the causes."""
    return pd.DataFrame(
        [
            {
                "workload": w.slot,
                "spec": w.spec,
                "exclusive_rate": w.exclusive_rate,
                "shared_rate": w.shared_rate,
                "slowdown": w.slowdown.value,
                "slowdown_low": w.slowdown.low,
                "slowdown_high": w.slowdown.high,
                "normalized_throughput": w.normalized_throughput.value,
                "normalized_throughput_low": w.normalized_throughput.low,
                "normalized_throughput_high": w.normalized_throughput.high,
                "baseline": w.baseline,
                "exclusive_windows": len(w.exclusive),
                "shared_windows": len(w.shared),
                **cause_columns(w.why),
            }
            for w in comparison.workloads
        ]
    )


def pair_table(comparison: "Comparison") -> "pd.DataFrame":
    """One row: the pair's STP (with bounds) and the verdict."""
    stp = comparison.pair.stp
    return pd.DataFrame(
        [
            {
                "stp": stp.value,
                "stp_low": stp.low,
                "stp_high": stp.high,
                "verdict": comparison.pair.verdict,
            }
        ]
    )


DISTRIBUTION_COLUMNS = [
    "workload",
    "metric",
    "label",
    "unit",
    "n_exclusive",
    "n_shared",
    "median_exclusive",
    "median_shared",
    "median_shift",
    "relative_shift",
    "wasserstein",
    "ks_statistic",
    "ks_pvalue",
    "chi2",
    "chi2_pvalue",
    "chi2_dof",
]


def distributions_table(comparison: "Comparison") -> "pd.DataFrame":
    """One row per workload and metric: how its distribution moved from exclusive to shared."""
    return pd.DataFrame(
        [
            {"workload": w.slot, **d.to_dict()}
            for w in comparison.workloads
            for d in w.distributions
        ],
        columns=DISTRIBUTION_COLUMNS,
    )


def windows_table(comparison: "Comparison") -> "pd.DataFrame":
    """One row per window: each workload's exclusive and shared windows, then the pair's ("A+B")."""
    return pd.DataFrame(
        [
            {"workload": w.slot, **s.to_dict()}
            for w in comparison.workloads
            for s in (*w.exclusive, *w.shared)
        ]
        + [{"workload": "A+B", **s.to_dict()} for s in comparison.pair.windows]
    )


def rate_over_time(comparison: "Comparison", runs: Sequence[Run], bins: int = 60) -> "pd.DataFrame":
    """Iterations/s in equal slices of every window, by workload and condition (t from the window start)."""
    by_path = {str(r.path): r for r in runs}
    rows = []
    for w in comparison.workloads:
        for seg in (*w.exclusive, *w.shared):
            run = by_path.get(seg.run)
            if run is None:
                continue
            job = jobsteps.jobs_of(run).get(seg.slot)  # kept on the run from compare's read
            c = job.curve() if job is not None else None
            if c is None:
                continue
            condition = "shared" if seg.role == "shared" else "exclusive"
            t, r = rates.rate_over_time(c, seg.window, min(bins, max(1, seg.steps // 2)))
            rows += [
                {
                    "workload": w.slot,
                    "condition": condition,
                    "run": seg.name,
                    "t": float(a),
                    "rate": float(b),
                }
                for a, b in zip(t, r)
            ]
    return pd.DataFrame(rows, columns=["workload", "condition", "run", "t", "rate"])


def _figure(rows: int, cols: int, width: float = 5.0, height: float = 3.2) -> "Figure":
    # deferred: matplotlib is the analysis extra (+0.44 s CPU to gpumon compare --report)
    from matplotlib.figure import Figure

    return Figure(figsize=(width * cols, height * rows), layout="constrained")


def _rate_figure(comparison: "Comparison", frame: "pd.DataFrame") -> "Figure":
    fig = _figure(1, len(comparison.workloads))
    axes = fig.subplots(1, len(comparison.workloads), squeeze=False)[0]
    styles = {"exclusive": "tab:blue", "shared": "tab:orange"}
    for ax, w in zip(axes, comparison.workloads):
        part = frame[frame["workload"] == w.slot]
        for i, ((condition, run), series) in enumerate(
            part.groupby(["condition", "run"], sort=False)
        ):
            ax.plot(
                series["t"],
                series["rate"],
                color=styles[condition],
                ls=("-", ":", "-.")[i % 3],
                lw=1,
                label=f"{condition} ({run})",
            )
        for rate, condition in ((w.exclusive_rate, "exclusive"), (w.shared_rate, "shared")):
            if not math.isnan(rate):
                ax.axhline(rate, color=styles[condition], ls="--", lw=0.8)
        ax.set_title(f"{w.slot}: {w.spec}", fontsize=9)
        ax.set_xlabel("seconds from window start")
        ax.set_ylabel("iterations/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    return fig


def _histogram_figure(comparison: "Comparison", metrics: Sequence[str]) -> "Figure":
    by_key = {m.key: m for m in METRICS}
    fig = _figure(len(comparison.workloads), len(metrics))
    axes = fig.subplots(len(comparison.workloads), len(metrics), squeeze=False)
    for row, w in zip(axes, comparison.workloads):
        for ax, key in zip(row, metrics):
            metric = by_key[key]
            ax.set_title(f"{w.slot}: {metric.label}", fontsize=9)
            values = comparison.samples.get((w.slot, key))
            if values is None:
                ax.text(
                    0.5,
                    0.5,
                    "no samples in these runs",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                )
                ax.set_axis_off()
                continue
            factor, unit = display_scale(metric.unit, np.concatenate(values))
            edges, h_x, h_s = histogram_counts(values[0] / factor, values[1] / factor)
            centers = (edges[:-1] + edges[1:]) / 2
            step = (edges[1] - edges[0]) / 2.2
            ax.bar(
                centers - step / 2,
                h_x / max(1, h_x.sum()),
                width=step,
                label="exclusive",
                color="tab:blue",
            )
            ax.bar(
                centers + step / 2,
                h_s / max(1, h_s.sum()),
                width=step,
                label="shared",
                color="tab:orange",
            )
            ax.set_xlabel(unit)
            ax.set_ylabel("fraction of samples")
            ax.legend(fontsize=7)
    return fig


def _slowdown_figure(comparison: "Comparison") -> "Figure":
    fig = _figure(1, 2)
    left, right = fig.subplots(1, 2)
    labels = [w.slot for w in comparison.workloads]
    values = np.array([w.slowdown.value for w in comparison.workloads])
    errors = np.array(
        [
            [v - w.slowdown.low, w.slowdown.high - v] if w.slowdown.has_interval else [0.0, 0.0]
            for v, w in zip(values, comparison.workloads)
        ]
    ).T
    left.bar(labels, values, yerr=errors, capsize=6, color="tab:orange")
    left.axhline(1, color="black", ls="--", lw=0.8)
    left.set_title("slowdown r = exclusive / shared (95 % CI)", fontsize=9)
    stp = comparison.pair.stp
    stp_err = [[stp.value - stp.low], [stp.high - stp.value]] if stp.has_interval else None
    right.bar(["STP"], [stp.value], yerr=stp_err, capsize=6, color="tab:green", width=0.4)
    right.axhline(1, color="black", ls="--", lw=0.8)
    right.set_title(f"STP = 1/r_A + 1/r_B: {comparison.pair.verdict}", fontsize=9)
    return fig


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows
    ]


def markdown(comparison: "Comparison", plots: bool = True) -> str:
    """report.md: the tables, the verdict, notes, warnings, and the plots (``plots``: drawn; else why not)."""
    pair = comparison.pair
    lines = [
        "# gpumon compare",
        "",
        f"Exclusive runs: {', '.join(Path(p).name for p in comparison.exclusive_runs) or 'none'}  ",
        f"Shared runs: {', '.join(Path(p).name for p in comparison.shared_runs)}",
        "",
        "## Rates and slowdown",
        "",
        "Iterations/s with warm-up excluded; shared rates inside the overlap window. "
        f"Intervals {comparison.confidence:.0%}.",
        "",
    ]
    lines += _md_table(*rate_rows(comparison))
    lines += [
        "",
        "## Pair",
        "",
        f"STP = 1/r_A + 1/r_B = **{fmt_estimate(pair.stp)}**: {verdict_text(comparison)} "
        f"(shared under {pair_share(comparison)}).",
        "",
    ]
    lines += [
        f"- overlap window of {w.name}: {w.start:.2f}-{w.end:.2f} s ({w.end - w.start:.1f} s)"
        for w in pair.windows
    ]
    lines += ["", "## Verdict", "", f"**{verdict_sentence(comparison)}.**"]
    headers, rows = why_rows(comparison)
    if rows:
        lines += [
            "",
            "## Why it slowed down",
            "",
            "Each job's extra time per step (shared − exclusive), split into waiting for the GPU (time slices "
            "with the other job), the host-to-device link, the CPU, and what no evidence explains. Link busy = "
            "PCIe traffic ÷ the link's capacity.",
            "",
        ]
        lines += (
            _md_table(headers, rows)
            + [""]
            + [f"- evidence {line}" for line in why_evidence(comparison)]
        )
    headers, rows = distribution_rows(comparison)
    if rows:
        lines += ["", "## Distributions, exclusive vs shared", ""] + _md_table(headers, rows)
        for note in distribution_notes(comparison):
            lines += ["", note]
    for title, items in (("Notes", comparison.notes), ("Warnings", comparison.warnings)):
        if items:
            lines += ["", f"## {title}", ""] + [f"- {item}" for item in items]
    lines += ["", "## Plots", ""] + (
        [f"![{name[:-4]}]({name})" for name in PLOTS] if plots else [PLOTS_NEED.capitalize() + "."]
    )
    return "\n".join(lines) + "\n"
