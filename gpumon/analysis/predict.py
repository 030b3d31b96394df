"""``predict(exclusive)``: a pair's slowdowns and STP from each job's solo runs, before it ever shares.

Solo evidence comes through ``gpumon.core.evidence`` (step time from ``analysis.rates``'s curve, NVML
utilisation or GPM SM activity, CPU and pinned cores); the physics is ``predict_model``'s. The JSON
has ``compare --json``'s shape where they overlap (docs/predict.md).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from gpumon.analysis import rates
from gpumon.analysis.compare import SLOTS, spec_key
from gpumon.analysis.predict_model import CONSTANTS, CPU, MPS, TIMESLICE, Solo, predict_pair, reason
from gpumon.analysis.slowdown import Estimate
from gpumon.core import evidence
from gpumon.core.evidence import Window, mixed_devices, run_side
from gpumon.core.rates import stp, verdict
from gpumon.core.trace import Run
from gpumon.errors import UsageError

MODES = (TIMESLICE, MPS)


@dataclass(frozen=True)
class Job:
    """One job's solo runs read once: its spec, mean exclusive rate, their relative spread, and its solo profile."""

    slot: str
    spec: str
    runs: tuple[str, ...]
    rate: float
    spread: float
    solo: Solo
    nvml: bool


@dataclass(frozen=True)
class Prediction:
    """One sharing mode's prediction for the pair."""

    share: str
    jobs: tuple[Job, Job]
    slowdown: tuple[Estimate, Estimate]
    stp: Estimate
    verdict: str
    reason: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "share": self.share,
            "exclusive_runs": [r for j in self.jobs for r in j.runs],
            "workloads": {j.slot: {"spec": j.spec, "exclusive_rate": j.rate, "slowdown": s.to_dict()}
                          for j, s in zip(self.jobs, self.slowdown)},
            "pair": {"stp": self.stp.to_dict(), "verdict": self.verdict, "share": self.share, "reason": self.reason},
            "notes": list(self.notes),
        }


def _solo(run: Run, slot: str, device_kind: str) -> tuple[float, Solo, bool]:
    """The exclusive rate and the solo profile of ``slot`` in ``run`` (post-warm-up window)."""
    curve = rates.curve(run, slot)
    if curve is None or curve.last_t <= curve.first_t:
        raise UsageError(f"{run.path}: workload {slot} is too short to have steps after its warm-up")
    window = curve.span()
    rate = curve.rate(window)
    side = run_side(Window(run, slot, window.start, window.end), 1 / rate)
    cores = evidence.workload_cores(run, slot)
    if device_kind == "cpu":
        share = side.cpu_pct / 100 / len(cores) if cores and not math.isnan(side.cpu_pct) else math.nan
        return rate, Solo(1 / rate, cpu_share=share, cores=cores), False
    nvml = evidence.has_nvml_data(run)
    busy = side.sm_active if not math.isnan(side.sm_active) else side.gpu_util
    copy = side.copy_s if not math.isnan(side.copy_s) else 0.0
    return rate, Solo(1 / rate, busy=busy / 100 if nvml else math.nan, copy_s=copy, cores=cores), nvml


def read_jobs(exclusive: Sequence[Run], assign: dict[str, str] | None = None) -> tuple[tuple[Job, Job], str]:
    """The two jobs (repeats grouped by spec, or by A=/B=) and the device kind; one job given is paired with itself."""
    if not exclusive:
        raise UsageError("predict needs --exclusive runs of the two jobs (see gpumon predict --help)")
    problem = mixed_devices(exclusive)
    if problem:
        raise UsageError(problem)
    groups: dict[str, list[tuple[Run, str, str]]] = {}
    for run in exclusive:
        if run.mode == "shared" or len(run.jobs()) > 1:
            raise UsageError(f"{run.path}: not an exclusive run (two workloads shared the device); predict reads solo runs")
        slot = str(next(iter(run.jobs()), ""))
        meta = next((w for w in run.workloads if isinstance(w, dict) and w.get("process") == slot), {})
        spec = str(meta.get("spec", "?"))
        key = (assign or {}).get(str(run.path)) or spec_key(spec)
        groups.setdefault(key, []).append((run, slot, spec))
    if len(groups) > 2:
        raise UsageError(f"predict takes the runs of two jobs; these are of {len(groups)}: {', '.join(groups)}")
    kind = evidence.device_identity(exclusive[0])[0]
    jobs = [_job(slot, members, kind) for slot, members in zip(SLOTS, groups.values())]
    if len(jobs) == 1:
        jobs.append(_job("B", next(iter(groups.values())), kind))
    return (jobs[0], jobs[1]), kind


def _job(slot: str, members: list[tuple[Run, str, str]], kind: str) -> Job:
    solos = [_solo(run, own, kind) for run, own, _ in members]
    rates_ = [r for r, _, _ in solos]
    mean = sum(rates_) / len(rates_)
    spread = (math.sqrt(sum((r - mean) ** 2 for r in rates_) / (len(rates_) - 1)) / mean) if len(rates_) > 1 else 0.0
    profiles = [s for _, s, _ in solos]
    busy = [p.busy for p in profiles if not math.isnan(p.busy)]
    shares = [p.cpu_share for p in profiles if not math.isnan(p.cpu_share)]
    solo = Solo(1 / mean, busy=sum(busy) / len(busy) if busy else math.nan,
                copy_s=sum(p.copy_s for p in profiles) / len(profiles),
                cpu_share=sum(shares) / len(shares) if shares else math.nan, cores=profiles[0].cores)
    return Job(slot, members[0][2], tuple(str(run.path) for run, _, _ in members), mean, spread, solo,
               all(n for _, _, n in solos))


def _interval(value: float, rel: float) -> Estimate:
    return Estimate(value, value * (1 - rel), value * (1 + rel))


def predict(exclusive: Sequence[Run], share: str = TIMESLICE, assign: dict[str, str] | None = None) -> list[Prediction]:
    """Predictions for ``share`` (``timeslice``, ``mps`` or ``all``); on the CPU, the one for pinned cores."""
    jobs, kind = read_jobs(exclusive, assign)
    if kind == "cpu":
        if not all(j.solo.cores for j in jobs):
            raise UsageError("CPU runs without recorded cores (affinity): nothing to predict; pin them with cpus=")
        return [_prediction(jobs, CPU)]
    modes = MODES if share == "all" else (share,)
    return [_prediction(jobs, m) for m in modes]


def _prediction(jobs: tuple[Job, Job], mode: str) -> Prediction:
    a, b = (j.solo for j in jobs)
    notes: list[str] = []
    err = CONSTANTS.relative_error(mode)
    rel = [math.sqrt(err ** 2 + j.spread ** 2) for j in jobs]
    if mode != CPU and not all(j.nvml for j in jobs):
        lacking = ", ".join(j.slot for j in jobs if not j.nvml)
        notes.append(f"no NVML data for {lacking}: the GPU-busy share is unknown, so the interval spans a job "
                     "all on the host (busy 0) to one all on the GPU (busy 1)")
        ends = [predict_pair(*(_busy(j, x) for j in jobs), mode) for x in (0.0, 1.0)]
        mid = [predict_pair(*(_busy(j, 0.5) for j in jobs), mode)]
        r = [Estimate(mid[0].slowdown[i], min(e.slowdown[i] for e in ends) * (1 - rel[i]),
                      max(e.slowdown[i] for e in ends) * (1 + rel[i])) for i in range(2)]
    else:
        point = predict_pair(a, b, mode)
        r = [_interval(point.slowdown[i], rel[i]) for i in range(2)]
    value = stp([e.value for e in r])
    low, high = stp([e.high for e in r]), stp([e.low for e in r])
    names = (jobs[0].spec, jobs[1].spec)
    return Prediction(mode, jobs, (r[0], r[1]), Estimate(value, low, high), verdict(low, high),
                      reason(a, b, mode, names), tuple(notes))


def _busy(job: Job, busy: float) -> Solo:
    s = job.solo
    return dataclasses.replace(s, busy=busy if math.isnan(s.busy) else s.busy)


def better(predictions: Sequence[Prediction]) -> str | None:
    """The mode whose STP interval lies wholly above every other's, else None (cannot tell)."""
    for p in predictions:
        if all(p.stp.low > q.stp.high for q in predictions if q is not p):
            return p.share
    return None


def live_line(baselines: Sequence[tuple[str, str]], share: str = TIMESLICE) -> str:
    """``predicted r A 1.52 B 1.58, STP 0.95`` for the live line from the ``--baseline`` runs of A and B ("" if
    they do not make a pair the model can read: each is a solo run, from one device)."""
    from gpumon.core.trace import TraceError, load_run

    paths = dict(baselines)
    if not {"A", "B"} <= set(paths):
        return ""
    same = Path(paths["A"]).resolve() == Path(paths["B"]).resolve()
    try:
        runs = [load_run(paths["A"])] + ([] if same else [load_run(paths["B"])])
        assign = {} if same else {str(runs[0].path): "A", str(runs[1].path): "B"}
        p = predict(runs, share if share in MODES else TIMESLICE, assign)[0]
    except (UsageError, TraceError):
        return ""
    r = "  ".join(f"{j.slot} r {e.value:.2f}" for j, e in zip(p.jobs, p.slowdown))
    return f"predicted {r}, STP {p.stp.value:.2f}"
