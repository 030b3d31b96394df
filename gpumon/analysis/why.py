"""Why each job of a compared pair slowed down: evidence from the compared windows, rules from core.interference.attribution."""

from __future__ import annotations

import math
from typing import Sequence

from gpumon.analysis.rates import Segment
from gpumon.core.interference import evidence
from gpumon.core.interference.attribution import SHARE_KEYS, Attribution, Job, Side, attribute_pair
from gpumon.core.store.trace import Run

NAN = math.nan


def _side(runs: dict[str, Run], segments: Sequence[Segment], rate: float) -> Side:
    """The evidence of one condition, repeats merged by window length; its step is 1 / the compared rate."""
    step_s = 1 / rate if rate > 0 else NAN
    sides = [
        (
            evidence.run_side(evidence.Window(runs[s.run], s.slot, s.start, s.end), step_s),
            s.end - s.start,
        )
        for s in segments
        if s.run in runs
    ]
    return evidence.merge(sides, step_s)


def attribute_jobs(
    runs: Sequence[Run],
    jobs: Sequence[tuple[str, str, float, float, Sequence[Segment], Sequence[Segment]]],
) -> dict[str, Attribution]:
    """Attributions by slot; each job is (slot, spec, exclusive rate, shared rate, exclusive and shared segments)."""
    by_path = {str(r.path): r for r in runs}
    built = []
    h2d_bps = NAN
    for slot, spec, x_rate, s_rate, x_segments, s_segments in jobs:
        x = _side(by_path, x_segments, x_rate)
        s = _side(by_path, s_segments, s_rate)
        first = by_path.get(s_segments[0].run) if s_segments else None
        cores = (
            evidence.workload_cores(first, s_segments[0].slot) if first is not None else frozenset()
        )
        built.append(Job(slot, x, s, cores))
        if spec.split(":")[0].strip() == "h2d":
            h2d_bps = evidence.copy_bandwidth(x)
    box = evidence.box_of(list(runs), h2d_bps)
    return attribute_pair(built[0], built[1] if len(built) > 1 else None, box)


def cause_columns(why: Attribution | None) -> dict[str, object]:
    """A job's cause as table columns (report and experiment CSVs): cause, one share per cause, evidence."""
    shares = why.shares if why is not None else {}
    return {
        "cause": why.cause if why is not None else "",
        **{f"{k}_share": shares.get(k, NAN) for k in SHARE_KEYS},
        "evidence": why.evidence if why is not None else "",
    }


def nvml_warning(runs: Sequence[Run]) -> str:
    """A warning for CUDA runs recorded without NVML data (their cause cannot be told), else ""."""
    missing = [
        r.path.name
        for r in runs
        if evidence.device_of(r).startswith("cuda") and not evidence.has_nvml_data(r)
    ]
    if not missing:
        return ""
    return (
        f"no NVML data in {', '.join(missing)}: GPU utilisation and PCIe traffic are missing, "
        "so the cause of a slowdown cannot be told (cannot tell: no NVML data)"
    )
