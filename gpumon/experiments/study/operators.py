"""Q3: per-operator time shares from torch.profiler, model similarity, exclusive vs shared per model."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpumon.core.records.decode import read_json
from gpumon.experiments.study.pairwise import keys_of
from gpumon.experiments.study.results import (
    NA,
    Context,
    figure,
    fmt,
    fmt_share,
    md_table,
    recorded_profiles,
)
from gpumon.experiments.study.similarity import pooled, shares, weighted_jaccard

OPERATOR_PREFIX = "aten::"
TOP = 10


@dataclass(frozen=True)
class OpProfile:
    """One profiled job of one cell: aten operators' self times and calls over ``steps`` steps."""

    model: str
    partner: str | None
    steps: int
    cpu_us: dict[str, float]
    device_us: dict[str, float]
    calls: dict[str, float]
    device_times: bool
    device_note: str | None


def read_profile(path: Path, model: str, partner: str | None) -> OpProfile | None:
    try:
        data = read_json(path, max_bytes=64 << 20)
    except (OSError, ValueError):
        return None
    ops = [o for o in data.get("ops", []) if str(o.get("name", "")).startswith(OPERATOR_PREFIX)]
    if not data.get("steps"):
        return None
    return OpProfile(
        model=model,
        partner=partner,
        steps=int(data["steps"]),
        cpu_us={o["name"]: float(o["self_cpu_us"]) for o in ops},
        device_us={o["name"]: float(o["self_device_us"]) for o in ops if o.get("self_device_us")},
        calls={o["name"]: float(o["calls"]) for o in ops},
        device_times=bool(data.get("device_times")),
        device_note=data.get("device_note"),
    )


def load_profiles(ctx: Context) -> list[OpProfile]:
    profiles = (
        read_profile(path, key, partner) for path, key, partner in recorded_profiles(ctx, "ops")
    )
    return [p for p in profiles if p is not None]


@dataclass(frozen=True)
class Condition:
    """Pooled profiles of one model under one condition (alone, or with a partner)."""

    steps: int
    cpu_us: dict[str, float]
    device_us: dict[str, float]
    calls: dict[str, float]

    @classmethod
    def of(cls, profiles: list[OpProfile]) -> Condition | None:
        if not profiles:
            return None
        return cls(
            sum(p.steps for p in profiles),
            pooled(p.cpu_us for p in profiles),
            pooled(p.device_us for p in profiles),
            pooled(p.calls for p in profiles),
        )

    def per_step_ms(self, device: bool = False) -> float:
        return sum((self.device_us if device else self.cpu_us).values()) / self.steps / 1000


def share_table(alone: Condition, device_times: bool) -> list[str]:
    cpu, dev = shares(alone.cpu_us), shares(alone.device_us)
    rows = [
        [
            op,
            fmt_share(cpu[op]),
            fmt(alone.cpu_us[op] / alone.steps, 0),
            fmt(alone.calls.get(op, 0) / alone.steps, 1),
            fmt_share(dev.get(op, 0.0)) if device_times else NA,
        ]
        for op in sorted(cpu, key=lambda op: cpu[op], reverse=True)[:TOP]
    ]
    return md_table(
        ["operator", "share of CPU time", "CPU µs/step", "calls/step", "share of device time"], rows
    )


def similarity_matrix(
    models: list[str], alone: dict[str, Condition], device: bool
) -> list[list[float]]:
    vectors = {m: shares(alone[m].device_us if device else alone[m].cpu_us) for m in models}
    return [[weighted_jaccard(vectors[a], vectors[b]) for b in models] for a in models]


def similarity_figure(ctx: Context, models: list[str], matrix: list[list[float]]) -> Path:
    values = np.array(matrix, dtype=float)
    fig = figure(1, 1, width=1.2 * len(models) + 3, height=1.0 * len(models) + 2)
    ax = fig.subplots()
    image = ax.imshow(values, cmap="Blues", vmin=0, vmax=1)
    for i in range(len(models)):
        for j in range(len(models)):
            ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center")
    ax.set_xticks(range(len(models)), models)
    ax.set_yticks(range(len(models)), models)
    ax.set_title("weighted Jaccard of operator CPU-time shares", fontsize=9)
    fig.colorbar(image, ax=ax)
    return ctx.save(fig, "operator_similarity.png")


def contrast_rows(
    model: str, alone: Condition, partners: dict[str, Condition], device_times: bool
) -> list[list[str]]:
    rows = []
    for partner, shared in partners.items():
        cpu_x, cpu_s = alone.per_step_ms(), shared.per_step_ms()
        row = [
            model,
            partner,
            str(alone.steps),
            str(shared.steps),
            fmt(cpu_x, 2),
            fmt(cpu_s, 2),
            fmt(cpu_s / cpu_x if cpu_x else math.nan, 2),
            fmt(weighted_jaccard(shares(alone.cpu_us), shares(shared.cpu_us)), 2),
        ]
        if device_times:
            dev_x, dev_s = alone.per_step_ms(device=True), shared.per_step_ms(device=True)
            row += [
                fmt(dev_x, 2),
                fmt(dev_s, 2),
                fmt(weighted_jaccard(shares(alone.device_us), shares(shared.device_us)), 2),
            ]
        rows.append(row)
    return rows


def top_ops_rows(alone: Condition, shared: Condition) -> list[list[str]]:
    """Top operators alone vs shared: shares of CPU time and mean µs per call."""
    cpu_x, cpu_s = shares(alone.cpu_us), shares(shared.cpu_us)
    rows = []
    for op in sorted(cpu_x, key=lambda op: cpu_x[op], reverse=True)[:TOP]:
        per_call_x = alone.cpu_us[op] / alone.calls[op] if alone.calls.get(op) else math.nan
        per_call_s = (
            shared.cpu_us.get(op, 0.0) / shared.calls[op] if shared.calls.get(op) else math.nan
        )
        rows.append(
            [
                op,
                fmt_share(cpu_x[op]),
                fmt_share(cpu_s.get(op, 0.0)),
                fmt(per_call_x, 1),
                fmt(per_call_s, 1),
                fmt(per_call_s / per_call_x if per_call_x else math.nan, 2),
            ]
        )
    return rows


def top_ops_lines(model: str, alone: Condition, shared: Condition) -> list[str]:
    """``model``'s top operators alone against shared (all co-runners pooled)."""
    return [
        "",
        f"### {model}: top operators alone vs shared (all co-runners pooled)",
        "",
        *md_table(
            ["operator", "share alone", "share shared", "µs/call alone", "µs/call shared", "ratio"],
            top_ops_rows(alone, shared),
        ),
    ]


def shares_figure(
    ctx: Context, models: list[str], alone: dict[str, Condition], shared: dict[str, Condition]
) -> Path:
    fig = figure(1, len(models), width=5.5)
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models):
        x, s = shares(alone[model].cpu_us), shares(shared[model].cpu_us) if model in shared else {}
        ops = sorted(x, key=lambda op: x[op], reverse=True)[:8][::-1]
        y = np.arange(len(ops))
        ax.barh(y - 0.2, [x[o] * 100 for o in ops], height=0.4, label="exclusive", color="tab:blue")
        if s:
            ax.barh(
                y + 0.2,
                [s.get(o, 0.0) * 100 for o in ops],
                height=0.4,
                label="shared",
                color="tab:orange",
            )
        ax.set_yticks(y, [o.removeprefix(OPERATOR_PREFIX) for o in ops], fontsize=8)
        ax.set_xlabel("% of operator CPU time")
        ax.set_title(model, fontsize=9)
        ax.legend(fontsize=7)
    return ctx.save(fig, "operator_shares.png")


def write_csv(ctx: Context, profiles: list[OpProfile]) -> None:
    rows = []
    for p in profiles:
        cpu, dev = shares(p.cpu_us), shares(p.device_us)
        for op, us in p.cpu_us.items():
            rows.append(
                {
                    "model": p.model,
                    "condition": "shared" if p.partner else "exclusive",
                    "partner": p.partner or "",
                    "operator": op,
                    "steps": p.steps,
                    "calls": p.calls.get(op, 0),
                    "self_cpu_us": us,
                    "self_device_us": p.device_us.get(op, math.nan) if p.device_times else math.nan,
                    "cpu_share": cpu[op],
                    "device_share": dev.get(op, math.nan),
                }
            )
    ctx.output_csv(pd.DataFrame(rows), "operator_shares.csv")


def operators_section(ctx: Context) -> list[str]:
    profiles = load_profiles(ctx)
    if not profiles:
        return ["## Operators", "", "No operator profile was recorded (see the cells below)."]
    write_csv(ctx, profiles)
    device_times = all(p.device_times for p in profiles)
    alone = {
        m: c
        for m in keys_of(ctx)
        if (c := Condition.of([p for p in profiles if p.model == m and p.partner is None]))
    }
    return [
        *alone_lines(profiles, alone, device_times),
        *similarity_lines(ctx, alone, device_times),
        *contrast_lines(ctx, profiles, alone, device_times),
    ]


def alone_lines(
    profiles: list[OpProfile], alone: dict[str, Condition], device_times: bool
) -> list[str]:
    """Each model's top operators by time share, alone."""
    lines = [
        "## Operator time shares (each model alone)",
        "",
        f"Self time of each `aten::` operator over the profiled steps (torch.profiler, after the warm-up), "
        f"as a share of all operator time. Top {TOP} per model.",
    ]
    if not device_times:
        note = next((p.device_note for p in profiles if p.device_note), "device times need CUDA")
        lines += ["", f"Device times: n/a, {note}."]
    for model in alone:
        lines += ["", f"### {model}", "", *share_table(alone[model], device_times)]
    return lines


def similarity_lines(ctx: Context, alone: dict[str, Condition], device_times: bool) -> list[str]:
    """How alike the models' operator mixes are, alone (a matrix of weighted Jaccards, and its figure)."""
    models = list(alone)
    matrix = similarity_matrix(models, alone, device=False)
    lines = [
        "",
        "## Similarity between models",
        "",
        "Normalised (weighted) Jaccard similarity of the operator CPU-time shares: Σ min(p_a, p_b) / Σ max(p_a, p_b) "
        "over operators; 1 = the same mix of operators, 0 = none in common.",
        "",
        *md_table(
            ["", *models],
            [[f"**{a}**", *(fmt(v, 2) for v in row)] for a, row in zip(models, matrix)],
        ),
    ]
    if device_times:
        device_matrix = similarity_matrix(models, alone, device=True)
        lines += [
            "",
            "Same, on device-time shares:",
            "",
            *md_table(
                ["", *models],
                [[f"**{a}**", *(fmt(v, 2) for v in row)] for a, row in zip(models, device_matrix)],
            ),
        ]
    similarity_figure(ctx, models, matrix)
    return [*lines, "", "![operator similarity](operator_similarity.png)"]


def contrast_lines(
    ctx: Context, profiles: list[OpProfile], alone: dict[str, Condition], device_times: bool
) -> list[str]:
    """Each model's operator time alone against beside each co-runner, and its top operators both ways."""
    models = list(alone)
    lines = [
        "",
        "## Exclusive vs shared, per model",
        "",
        "Operator CPU time per profiled step alone and beside each co-runner (both jobs profiled while they ran "
        "together), its ratio, and the weighted Jaccard of the two share distributions (1 = the mix is unchanged).",
    ]
    headers = [
        "model",
        "co-runner",
        "steps alone",
        "steps shared",
        "CPU ms/step alone",
        "shared",
        "ratio",
        "Jaccard",
    ]
    if device_times:
        headers += ["device ms/step alone", "shared", "Jaccard (device)"]
    rows = []
    for model in models:
        partners = {
            p: c
            for p in keys_of(ctx)
            if (c := Condition.of([x for x in profiles if x.model == model and x.partner == p]))
        }
        rows += contrast_rows(model, alone[model], partners, device_times)
    lines += ["", *md_table(headers, rows)]
    shared_all = {
        m: c
        for m in models
        if (c := Condition.of([p for p in profiles if p.model == m and p.partner]))
    }
    for model, shared in shared_all.items():
        lines += top_ops_lines(model, alone[model], shared)
    shares_figure(ctx, models, alone, shared_all)
    return [
        *lines,
        "",
        "![operator shares](operator_shares.png)",
        "",
        "CSV: [operator_shares.csv](operator_shares.csv).",
    ]
