"""Q2 (slowdown matrix, STP per pair) and Q4 (copy and utilisation distributions) from pair cells."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gpumon.analysis import why
from gpumon.core.records.enums import ShareKind
from gpumon.errors import UsageError
from gpumon.experiments.runner.cells import Cell, share_label
from gpumon.experiments.study.results import (
    NA,
    Context,
    figure,
    fmt,
    fmt_ci,
    fmt_share,
    md_table,
    median_metric,
)
from gpumon.analysis.compare import compare
from gpumon.analysis.report import write_report
from gpumon.analysis.text import VERDICT_TEXT, verdict_sentence, distribution_rows, why_evidence
from gpumon.experiments.study.predicted import predict_pairs, predicted_section
from gpumon.analysis.spread import WITHIN_NOTE
from gpumon.analysis.distributions import CAUTION, COPY_NOTE, CPU_COPY_NOTE

if TYPE_CHECKING:
    from gpumon.analysis.compare import Comparison
    from gpumon.analysis.slowdown import Estimate

COPY_BOUND_SHARE = 0.5
COMPUTE_BOUND_SHARE = 0.05


@dataclass
class Pair:
    """A pair's cells and, when its runs allow it, the comparison (else why not)."""

    a: str
    b: str
    shared: list[Cell]
    exclusive: list[Cell]
    share: str = "timeslice"
    comparison: "Comparison | None" = None
    problem: str = ""

    @property
    def jobs(self) -> str:
        return f"{self.a}+{self.b}"

    @property
    def name(self) -> str:
        return (
            self.jobs
            if self.share == ShareKind.TIMESLICE
            else f"{self.jobs}-{share_label(self.share)}"
        )

    @property
    def detail_dir(self) -> str:
        return f"pairs/{self.name}"


def keys_of(ctx: Context) -> list[str]:
    seen: list[str] = []
    for cell in ctx.cells:
        for key in cell.keys:
            if key not in seen:
                seen.append(key)
    return seen


def build_pairs(ctx: Context) -> list[Pair]:
    """Compare every pair with ``gpumon compare``'s analysis; write its detail report into pairs/A+B/."""
    exclusive = {
        k: [c for c in ctx.cells if c.mode == "exclusive" and c.keys == (k,)] for k in keys_of(ctx)
    }
    pairs: dict[tuple[str, str, str], Pair] = {}
    for cell in ctx.cells:
        if cell.mode == "shared":
            a, b = cell.keys
            baselines = exclusive[a] + (exclusive[b] if b != a else [])
            pair = pairs.setdefault((a, b, cell.share), Pair(a, b, [], baselines, cell.share))
            pair.shared.append(cell)
    for pair in pairs.values():
        shared_runs = ctx.runs(pair.shared)
        exclusive_runs = ctx.runs(pair.exclusive)
        if not shared_runs:
            pair.problem = ctx.status(pair.shared)
            continue
        try:
            pair.comparison = compare(exclusive_runs, shared_runs)
            write_report(
                pair.comparison,
                [*exclusive_runs, *shared_runs],
                ctx.out / pair.detail_dir,
                replace=ctx.replace,
            )
        except UsageError as exc:
            pair.problem = str(exc)
    return list(pairs.values())


def slowdown_table(ctx: Context, pairs: list[Pair]) -> list[str]:
    """r[A][B]: the slowdown of the row's job when it shares with the column's job."""
    keys = keys_of(ctx)
    matrix: dict[tuple[str, str], str] = {}
    for pair in pairs:
        if pair.comparison is None:
            matrix.setdefault((pair.a, pair.b), NA)
            continue
        link = f"{pair.detail_dir}/report.md"
        matrix[(pair.a, pair.b)] = f"[{fmt_ci(pair.comparison.workload('A').slowdown)}]({link})"
        if pair.b != pair.a:
            matrix[(pair.b, pair.a)] = f"[{fmt_ci(pair.comparison.workload('B').slowdown)}]({link})"
    rows = [[f"**{row}**"] + [matrix.get((row, col), "–") for col in keys] for row in keys]
    return md_table(["r[row][column]", *keys], rows)


def pair_rows(pairs: list[Pair]) -> list[list[str]]:
    rows = []
    for pair in pairs:
        c = pair.comparison
        if c is None:
            rows.append([pair.name, NA, NA, NA, NA, pair.problem])
            continue
        r_a, r_b = c.workload("A").slowdown.value, c.workload("B").slowdown.value
        criterion = NA if math.isnan(r_a * r_b) else f"{r_a * r_b:.2f} vs {r_a + r_b:.2f}"
        rows.append(
            [
                f"[{pair.name}]({pair.detail_dir}/report.md)",
                fmt_ci(c.workload("A").slowdown),
                fmt_ci(c.workload("B").slowdown),
                fmt_ci(c.pair.stp),
                criterion,
                VERDICT_TEXT[c.pair.verdict] + disturbed_mark(c),
            ]
        )
    return rows


def disturbed_mark(c: "Comparison") -> str:
    """`` ⚠ disturbed by pid 4242 (alice, train.py)`` when another GPU process used a measured window (compare's rule)."""
    who = list(
        dict.fromkeys(f"pid {d.pid} ({d.user or '?'}, {d.command or '?'})" for d in c.disturbed_by)
    )
    return f" ⚠ disturbed by {', '.join(who)}" if who else ""


def write_csvs(ctx: Context, pairs: list[Pair]) -> None:
    matrix, stp, distributions = [], [], []
    for pair in pairs:
        c = pair.comparison
        runs = ";".join(ctx.link(p) for p in c.shared_runs) if c else ""
        for slot, job, partner in (("A", pair.a, pair.b), ("B", pair.b, pair.a)):
            w = c.workload(slot) if c else None
            r = w.slowdown if w else None
            matrix.append(
                {
                    "job": job,
                    "partner": partner,
                    "slot": slot,
                    "share": pair.share,
                    "slowdown": r.value if r else math.nan,
                    "low": r.low if r else math.nan,
                    "high": r.high if r else math.nan,
                    "exclusive_rate": w.exclusive_rate if w else math.nan,
                    "shared_rate": w.shared_rate if w else math.nan,
                    "shared_runs": runs,
                    "exclusive_runs": ";".join(ctx.link(s.run) for s in w.exclusive) if w else "",
                    "problem": pair.problem,
                    **why.cause_columns(w.why if w else None),
                }
            )
            for d in w.distributions if w else ():
                distributions.append(
                    {"pair": pair.name, "job": job, "partner": partner, "slot": slot, **d.to_dict()}
                )
        s = c.pair.stp if c else None
        stp.append(
            {
                "pair": pair.name,
                "a": pair.a,
                "b": pair.b,
                "share": pair.share,
                "stp": s.value if s else math.nan,
                "low": s.low if s else math.nan,
                "high": s.high if s else math.nan,
                "verdict": c.pair.verdict if c else "",
                "shared_runs": runs,
                "problem": pair.problem,
            }
        )
    ctx.output_csv(pd.DataFrame(matrix), "slowdown_matrix.csv")
    ctx.output_csv(pd.DataFrame(stp), "stp.csv")
    if distributions:
        ctx.output_csv(pd.DataFrame(distributions), "distributions.csv")


def heatmap(ctx: Context, pairs: list[Pair], name: str = "slowdown_heatmap.png") -> Path:
    keys = keys_of(ctx)
    values = np.full((len(keys), len(keys)), np.nan)
    for pair in pairs:
        if pair.comparison is not None:
            values[keys.index(pair.a), keys.index(pair.b)] = pair.comparison.workload(
                "A"
            ).slowdown.value
            if pair.b != pair.a:
                values[keys.index(pair.b), keys.index(pair.a)] = pair.comparison.workload(
                    "B"
                ).slowdown.value
    fig = figure(1, 1, width=1.2 * len(keys) + 3, height=1.0 * len(keys) + 2)
    ax = fig.subplots()
    # deferred: matplotlib is the analysis extra (+0.44 s CPU)
    from matplotlib.colors import TwoSlopeNorm

    finite = values[np.isfinite(values)]
    low = min(0.5, float(finite.min())) if len(finite) else 0.5
    high = max(2.0, float(finite.max())) if len(finite) else 2.0
    norm = TwoSlopeNorm(vmin=low, vcenter=1.0, vmax=high)
    image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu_r", norm=norm)
    for i in range(len(keys)):
        for j in range(len(keys)):
            ax.text(
                j,
                i,
                "–" if math.isnan(values[i, j]) else f"{values[i, j]:.2f}",
                ha="center",
                va="center",
            )
    ax.set_xticks(range(len(keys)), keys)
    ax.set_yticks(range(len(keys)), keys)
    ax.set_xlabel("co-runner")
    ax.set_ylabel("job")
    ax.set_title(
        "slowdown r[job][co-runner] = exclusive / shared rate (1 = unaffected)", fontsize=9
    )
    fig.colorbar(image, ax=ax)
    return ctx.save(fig, name)


def stp_bars(ctx: Context, pairs: list[Pair], name: str = "stp.png") -> Path:
    done = [(p, p.comparison) for p in pairs if p.comparison is not None]
    fig = figure(1, 1, width=max(4.0, 0.9 * len(done) + 2))
    ax = fig.subplots()
    colors = {"pays": "tab:green", "loses": "tab:red", "cannot tell": "tab:gray"}
    for i, (_, comparison) in enumerate(done):
        s = comparison.pair.stp
        err = [[s.value - s.low], [s.high - s.value]] if s.has_interval else None
        ax.bar(
            i,
            s.value,
            yerr=err,
            capsize=5,
            color=colors.get(comparison.pair.verdict, "tab:gray"),
        )
    ax.set_xticks(range(len(done)), [p.name for p, _ in done], rotation=30, ha="right")
    ax.axhline(1, color="black", ls="--", lw=0.8)
    ax.set_ylabel("STP = 1/r_A + 1/r_B")
    ax.set_title("system throughput per pair (95 % CI); above 1: sharing pays", fontsize=9)
    return ctx.save(fig, name)


def pairwise_section(ctx: Context) -> list[str]:
    """Q2: the slowdown matrix, STP per pair, which pairs pay; per share mode, then the modes side by side."""
    pairs = build_pairs(ctx)
    write_csvs(ctx, pairs)
    modes = list(dict.fromkeys(p.share for p in pairs)) or ["timeslice"]
    lines: list[str] = []
    for mode in modes:
        suffix = "" if len(modes) == 1 else f"-{share_label(mode)}"
        lines += _mode_section(
            [p for p in pairs if p.share == mode],
            ctx,
            "" if len(modes) == 1 else f" ({mode})",
            suffix,
        )
    if len(modes) > 1:
        lines += ["", *share_section(ctx, pairs, modes)]
    if ctx.predict:
        lines += ["", *predicted_beside_measured(ctx, pairs)]
    lines += [
        "",
        "CSV: [slowdown_matrix.csv](slowdown_matrix.csv), [stp.csv](stp.csv).",
        *pair_warnings(pairs),
    ]
    return lines


def predicted_beside_measured(ctx: Context, pairs: list[Pair]) -> list[str]:
    """``--predict``: each pair's prediction from its exclusive cells beside its comparison."""
    measured = {(p.a, p.b, p.share): p.comparison for p in pairs}
    items = predict_pairs(ctx)
    for item in items:
        item.measured = measured.get((item.a, item.b, item.share))
    return predicted_section(ctx, items)


def _mode_section(pairs: list[Pair], ctx: Context, title: str, suffix: str) -> list[str]:
    lines = [
        f"## Slowdown matrix{title}",
        "",
        "r[row][column] = x / s: the row job's exclusive rate over its rate while sharing with the column job "
        "(the study's r_AB = t_shared / t_exclusive per iteration). 1 = unaffected, 2 = half speed. "
        "95 % intervals in parentheses; each value links to the pair's full `gpumon compare` report. "
        "On the diagonal: the copy that started first.",
        "",
        *slowdown_table(ctx, pairs),
        "",
        f"## System throughput per pair{title}",
        "",
        "STP = 1/r_A + 1/r_B (A started first, B after the stagger). Sharing pays when STP > 1, which is the "
        "study's criterion r_AB·r_BA < r_AB + r_BA (shown as product vs sum of the point estimates); "
        "the verdict uses the whole 95 % interval of STP.",
        "",
        *md_table(
            ["pair", "r_A", "r_B", "STP", "r_AB·r_BA vs r_AB+r_BA", "verdict"], pair_rows(pairs)
        ),
        "",
        "In words, with each slowed job's main cause (extra time per step split into waiting for the GPU, the "
        "host-to-device link, the CPU; evidence in each pair's report):",
        "",
        *verdict_lines(pairs),
    ]
    if any(p.comparison is not None for p in pairs):
        heatmap(ctx, pairs, f"slowdown_heatmap{suffix}.png")
        stp_bars(ctx, pairs, f"stp{suffix}.png")
        lines += [
            "",
            f"![slowdown matrix](slowdown_heatmap{suffix}.png)",
            "",
            f"![STP per pair](stp{suffix}.png)",
        ]
    return lines


def better_mode(stps: dict[str, "Estimate"]) -> str:
    """The share mode whose STP interval lies wholly above every other's, else 'cannot tell'."""
    for mode, s in stps.items():
        others = [o for m, o in stps.items() if m != mode]
        if s.has_interval and all(o.has_interval and s.low > o.high for o in others):
            return mode
    return "cannot tell"


def share_section(ctx: Context, pairs: list[Pair], modes: list[str]) -> list[str]:
    """Each pair's STP under every share mode side by side, which pays more, and a grouped bar plot."""
    by_jobs: dict[str, dict[str, Pair]] = {}
    for pair in pairs:
        by_jobs.setdefault(pair.jobs, {})[pair.share] = pair
    rows, table = [], []
    for jobs, of_mode in by_jobs.items():
        stps = {m: p.comparison.pair.stp for m, p in of_mode.items() if p.comparison is not None}
        best = better_mode(stps) if len(stps) == len(modes) else NA
        rows.append([jobs, *(fmt_ci(stps[m]) if m in stps else NA for m in modes), best])
        table.append(
            {
                "pair": jobs,
                **{f"stp_{m}": stps[m].value if m in stps else math.nan for m in modes},
                "better": best,
            }
        )
    ctx.output_csv(pd.DataFrame(table), "stp_by_share.csv")
    lines = [
        "## Share modes side by side",
        "",
        "STP of each pair under each share mode (time slicing: each context runs alone for a slice; MPS: both "
        "jobs' kernels run on the SMs at once). A mode is better only when its whole 95 % interval lies above "
        "the others'. The exclusive baselines are the same runs for every mode.",
        "",
        *md_table(["pair", *(f"STP {m}" for m in modes), "better"], rows),
    ]
    if any(p.comparison is not None for p in pairs):
        stp_by_share(ctx, by_jobs, modes)
        lines += ["", "![STP per pair and share mode](stp_by_share.png)"]
    return lines + ["", "CSV: [stp_by_share.csv](stp_by_share.csv)."]


def stp_by_share(ctx: Context, by_jobs: dict[str, dict[str, Pair]], modes: list[str]) -> Path:
    fig = figure(1, 1, width=max(4.0, 1.1 * len(by_jobs) * len(modes) / 2 + 2))
    ax = fig.subplots()
    width = 0.8 / len(modes)
    for k, mode in enumerate(modes):
        for i, of_mode in enumerate(by_jobs.values()):
            pair = of_mode.get(mode)
            if pair is None or pair.comparison is None:
                continue
            s = pair.comparison.pair.stp
            err = [[s.value - s.low], [s.high - s.value]] if s.has_interval else None
            ax.bar(
                i + (k - (len(modes) - 1) / 2) * width,
                s.value,
                width,
                yerr=err,
                capsize=4,
                color=f"C{k}",
                label=mode if i == 0 else None,
            )
    ax.set_xticks(range(len(by_jobs)), list(by_jobs), rotation=30, ha="right")
    ax.axhline(1, color="black", ls="--", lw=0.8)
    ax.set_ylabel("STP = 1/r_A + 1/r_B")
    ax.set_title(
        "system throughput per pair and share mode (95 % CI); above 1: sharing pays", fontsize=9
    )
    ax.legend(fontsize=8)
    return ctx.save(fig, "stp_by_share.png")


def verdict_lines(pairs: list[Pair]) -> list[str]:
    """One bullet per compared pair: the verdict in words; then the interval note once when it applies."""
    done = [(p.name, p.comparison) for p in pairs if p.comparison is not None]
    return [f"- **{name}**: {verdict_sentence(c)}" for name, c in done] + interval_note(pairs)


def interval_note(pairs: list[Pair]) -> list[str]:
    """The note that single-run intervals cover within-run noise only, once, when a pair has one."""
    if any(p.comparison is not None and WITHIN_NOTE in p.comparison.notes for p in pairs):
        return ["", WITHIN_NOTE]
    return []


def pair_warnings(pairs: list[Pair]) -> list[str]:
    lines = []
    for pair in pairs:
        if pair.comparison is not None and pair.comparison.warnings:
            lines += ["", f"Warnings for {pair.name}:", ""] + [
                f"- {w}" for w in pair.comparison.warnings
            ]
    return lines


def bound_rows(ctx: Context) -> list[list[str]]:
    """Each job alone: how much of a step is the copy, so copy-bound and compute-bound jobs separate."""
    rows = []
    for key in keys_of(ctx):
        runs = ctx.runs([c for c in ctx.cells if c.mode == "exclusive" and c.keys == (key,)])
        if not runs:
            rows.append([key, NA, NA, NA, NA, "no exclusive run"])
            continue
        share = median_metric(runs, "A", "copy_share")
        bandwidth = median_metric(runs, "A", "copy_bandwidth")
        kind = (
            NA
            if math.isnan(share)
            else "copy-bound"
            if share >= COPY_BOUND_SHARE
            else "compute-bound"
            if share <= COMPUTE_BOUND_SHARE
            else "mixed"
        )
        rows.append(
            [
                key,
                fmt_share(share),
                fmt(bandwidth / 1e9, 2) if not math.isnan(bandwidth) else "no copies",
                fmt(median_metric(runs, "A", "cpu_pct"), 0),
                fmt(median_metric(runs, "A", "gpu_util"), 0),
                kind,
            ]
        )
    return rows


def distribution_table(pair: Pair) -> list[str]:
    if pair.comparison is None:  # only compared pairs are tabled
        return []
    headers, rows = distribution_rows(pair.comparison)
    names = {"A": f"A {pair.a}", "B": f"B {pair.b}"}
    return md_table(headers, [[names.get(r[0], r[0]), *r[1:]] for r in rows])


def contention_section(ctx: Context) -> list[str]:
    """Q4: copy bandwidth and utilisation, exclusive vs shared, tests and effect sizes, per pair."""
    pairs = build_pairs(ctx)
    write_csvs(ctx, pairs)
    on_cpu = not ctx.device.startswith("cuda")
    lines = [*bound_lines(ctx, on_cpu), "", "## Exclusive vs shared, per pair", ""]
    for pair in pairs:
        lines += pair_lines(pair)
    tested = any(p.comparison is not None and p.comparison.tested for p in pairs)
    lines += [
        CPU_COPY_NOTE if on_cpu else COPY_NOTE,
        *(["", CAUTION] if tested else []),
        *interval_note(pairs),
        "",
        "CSV: [distributions.csv](distributions.csv), [slowdown_matrix.csv](slowdown_matrix.csv), "
        "[stp.csv](stp.csv).",
        *pair_warnings(pairs),
    ]
    return lines


def bound_lines(ctx: Context, on_cpu: bool) -> list[str]:
    """Whether each job alone is copy-bound or compute-bound, with the medians that say so."""
    lines = [
        "## Copy-bound or compute-bound (each job alone)",
        "",
        f"Median over post-warm-up steps: share of the step spent in the host-to-device copy, per-copy bandwidth "
        f"(bytes ÷ the CUDA-event time of the copy; alone, nothing else waits in it), CPU % of the process tree, GPU utilisation. A job is copy-bound when "
        f"the copy is ≥ {COPY_BOUND_SHARE:.0%} of its step, compute-bound when ≤ {COMPUTE_BOUND_SHARE:.0%}.",
        "",
        *md_table(
            [
                "job",
                "copy share of step",
                "per-copy bandwidth (GB/s)",
                "CPU %",
                "GPU util %",
                "kind",
            ],
            bound_rows(ctx),
        ),
    ]
    if on_cpu:
        lines += [
            "",
            'On the CPU the "device copy" is a memcpy into the model\'s input buffer, so copy bandwidth here is '
            "memory bandwidth, not PCIe; GPU utilisation needs NVML and a GPU.",
        ]
    return lines


def pair_lines(pair: Pair) -> list[str]:
    """One pair's verdict, evidence, slowdowns and STP, and its distributions alone and shared."""
    lines = [f"### {pair.name}", ""]
    c = pair.comparison
    if c is None:
        return [*lines, f"No comparison: {pair.problem}", ""]

    return [
        *lines,
        f"**{verdict_sentence(c)}.**",
        "",
        *[f"- evidence {line}" for line in why_evidence(c)],
        "",
        f"r_A = {fmt_ci(c.workload('A').slowdown)}, r_B = {fmt_ci(c.workload('B').slowdown)}, "
        f"STP = {fmt_ci(c.pair.stp)} ({c.pair.verdict}). "
        f"Full report: [{pair.detail_dir}/report.md]({pair.detail_dir}/report.md) "
        f"(histograms: [per-copy bandwidth]({pair.detail_dir}/copy_bandwidth.png), "
        f"[utilisation]({pair.detail_dir}/utilisation.png)).",
        "",
        *distribution_table(pair),
        "",
    ]
