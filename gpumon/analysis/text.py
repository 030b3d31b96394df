"""Plain-text rendering of a comparison: tables for the CLI and the TUI, plotext histograms.

No ANSI codes unless asked for (``color=True``; ``gpumon.console.color.use_color`` says
whether a stream should get them).
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Sequence

import numpy as np

from gpumon.analysis.distributions import (
    CAUTION,
    COPY_BANDWIDTH,
    COPY_NOTE,
    COPY_RATE,
    CPU_COPY_NOTE,
    display_scale,
    histogram_counts,
)
from gpumon.analysis.slowdown import Estimate
from gpumon.core.interference.attribution import SHARE_KEYS
from gpumon.core.jobs.beside import UNKNOWN_RATE
from gpumon.core.records.rates import CANNOT_TELL, LOSES, PAYS
from gpumon.core.records.printable import printable
from gpumon.core.records.share import shown_share
from gpumon.core.interference.sentence import JobWords, labels, sentence

if TYPE_CHECKING:
    from gpumon.analysis.compare import Comparison, WorkloadResult

_PLOTEXT_LOCK = threading.Lock()
_COLORS = {PAYS: "32", LOSES: "31", CANNOT_TELL: "33", "warning": "33", "heading": "1"}
VERDICT_TEXT = {
    PAYS: "sharing pays (the whole interval is above 1)",
    LOSES: "sharing loses (the whole interval is below 1)",
    CANNOT_TELL: "cannot tell (the interval straddles 1)",
}


def verdict_text(comparison: "Comparison") -> str:
    """The pair's verdict in words; with no STP at all, why there is none (not an interval that straddles 1)."""
    pair = comparison.pair
    if math.isnan(pair.stp.value):
        unseen = [w.slot for w in comparison.workloads if w.known is not None]
        missing = [
            w.slot for w in comparison.workloads if w.known is None and math.isnan(w.exclusive_rate)
        ]
        if unseen:
            return (
                f"cannot tell: {' and '.join(unseen)} has no probe, so its rate is {UNKNOWN_RATE}"
            )
        if missing:
            return (
                f"cannot tell: no exclusive rate of {' and '.join(missing)} (give --exclusive runs of it, or a "
                f"staggered shared run in which it ran alone)"
            )
    return VERDICT_TEXT[pair.verdict]


def distribution_notes(comparison: "Comparison") -> list[str]:
    """What the distributions table's figures are: the copy note (of the device) where a copy metric is shown, and
    the caution about p-values where the tests ran."""
    copies = any(
        d.metric in (COPY_BANDWIDTH.key, COPY_RATE.key)
        for w in comparison.workloads
        for d in w.distributions
    )
    notes = (
        [CPU_COPY_NOTE if comparison.device.split(":")[0] == "cpu" else COPY_NOTE] if copies else []
    )
    return notes + ([CAUTION] if comparison.tested else [])


def pair_share(comparison: "Comparison") -> str:
    """The share mode as it was on the device: ``cpu cores`` for jobs on the CPU."""
    return shown_share(comparison.pair.share, comparison.device)


def _paint(text: str, style: str, color: bool) -> str:
    return f"\x1b[{_COLORS[style]}m{text}\x1b[0m" if color else text


def fmt(x: float, digits: int = 2) -> str:
    """A number for a table, ``n/a`` for NaN."""
    if x is None or math.isnan(x):
        return "n/a"
    return f"{x:,.{digits}f}"


def fmt_estimate(e: Estimate, digits: int = 2) -> str:
    """``2.00 [1.97, 2.03]``, or the bare value when there is no interval."""
    if not e.has_interval:
        return fmt(e.value, digits)
    return f"{fmt(e.value, digits)} [{fmt(e.low, digits)}, {fmt(e.high, digits)}]"


def fmt_p(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.2g}"


class TableLine(str):
    """A line of an aligned table: a screen that wraps prose to its width must not wrap it (it scrolls instead)."""


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None
) -> list[str]:
    """Columns padded to their widest cell; ``right`` marks right-aligned columns; cells printable (a spec's
    control characters escaped)."""
    right = right or [False] * len(headers)
    shown = [[printable(c) for c in r] for r in (headers, *rows)]
    widths = [max(len(c) for c in col) for col in zip(*shown)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return TableLine("  ".join(parts).rstrip())

    return [line(r) for r in shown]


def rate_rows(comparison: "Comparison") -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the rates-and-slowdown table."""
    headers = [
        "workload",
        "spec",
        "exclusive it/s",
        "shared it/s",
        "slowdown r [95% CI]",
        "1/r",
        "baseline",
    ]
    rows = [
        [
            w.slot,
            w.spec,
            fmt(w.exclusive_rate),
            fmt(w.shared_rate),
            fmt_estimate(w.slowdown),
            fmt(w.normalized_throughput.value),
            w.baseline,
        ]
        if w.known is None
        else [w.slot, w.spec, UNKNOWN_RATE, UNKNOWN_RATE, UNKNOWN_RATE, "n/a", "no probe"]
        for w in comparison.workloads
    ]
    return headers, rows


def known_words(w: "WorkloadResult", other: str) -> str:
    """A job without a probe, in words: its rate unknown, and what is known of its slowdown."""
    return (
        f"rate {UNKNOWN_RATE}; what is known: {w.known.phrase(other)}"
        if w.known is not None
        else ""
    )


def comparison_json(comparison: "Comparison") -> dict:
    """The comparison as ``compare --json`` and a report's summary.json give it: the verdict in words first."""
    return {"summary": verdict_sentence(comparison), **comparison.to_dict()}


def verdict_sentence(comparison: "Comparison") -> str:
    """The verdict in the user's words: whether sharing pays, each job's slowdown and its main cause."""
    names = [w.spec.split(":")[0] for w in comparison.workloads]
    slots = [w.slot for w in comparison.workloads]
    shown = labels(names, slots)
    jobs = [
        JobWords(
            shown[i],
            shown[1 - i] if len(shown) == 2 else "",
            w.slowdown.value,
            w.why,
            known_words(w, shown[1 - i] if len(shown) == 2 else ""),
        )
        for i, w in enumerate(comparison.workloads)
    ]
    pair = comparison.pair
    who = list(
        dict.fromkeys(
            f"pid {d.pid} ({d.user or 'unknown user'}, {d.command or 'unknown command'})"
            for d in comparison.disturbed_by
        )
    )
    no_interval = (
        ""
        if pair.stp.has_interval or math.isnan(pair.stp.value)
        else "too few steps for one (the problems say which window)"
    )
    return sentence(
        pair.verdict,
        pair.stp.value,
        fmt_estimate(pair.stp),
        jobs,
        disturbed_by=who,
        no_interval=no_interval,
    )


def why_rows(comparison: "Comparison") -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the why table: each job's extra time per step split by cause."""
    headers = [
        "workload",
        "extra ms/step",
        "GPU",
        "link",
        "CPU",
        "unexplained",
        "link busy alone → shared",
        "cause",
    ]
    rows = []
    for w in comparison.workloads:
        why = w.why
        if why is None:
            continue
        share = [f"{why.shares[k]:.0%}" if k in why.shares else "–" for k in SHARE_KEYS]
        busy = " → ".join("n/a" if math.isnan(b) else f"{b:.0%}" for b in why.link_busy)
        extra = "n/a" if math.isnan(why.extra_s) else f"{why.extra_s * 1e3:,.2f}"
        rows.append([f"{w.slot} {w.spec.split(':')[0]}", extra, *share, busy, why.phrase])
    return headers, rows


def why_evidence(comparison: "Comparison") -> list[str]:
    """One evidence line per job."""
    return [
        f"{w.slot}: {w.why.evidence}"
        for w in comparison.workloads
        if w.why is not None and w.why.evidence
    ]


def distribution_rows(comparison: "Comparison") -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the distributions table."""
    headers = [
        "workload",
        "metric",
        "n excl",
        "n shared",
        "median excl",
        "median shared",
        "shift",
        "Wasserstein",
        "KS D",
        "KS p",
        "chi2 p",
    ]
    rows = []
    for w in comparison.workloads:
        for d in w.distributions:
            values = comparison.samples.get((w.slot, d.metric))
            factor, unit = (
                display_scale(d.unit, np.concatenate(values))
                if values is not None
                else (1.0, d.unit)
            )
            shift = f"{d.median_shift / factor:+,.2f}"
            if not math.isnan(d.relative_shift):
                shift += f" ({d.relative_shift:+.0%})"
            rows.append(
                [
                    w.slot,
                    f"{d.label} ({unit})",
                    str(d.n_exclusive),
                    str(d.n_shared),
                    fmt(d.median_exclusive / factor),
                    fmt(d.median_shared / factor),
                    shift,
                    fmt(d.wasserstein / factor),
                    fmt(d.ks_statistic),
                    fmt_p(d.ks_pvalue),
                    fmt_p(d.chi2_pvalue),
                ]
            )
    return headers, rows


def _other_name(comparison: "Comparison", slot: str) -> str:
    return next((w.spec.split(":")[0] for w in comparison.workloads if w.slot != slot), "")


def render_tables(comparison: "Comparison", color: bool = False) -> list[str]:
    """The whole comparison as plain-text lines (ANSI colour only with ``color=True``)."""
    n_x, n_s = len(comparison.exclusive_runs), len(comparison.shared_runs)
    out = [
        _paint(
            f"Exclusive vs shared: {n_x} exclusive run{'s' * (n_x != 1)}, {n_s} shared run{'s' * (n_s != 1)}; "
            f"intervals {comparison.confidence:.0%}",
            "heading",
            color,
        ),
        "",
        "Rates (iterations/s, warm-up excluded; shared = inside the overlap window) and slowdown r = exclusive/shared",
    ]
    headers, rows = rate_rows(comparison)
    out += table(headers, rows, [False, False, True, True, True, True, False])
    out += [
        printable(f"  {w.slot}: {known_words(w, _other_name(comparison, w.slot))}")
        for w in comparison.workloads
        if w.known
    ]
    pair = comparison.pair
    out += [
        "",
        printable(f"Pair ({pair_share(comparison)}): STP {fmt_estimate(pair.stp)}: ")
        + _paint(verdict_text(comparison), pair.verdict, color),
        "  STP = 1/r_A + 1/r_B, the combined throughput in units of one job alone; sharing pays when STP > 1.",
    ]
    for w in pair.windows:
        out.append(
            printable(
                f"  overlap window of {w.name}: {w.start:.1f}-{w.end:.1f} s ({w.end - w.start:.1f} s)"
            )
        )
    out += ["", _paint("Verdict: ", "heading", color) + printable(verdict_sentence(comparison))]
    headers, rows = why_rows(comparison)
    if rows:
        out += [
            "",
            "Why: each job's extra time per step (shared - exclusive) split by cause "
            '(docs/compare.md, "Why it slowed down")',
        ]
        out += table(headers, rows, [False] + [True] * 6 + [False])
        out += [printable(f"  {line}") for line in why_evidence(comparison)]
    headers, rows = distribution_rows(comparison)
    if rows:
        out += [
            "",
            "Distributions, exclusive vs shared (two-sample KS; chi-square on common bins; effect sizes)",
        ]
        out += table(headers, rows, [False, False] + [True] * 9)
        out += [printable(n) for n in distribution_notes(comparison)]
    if comparison.notes:
        out += ["", "Notes:"] + [printable(f"  - {n}") for n in comparison.notes]
    if comparison.warnings:
        out += ["", _paint("Warnings:", "warning", color)] + [
            printable(f"  - {w}") for w in comparison.warnings
        ]
    return out


def render_histogram(
    exclusive: "np.ndarray",
    shared: "np.ndarray",
    title: str = "",
    unit: str = "",
    width: int = 70,
    height: int = 15,
    bins: int = 20,
    color: bool = False,
) -> str:
    """Exclusive (█) and shared (░) histograms on common bins, drawn by plotext, as one string."""
    # deferred: +0.16 s CPU on gpumon compare, which draws no histogram
    import plotext

    factor, unit = display_scale(unit, np.concatenate([exclusive, shared]))
    edges, h_x, h_s = histogram_counts(
        np.asarray(exclusive) / factor, np.asarray(shared) / factor, bins
    )
    centers = [float(c) for c in (edges[:-1] + edges[1:]) / 2]
    heading = (
        f"{title} ({unit})  █ exclusive  ░ shared" if unit else f"{title}  █ exclusive  ░ shared"
    )
    with _PLOTEXT_LOCK:
        figure = plotext.figure
        figure.clear()
        figure.plot_size(width, height)
        figure.draw(figure.bar(centers, [h_x.tolist(), h_s.tolist()], marker=["█", "░"]))
        figure.title(heading.strip())
        figure.theme("default" if color else "colorless")
        return figure.build().string(colorless=not color)
