"""``predict(exclusive)``: a pair's slowdowns and STP from each job's solo runs, before it ever shares.

Solo evidence comes through ``gpumon.core.interference.evidence`` and ``core.store.trace`` (the exclusive rate, as ``gpumon runs``
and compare define it, from the steps cache without pandas where there is one; NVML utilisation, GPM SM
activity, copies, CPU and pinned cores); the physics is ``predict_model``'s. The JSON
has ``compare --json``'s shape where they overlap (docs/predict.md).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from gpumon.analysis.compare import spec_key
from gpumon.core.records.slots import SLOTS
from gpumon.analysis.predict_model import CONSTANTS, CPU, MPS, TIMESLICE, PairPrediction, Solo, predict_pair, reason
from gpumon.analysis.slowdown import Estimate
from gpumon.core.interference import evidence
from gpumon.core.interference.evidence import Window, mixed_devices, run_side
from gpumon.core.records.rates import exclusive_rate, verdict
from gpumon.core.store.trace import Run, exclusive_ends
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


Member = tuple[Run, str, str, dict[str, tuple[list[float], list[float]]]]  # a solo run, its slot, spec and step ends


def _solo(member: Member, device_kind: str) -> tuple[float, Solo, bool]:
    """The exclusive rate and the solo profile of the member's job (post-warm-up window)."""
    run, slot, _, ends = member
    times, steps = ends.get(slot, ([], []))
    if len(times) < 2 or times[-1] <= times[0]:
        raise UsageError(f"{run.path}: workload {slot} is too short to have steps after its warm-up")
    rate = exclusive_rate(times, steps)
    side = run_side(Window(run, slot, times[0], times[-1]), 1 / rate)
    cores = evidence.workload_cores(run, slot)
    if device_kind == "cpu":
        share = side.cpu_pct / 100 / len(cores) if cores and not math.isnan(side.cpu_pct) else math.nan
        return rate, Solo(1 / rate, cpu_share=share, cores=cores), False
    nvml = evidence.has_nvml_data(run)
    busy = side.gpu_util / 100 if nvml else math.nan
    fill = side.sm_active / side.gpu_util if nvml and side.gpu_util > 0 else math.nan  # NaN: no GPM columns
    copy = side.copy_s if not math.isnan(side.copy_s) else 0.0
    return rate, Solo(1 / rate, busy=busy, fill=fill, copy_s=copy, cores=cores), nvml


def read_jobs(exclusive: Sequence[Run], assign: dict[str, str] | None = None) -> tuple[tuple[Job, Job], str]:
    """The two jobs (repeats grouped by spec, or by A=/B=) and the device kind; one job given is paired with itself."""
    if not exclusive:
        raise UsageError("predict needs --exclusive runs of the two jobs (see gpumon predict --help)")
    problem = mixed_devices(exclusive)
    if problem:
        raise UsageError(problem)
    groups: dict[str, list[Member]] = {}
    for run in exclusive:
        ends = exclusive_ends(run, whole=False)  # each job's first and last post-warm-up step, read once
        named = [w for w in run.workloads if w.slot]
        if run.mode == "shared" or len(ends) > 1 or len(named) > 1:
            raise UsageError(f"{run.path}: not an exclusive run (two workloads shared the device); predict reads solo runs")
        slot = named[0].slot if named else next(iter(ends), "")
        spec = run.specs.get(slot, "?")
        key = (assign or {}).get(str(run.path)) or spec_key(spec)
        groups.setdefault(key, []).append((run, slot, spec, ends))
    if len(groups) > 2:
        raise UsageError(f"predict takes the runs of two jobs; these are of {len(groups)}: {', '.join(groups)}")
    kind = evidence.device_identity(exclusive[0])[0]
    jobs = [_job(slot, members, kind) for slot, members in zip(SLOTS, groups.values())]
    if len(jobs) == 1:
        jobs.append(_job("B", next(iter(groups.values())), kind))
    return (jobs[0], jobs[1]), kind


def _job(slot: str, members: list[Member], kind: str) -> Job:
    solos = [_solo(member, kind) for member in members]
    rates_ = [r for r, _, _ in solos]
    mean = sum(rates_) / len(rates_)
    spread = (math.sqrt(sum((r - mean) ** 2 for r in rates_) / (len(rates_) - 1)) / mean) if len(rates_) > 1 else 0.0
    profiles = [s for _, s, _ in solos]
    solo = Solo(1 / mean, busy=_mean(p.busy for p in profiles), fill=_mean(p.fill for p in profiles),
                copy_s=sum(p.copy_s for p in profiles) / len(profiles),
                cpu_share=_mean(p.cpu_share for p in profiles), cores=profiles[0].cores)
    return Job(slot, members[0][2], tuple(str(member[0].path) for member in members), mean, spread, solo,
               all(n for _, _, n in solos))


def _mean(values: Iterable[float]) -> float:
    """The mean of the known values (NaN: none known)."""
    known = [v for v in values if not math.isnan(v)]
    return sum(known) / len(known) if known else math.nan


def predict(exclusive: Sequence[Run], share: str = TIMESLICE, assign: dict[str, str] | None = None) -> list[Prediction]:
    """Predictions for ``share`` (``timeslice``, ``mps`` or ``all``); on the CPU, the one for pinned cores."""
    jobs, kind = read_jobs(exclusive, assign)
    if kind == "cpu":
        if not all(j.solo.cores for j in jobs):
            raise UsageError("CPU runs without recorded cores (affinity): nothing to predict; pin them with cpus=")
        return [_prediction(jobs, CPU)]
    modes = MODES if share == "all" else (share,)
    return [_prediction(jobs, m) for m in modes]


def intervals(points: Sequence[PairPrediction], mode: str, spreads: Sequence[float] = (0.0, 0.0)
              ) -> tuple[tuple[Estimate, Estimate], Estimate]:
    """Each job's r and the pair's STP with their 95 % intervals, from the point predictions ``points`` (the first is
    the estimate; the others, if any, span what the evidence leaves open) and the jobs' solo spreads: r * (1 +- e),
    e = sqrt(E_r^2 + s^2), and STP * (1 +- sqrt(E_STP^2 + s_STP^2)), s_STP the spreads weighted by each job's 1/r."""
    c = CONSTANTS
    value = points[0]
    rel = [math.hypot(c.r_error(mode), s) for s in spreads]
    r = tuple(Estimate(value.slowdown[i], min(p.slowdown[i] for p in points) * (1 - rel[i]),
                       max(p.slowdown[i] for p in points) * (1 + rel[i])) for i in range(2))
    weights = [1 / x / value.stp for x in value.slowdown] if value.stp > 0 else [0.0, 0.0]
    rel_stp = math.hypot(c.stp_error(mode), math.hypot(*(w * s for w, s in zip(weights, spreads))))
    pair = Estimate(value.stp, min(p.stp for p in points) * (1 - rel_stp), max(p.stp for p in points) * (1 + rel_stp))
    return (r[0], r[1]), pair


def _prediction(jobs: tuple[Job, Job], mode: str) -> Prediction:
    a, b = (j.solo for j in jobs)
    notes: list[str] = []
    points = [predict_pair(a, b, mode)]
    if mode != CPU and not all(j.nvml for j in jobs):
        lacking = ", ".join(j.slot for j in jobs if not j.nvml)
        notes.append(f"no NVML data for {lacking}: the GPU-busy share is unknown, so the interval spans a job "
                     "all on the host (busy 0) to one all on the GPU (busy 1)")
        points = [predict_pair(*(_busy(j, x) for j in jobs), mode) for x in (0.5, 0.0, 1.0)]
    r, pair = intervals(points, mode, [j.spread for j in jobs])
    names = (jobs[0].spec, jobs[1].spec)
    return Prediction(mode, jobs, r, pair, verdict(pair.low, pair.high), reason(a, b, mode, names), tuple(notes))


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
    from gpumon.core.store.trace import TraceError, load_run

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
