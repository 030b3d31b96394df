"""``gpumon experiment --predict``: each pair predicted from the exclusive cells alone, then beside what was measured."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import pandas as pd

from gpumon.core.records.enums import ShareKind
from gpumon.errors import UsageError
from gpumon.experiments.runner.cells import share_label
from gpumon.experiments.study.results import NA, Context, fmt_ci, md_table

if TYPE_CHECKING:
    from gpumon.analysis.compare import Comparison
    from gpumon.analysis.predict import Prediction

from gpumon.experiments.runner.conduct import PREDICTED_FILE as PREDICTED
from gpumon.analysis.predict import predict

CSV = "predicted.csv"


@dataclass
class Predicted:
    """One pair of a share mode: its prediction from the exclusive cells (else why not), and the measurement."""

    a: str
    b: str
    share: str
    prediction: "Prediction | None" = None
    problem: str = ""
    measured: "Comparison | None" = None

    @property
    def name(self) -> str:
        jobs = f"{self.a}+{self.b}"
        return jobs if self.share == ShareKind.TIMESLICE else f"{jobs}-{share_label(self.share)}"


def predict_pairs(ctx: Context) -> list[Predicted]:
    """Every shared cell's pair, predicted from the exclusive cells of its two jobs."""
    out: dict[tuple[str, str, str], Predicted] = {}
    for cell in ctx.cells:
        if cell.mode != "shared" or (cell.keys[0], cell.keys[1], cell.share) in out:
            continue
        a, b = cell.keys
        item = out.setdefault((a, b, cell.share), Predicted(a, b, cell.share))
        runs = {
            k: ctx.runs([c for c in ctx.cells if c.mode == "exclusive" and c.keys == (k,)])
            for k in (a, b)
        }
        missing = [k for k in (a, b) if not runs[k]]
        if missing:
            item.problem = f"no exclusive run of {' and '.join(dict.fromkeys(missing))}"
            continue
        chosen = runs[a] if a == b else [*runs[a], *runs[b]]
        assign = (
            {}
            if a == b
            else {**{str(r.path): "A" for r in runs[a]}, **{str(r.path): "B" for r in runs[b]}}
        )
        share = "mps" if cell.share.startswith("mps") else "timeslice"
        try:
            item.prediction = predict(chosen, share, assign)[0]
        except UsageError as exc:
            item.problem = str(exc)
    return list(out.values())


def _error(predicted: float, measured: float) -> float:
    """Relative error of a prediction, (predicted − measured) / measured."""
    return (
        (predicted - measured) / measured
        if measured > 0 and not math.isnan(predicted)
        else math.nan
    )


def _pct(x: float) -> str:
    return NA if math.isnan(x) else f"{100 * x:+.0f} %"


Record = dict[str, str | float]  # one pair's line of predicted.csv


def rows(
    items: Sequence[Predicted],
) -> tuple[list[list[str]], list[Record], list[float], list[float]]:
    """Table rows, CSV records, and the relative errors of r and of STP over measured pairs."""
    table, records, r_errors, stp_errors = [], list[Record](), [], []
    for it in items:
        p, m = it.prediction, it.measured
        if p is None:
            table.append([it.name, NA, NA, NA, NA, NA, it.problem])
            records.append(
                {"pair": it.name, "a": it.a, "b": it.b, "share": it.share, "problem": it.problem}
            )
            continue
        cells = [it.name]
        record: Record = {"pair": it.name, "a": it.a, "b": it.b, "share": it.share}
        for slot, r in zip("AB", p.slowdown):
            measured = m.workload(slot).slowdown.value if m is not None else math.nan
            err = _error(r.value, measured)
            if not math.isnan(err):
                r_errors.append(abs(err))
            cells.append(
                f"{fmt_ci(r)} / {'–' if math.isnan(measured) else f'{measured:.2f}'} ({_pct(err)})"
                if m is not None
                else fmt_ci(r)
            )
            record.update(
                {
                    f"r_{slot}_predicted": r.value,
                    f"r_{slot}_low": r.low,
                    f"r_{slot}_high": r.high,
                    f"r_{slot}_measured": measured,
                    f"r_{slot}_error": err,
                }
            )
        measured_stp = m.pair.stp.value if m is not None else math.nan
        err = _error(p.stp.value, measured_stp)
        if not math.isnan(err):
            stp_errors.append(abs(err))
        cells += [
            fmt_ci(p.stp) + (f" / {measured_stp:.2f} ({_pct(err)})" if m is not None else ""),
            p.verdict,
            m.pair.verdict if m is not None else "not run yet",
            p.reason,
        ]
        record.update(
            {
                "stp_predicted": p.stp.value,
                "stp_low": p.stp.low,
                "stp_high": p.stp.high,
                "stp_measured": measured_stp,
                "stp_error": err,
                "verdict_predicted": p.verdict,
                "verdict_measured": m.pair.verdict if m is not None else "",
                "reason": p.reason,
                "problem": "",
            }
        )
        table.append(cells)
        records.append(record)
    return table, records, r_errors, stp_errors


def predicted_section(ctx: Context, items: Sequence[Predicted]) -> list[str]:
    """The predicted-beside-measured table, the MAPE of r and of STP, and predicted.csv."""
    table, records, r_errors, stp_errors = rows(items)
    ctx.output_csv(pd.DataFrame(records), CSV)
    headers = [
        "pair",
        "r_A predicted / measured (error)",
        "r_B predicted / measured (error)",
        "STP predicted / measured (error)",
        "verdict predicted",
        "verdict measured",
        "why (predicted)",
    ]
    if not any(it.measured is not None for it in items):
        headers = [
            "pair",
            "r_A predicted",
            "r_B predicted",
            "STP predicted",
            "verdict predicted",
            "measured",
            "why",
        ]
    mape = [
        f"MAPE of r {100 * sum(r_errors) / len(r_errors):.1f} % over {len(r_errors)} jobs"
        if r_errors
        else "",
        f"MAPE of STP {100 * sum(stp_errors) / len(stp_errors):.1f} % over {len(stp_errors)} pairs"
        if stp_errors
        else "",
    ]
    return [
        "## Predicted from the exclusive runs alone",
        "",
        "Each pair's slowdowns and STP as `gpumon predict` foretells them from the two jobs' exclusive cells "
        "(docs/predict.md: the model, its 95 % intervals and its accuracy on an H100), beside the measured "
        "values once the shared cell has run; error = (predicted − measured) / measured.",
        "",
        *md_table(headers, table),
        "",
        *([", ".join(m for m in mape if m) + ".", ""] if any(mape) else []),
        f"CSV: [{CSV}]({CSV}).",
    ]


def write_predicted(ctx: Context) -> Path:
    """predicted.md: the pairwise predictions from the exclusive cells, before any shared cell runs."""
    lines = [
        f"# {ctx.spec.title or ctx.spec.name}: predicted before sharing",
        "",
        *predicted_section(ctx, predict_pairs(ctx)),
    ]
    return ctx.output_text(PREDICTED, "\n".join(lines) + "\n")
