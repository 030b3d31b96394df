"""``results.md``: the experiment's question, its tables with intervals, the study's framing, every cell."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable

from gpumon.experiments.study.frames import frames_section
from gpumon.experiments.study.operators import operators_section
from gpumon.experiments.study.pairwise import contention_section, pairwise_section
from gpumon.experiments.study.results import Context, cells_section
from gpumon.experiments.runner.conduct import RESULTS_FILE as RESULTS
from gpumon.experiments.runner.spec import PAIRED_ANALYSES
from gpumon.experiments.study.sweep import cost_section, sweep_section
from gpumon.core.records.machine import HostInfo
from gpumon.workloads.spec import parse_workload_spec

SECTIONS: dict[str, Callable[[Context], list[str]]] = {
    "pairwise": pairwise_section,
    "contention": contention_section,
    "operators": operators_section,
    "sweep": sweep_section,
    "device_cost": cost_section,
}


def counts(ctx: Context) -> Counter[str]:
    """Cells by status (``not run`` for those without a current record)."""
    return Counter((r.status if (r := ctx.record(c)) is not None else "not run") for c in ctx.cells)


def machine_line(ctx: Context) -> str:
    """Host, GPU and versions, from the first completed run."""
    run = next((r for c in ctx.cells if (r := ctx.run(c)) is not None), None)
    if run is None:
        return "No run completed."
    host = run.meta.host or HostInfo()
    gpu = run.meta.gpu
    versions = run.meta.versions or {}
    cpus, mib = (v if v is not None else "?" for v in (host.cpus, host.mem_total_mib))
    where = f"{cpus} CPUs, {mib} MiB"
    device = f"GPU {gpu.name} (driver {gpu.driver})" if gpu else "no GPU (NVML unavailable)"
    return f"Machine: {host.hostname or '?'}, {where}, {device}; torch {versions.get('torch')}, gpumon {versions.get('gpumon')}."


def header(ctx: Context, profile_problem: str | None) -> list[str]:
    spec, s = ctx.spec, ctx.settings
    tally = counts(ctx)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(tally.items()))
    timing = f"each job measured for {s.seconds:g} s of steady state"
    if spec.analysis in PAIRED_ANALYSES:
        timing += f"; in a shared cell B starts {s.stagger:g} s after A"
    lines = [
        f"# {spec.title}",
        "",
        f"**Question.** {spec.question}",
        "",
        f"Spec `{spec.path.name}`, preset `{ctx.preset}`, device `{ctx.device}`; {len(ctx.cells)} cells ({summary}); "
        f"{s.repeats} repeat{'s' * (s.repeats != 1)}; {timing}.  ",
        machine_line(ctx),
    ]
    if tally.get("not run") or tally.get("interrupted"):
        lines += [
            "",
            "**Incomplete**: some cells have not run yet; run the same command again to resume.",
        ]
    if profile_problem:
        lines += ["", f"py-spy profiles were asked for but not recorded: {profile_problem}."]
    return lines


def caveats(ctx: Context) -> list[str]:
    out = []
    threads_unset = any(
        "threads" not in parse_workload_spec(j.spec).options for c in ctx.cells for j in c.jobs
    )
    if not ctx.device.startswith("cuda") and ctx.spec.analysis in PAIRED_ANALYSES and threads_unset:
        out.append(
            "On the CPU, a job alone gets every core's threads while two co-resident jobs split them "
            "(gpumon's default; set `threads=` in the workload options to fix it), so the slowdown includes "
            "losing cores, not only interference."
        )
    if ctx.spec.notes:
        out.append(ctx.spec.notes)
    return ["## Notes", "", *(f"- {c}" for c in out)] if out else []


def study_section(ctx: Context) -> list[str]:
    if not ctx.spec.study:
        return []
    return [
        "## The study",
        "",
        ctx.spec.study,
        "",
        "Put these numbers beside the study's: see docs/experiments.md for its definitions.",
    ]


def write_results(ctx: Context, profile_problem: str | None = None) -> Path:
    """Write results.md (and the analysis' CSVs and PNGs) into the experiment directory."""
    blocks = [
        header(ctx, profile_problem),
        SECTIONS[ctx.spec.analysis](ctx) if any(ctx.run(c) is not None for c in ctx.cells) else [],
        frames_section(ctx),
        study_section(ctx),
        caveats(ctx),
        cells_section(ctx),
    ]
    text = "\n\n".join("\n".join(b) for b in blocks if b) + "\n"
    return ctx.output_text(RESULTS, text)
