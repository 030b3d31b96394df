"""Live interference figures: slowdown r = x / s per job, STP = sum of 1 / r, and a plain verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from gpumon.core.trace import load_run, summarize
from gpumon.errors import UsageError

NAN = math.nan


@dataclass(frozen=True)
class Interference:
    """What sharing costs right now; ``slowdown`` holds NaN for a job without an exclusive rate."""

    slowdown: dict[str, float]
    stp: float
    verdict: str


def slowdown(exclusive: float, shared: float) -> float:
    """r = x / s (NaN unless both rates are positive)."""
    if exclusive > 0 and shared > 0 and math.isfinite(exclusive) and math.isfinite(shared):
        return exclusive / shared
    return NAN


def verdict(stp: float) -> str:
    if math.isnan(stp):
        return ""
    if round(stp, 2) == 1:
        return f"sharing breaks even: STP {stp:.2f}"
    return f"sharing pays: STP {stp:.2f}" if stp > 1 else f"sharing loses: STP {stp:.2f}"


def interference(exclusive: dict[str, float], shared: dict[str, float]) -> Interference:
    """Slowdowns of every job in ``shared``; STP and the verdict when every job has both rates."""
    ratios = {slot: slowdown(exclusive.get(slot, NAN), rate) for slot, rate in sorted(shared.items())}
    known = [r for r in ratios.values() if not math.isnan(r)]
    if len(ratios) < 2 or len(known) < len(ratios):
        missing = [slot for slot, r in ratios.items() if math.isnan(r) and math.isnan(exclusive.get(slot, NAN))]
        text = f"STP needs the exclusive rate of {' and '.join(missing)}" if missing and len(ratios) > 1 else ""
        return Interference(ratios, NAN, text)
    stp = sum(1 / r for r in known)
    return Interference(ratios, stp, verdict(stp))


def baseline_rate(slot: str, path: str | Path) -> float:
    """The exclusive rate of ``slot`` in a recorded run (its only job's rate if it ran one job)."""
    run = load_run(path)
    rates = {k: v for k, v in summarize(run).rates.items() if not math.isnan(v)}
    if slot in rates:
        return rates[slot]
    if len(rates) == 1:
        return next(iter(rates.values()))
    raise UsageError(f"baseline run {run.path.name} has no post-warm-up rate for {slot}")
