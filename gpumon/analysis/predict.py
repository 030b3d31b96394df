"""``predict(exclusive)``: a pair's slowdowns and STP from each job's solo runs, before it ever shares.

Solo evidence comes through ``gpumon.core.interference.evidence`` and ``core.store.trace`` (the exclusive rate, as ``gpumon runs``
and compare define it, from the steps cache without pandas where there is one; NVML utilisation, GPM SM
activity, copies, CPU and pinned cores); the physics is ``predict_model``'s, with the constants of the runs' GPU
model (``gpumon calibrate``'s, ``core.store.calibration``, else fitted, else the default with wider intervals).
The JSON has ``compare --json``'s shape where they overlap (docs/predict.md).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from gpumon.analysis.compare import spec_key
from gpumon.analysis.predict_model import (
    CORE_ROOM,
    CPU,
    DEFAULT,
    ERRORS,
    FITTED,
    MPS,
    TIMESLICE,
    UNCALIBRATED,
    Constants,
    PairPrediction,
    Solo,
    predict_pair,
    reason,
    structured,
)
from gpumon.analysis.predict_phase import PARTNER_SPEC, Phase, with_phase
from gpumon.core.records.slots import SLOTS
from gpumon.analysis.slowdown import Estimate
from gpumon.core.interference import evidence
from gpumon.core.interference.evidence import Window, mixed_devices, run_side
from gpumon.core.records.rates import exclusive_rate, verdict
from gpumon.core.store import calibration
from gpumon.core.store.stepchunks import step_chunks
from gpumon.core.store.trace import Run, TraceError, exclusive_ends, load_run
from gpumon.errors import UsageError

MODES = (TIMESLICE, MPS)
# What a mode's constants are: a calibration names them all, or the mode's prediction is uncalibrated
NEEDED = {TIMESLICE: ("slice_s", "switch_s", "util_scale"), MPS: ("sm_fill", "util_scale")}


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
    copies: bool = True  # its copy time was recorded (a timed copy, or a built-in job that declares its copies)


@dataclass(frozen=True)
class Model:
    """The constants a prediction used, and where they came from."""

    gpu: str
    constants: Constants | None  # None: no device constants (pinned CPU cores)
    calibrated: bool
    source: str
    probed: bool = False  # a constant the mode needs was measured by `gpumon calibrate`'s probes, not fitted on pairs

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "constants": self.constants.to_dict() if self.constants else {},
            "calibrated": self.calibrated,
            "probed": self.probed,
            "source": self.source,
        }


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
    model: Model | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "share": self.share,
            "exclusive_runs": [r for j in self.jobs for r in j.runs],
            "workloads": {
                j.slot: {"spec": j.spec, "exclusive_rate": j.rate, "slowdown": s.to_dict()}
                for j, s in zip(self.jobs, self.slowdown)
            },
            "pair": {
                "stp": self.stp.to_dict(),
                "verdict": self.verdict,
                "share": self.share,
                "reason": self.reason,
            },
            "model": self.model.to_dict() if self.model is not None else None,
            "notes": list(self.notes),
        }


Member = tuple[
    Run, str, str, dict[str, tuple[list[float], list[float]]]
]  # a solo run, its slot, spec and step ends


def _copies_recorded(run: Run, slot: str) -> bool:
    """Whether the job's copy time is known: a step of it timed a copy, or its meta declares its copies (a
    built-in job's ``copy_bytes_per_step``, 0 for one that copies nothing); else copies it made went unseen."""
    job = run.meta.workload(slot)
    if job is not None and isinstance(job.meta, dict) and "copy_bytes_per_step" in job.meta:
        return True
    import numpy as np

    try:
        return any(
            bool(np.any(~np.isnan(chunk.columns["copy_s"][chunk.rows_of(slot)])))
            for chunk in step_chunks(run, ("copy_s",), make=False)
        )
    except TraceError:
        return False


def _solo(member: Member, device_kind: str) -> tuple[float, Solo, bool, bool]:
    """The exclusive rate, the solo profile of the member's job (post-warm-up window), NVML seen, copies known."""
    run, slot, _, ends = member
    times, steps = ends.get(slot, ([], []))
    if len(times) < 2 or times[-1] <= times[0]:
        raise UsageError(
            f"{run.path}: workload {slot} is too short to have steps after its warm-up"
        )
    rate = exclusive_rate(times, steps)
    window = Window(run, slot, times[0], times[-1])
    side = run_side(window, 1 / rate)
    cores = evidence.workload_cores(run, slot)
    if device_kind == "cpu":
        share = (
            side.cpu_pct / 100 / len(cores) if cores and not math.isnan(side.cpu_pct) else math.nan
        )
        busy = evidence.cores_busy(window, cores)
        contended = (
            busy >= 1 - CORE_ROOM and busy - share > CORE_ROOM
        )  # full, and not with this job's work alone
        return rate, Solo(1 / rate, cpu_share=share, cores=cores, contended=contended), False, True
    nvml = evidence.has_nvml_data(run)
    busy = side.gpu_util / 100 if nvml else math.nan
    fill = (
        side.sm_active / side.gpu_util if nvml and side.gpu_util > 0 else math.nan
    )  # NaN: no GPM columns
    copy = side.copy_s if not math.isnan(side.copy_s) else 0.0
    copies = _copies_recorded(run, slot)
    waits = (
        (1.0 if copy > 0 else 0.0) if copies else math.nan
    )  # D: the step's structure, where its copies are seen
    solo = Solo(1 / rate, busy=busy, fill=fill, copy_s=copy, cores=cores, copy_waits=waits)
    phased = partner_phase(run)
    if (
        phased and not run.meta.share.mps
    ):  # turns are time slicing's: a phase under MPS measures none
        gpu = evidence.device_identity(run)[1]
        solo = with_phase(solo, phased[1], gpu_model(gpu, TIMESLICE)[0].constants or DEFAULT)
    return rate, solo, nvml, copies


def partner_phase(
    run: Run,
) -> tuple[dict[str, tuple[list[float], list[float]]], Phase | None] | None:
    """A run of ``gpumon run JOB --partner-phase``: job A's first and last post-warm-up steps before the standard
    partner started (its solo part, read like an exclusive run) and its phase beside the partner (A's step there,
    the partner's rate beside it, the partner's rate alone from this GPU's calibration where `gpumon calibrate`
    measured it; None where the partner took no two steps beside it); None for any other run."""
    specs = run.specs
    stagger = run.meta.stagger_s
    if set(specs) != {"A", "B"} or specs["B"].split(":")[0] != PARTNER_SPEC or not stagger:
        return None
    codes, names, (t, n, warmup) = run.step_columns(("t", "step", "warmup"), whole=False)
    rows = {
        slot: sorted(
            (float(a), float(b))
            for a, b, w, c in zip(t, n, warmup, codes)
            if names[c] == slot and w != 1 and math.isfinite(a) and math.isfinite(b)
        )
        for slot in ("A", "B")
    }
    # the partner was launched at the stagger (run time), or earlier if a step of it says so
    started = min([float(stagger), *(float(a) for a, c in zip(t, codes) if names[c] == "B")])
    alone = [r for r in rows["A"] if r[0] < started]
    beside = [r for r in rows["A"] if rows["B"] and r[0] >= rows["B"][0][0]]
    if len(alone) < 2:
        return None
    ends = {"A": ([alone[0][0], alone[-1][0]], [alone[0][1], alone[-1][1]])}
    if len(beside) < 2 or len(rows["B"]) < 2 or beside[-1][1] <= beside[0][1]:
        return (
            ends,
            None,
        )  # the partner never stepped beside it (a phase too short): the solo part stands
    step = (beside[-1][0] - beside[0][0]) / (beside[-1][1] - beside[0][1])
    partner = exclusive_rate([r[0] for r in rows["B"]], [r[1] for r in rows["B"]])
    return ends, Phase(step, partner_rate(evidence.device_identity(run)[1]), partner)


def partner_rate(gpu: str) -> float:
    """The standard partner's steps per second alone on GPU model ``gpu``, as `gpumon calibrate` stored it (NaN:
    not measured: the phase then gives the job's turns per step but not the pressure it exerts)."""
    try:
        measured = calibration.load(gpu) if gpu else None
    except calibration.CalibrationError:
        return math.nan
    rate = measured.details.get("partner_rate") if measured else None
    return float(rate) if isinstance(rate, (int, float)) and rate > 0 else math.nan


def read_jobs(
    exclusive: Sequence[Run], assign: dict[str, str] | None = None
) -> tuple[tuple[Job, Job], str]:
    """The two jobs (repeats grouped by spec, or by A=/B=) and the device kind; one job given is paired with itself."""
    if not exclusive:
        raise UsageError(
            "predict needs --exclusive runs of the two jobs (see gpumon predict --help)"
        )
    problem = mixed_devices(exclusive)
    if problem:
        raise UsageError(problem)
    groups: dict[str, list[Member]] = {}
    for run in exclusive:
        phased = partner_phase(run)
        ends = (
            phased[0] if phased else exclusive_ends(run, whole=False)
        )  # each job's first and last post-warm-up step (alone), read once
        named = [w for w in run.workloads if w.slot][: 1 if phased else None]
        if (run.mode == "shared" and not phased) or len(ends) > 1 or len(named) > 1:
            raise UsageError(
                f"{run.path}: not an exclusive run (two workloads shared the device); predict reads solo runs"
            )
        slot = named[0].slot if named else next(iter(ends), "")
        spec = run.specs.get(slot, "?")
        key = (assign or {}).get(str(run.path)) or spec_key(spec)
        groups.setdefault(key, []).append((run, slot, spec, ends))
    if len(groups) > 2:
        raise UsageError(
            f"predict takes the runs of two jobs; these are of {len(groups)}: {', '.join(groups)}"
        )
    for key, members in groups.items():
        first = members[0]
        other = next((m for m in members if spec_key(m[2]) != spec_key(first[2])), None)
        if (
            other is not None
        ):  # only runs assigned by A=/B= can mix (the others are grouped by spec)
            raise UsageError(
                f"{key}={first[0].path.name} ({first[2]}) and {key}={other[0].path.name} ({other[2]}) are "
                "different jobs: the runs of one slot are repeats of one job"
            )
    kind = evidence.device_identity(exclusive[0])[0]
    jobs = [_job(slot, members, kind) for slot, members in zip(SLOTS, groups.values())]
    if len(jobs) == 1:
        jobs.append(_job("B", next(iter(groups.values())), kind))
    return (jobs[0], jobs[1]), kind


def _job(slot: str, members: list[Member], kind: str) -> Job:
    solos = [_solo(member, kind) for member in members]
    rates_ = [s[0] for s in solos]
    mean = sum(rates_) / len(rates_)
    spread = (
        (math.sqrt(sum((r - mean) ** 2 for r in rates_) / (len(rates_) - 1)) / mean)
        if len(rates_) > 1
        else 0.0
    )
    profiles = [s[1] for s in solos]
    solo = Solo(
        1 / mean,
        busy=_mean(p.busy for p in profiles),
        fill=_mean(p.fill for p in profiles),
        copy_s=sum(p.copy_s for p in profiles) / len(profiles),
        cpu_share=_mean(p.cpu_share for p in profiles),
        cores=profiles[0].cores,
        contended=any(p.contended for p in profiles),
        turns=_mean(p.turns for p in profiles),
        switch_s=_mean(p.switch_s for p in profiles),
        copy_waits=_mean(p.copy_waits for p in profiles),
    )
    return Job(
        slot,
        members[0][2],
        tuple(str(member[0].path) for member in members),
        mean,
        spread,
        solo,
        all(s[2] for s in solos),
        any(s[3] for s in solos),
    )


def _mean(values: Iterable[float]) -> float:
    """The mean of the known values (NaN: none known)."""
    known = [v for v in values if not math.isnan(v)]
    return sum(known) / len(known) if known else math.nan


def gpu_model(gpu: str, mode: str) -> tuple[Model, list[str]]:
    """The constants for ``mode`` on GPU model ``gpu``, each from the best source that has it: fitted on pairs
    measured on that model (``gpumon calibrate --from-pairs``, then the ones shipped, ``FITTED``), else measured by
    ``gpumon calibrate``'s probes (intervals widened: on the H100 they predicted its pairs worse, docs/validation.md),
    else the default (uncalibrated, widened more); and what to say about them."""
    notes: list[str] = []
    try:
        measured = calibration.load(gpu) if gpu else None
    except calibration.CalibrationError as exc:
        notes.append(f"calibration ignored: {exc}")
        measured = None
    stored, pair_keys = (
        (measured.constants, measured.pair_fitted) if measured else ({}, frozenset())
    )
    from_pairs = {k: v for k, v in stored.items() if k in pair_keys}
    probes = {k: v for k, v in stored.items() if k not in pair_keys}
    shipped = (
        {k: getattr(FITTED[gpu], k) for k in {*NEEDED[TIMESLICE], *NEEDED[MPS]}}
        if gpu in FITTED
        else {}
    )
    base = FITTED.get(
        gpu, UNCALIBRATED
    )  # a GPU never fitted starts from the defaults chosen for any GPU
    constants = dataclasses.replace(base, **{**probes, **shipped, **from_pairs})
    needed = set(NEEDED[mode])
    calibrated = needed <= {*probes, *shipped, *from_pairs}
    from_probes = needed & (set(probes) - set(shipped))  # the mode's constants the probes gave
    probed = calibrated and bool(from_probes)
    if measured and calibrated and (from_probes or needed & set(from_pairs)):
        source = f"gpumon calibrate {measured.measured_at} ({calibration.path_for(gpu)})"
    elif gpu in FITTED:
        source = f"fitted on {gpu} captures (benchmarks/predict_accuracy.py)"
    else:
        source = "default for an uncalibrated GPU (chosen on the H100's and Lucid's pairs)"
    overruled = sorted(needed & set(probes) & set(shipped) - set(from_pairs))
    if overruled:
        notes.append(
            f"{', '.join(overruled)} from `gpumon calibrate`'s probes not used: the ones fitted on this GPU's "
            "pairs predict its pairs better (docs/validation.md)"
        )
    if probed and mode == TIMESLICE:
        notes.append(
            f"{', '.join(sorted(from_probes))} measured by `gpumon calibrate`'s probes, not fitted on pairs: "
            "intervals widened (with two turns a step assumed the H100's predicted its time-sliced pairs with a "
            "mean r error of 10 %, the pair-fitted ones 5.5 %; `gpumon calibrate --from-pairs` fits them on pairs "
            "measured here)"
        )
    elif probed:
        notes.append(
            f"{', '.join(sorted(from_probes))} measured by `gpumon calibrate`'s probes, not fitted on pairs "
            "(under MPS the H100's predicted its pairs as well as the pair-fitted ones: 9.7 % against 9.9 %)"
        )
    if not calibrated:
        missing = ", ".join(sorted(needed - {*probes, *shipped, *from_pairs}))
        notes.append(
            f"uncalibrated for {gpu or 'this GPU'}: intervals widened ({missing} not measured on it; "
            f"`gpumon calibrate` measures them)"
        )
    return Model(gpu, constants, calibrated, source, probed), notes


def predict(
    exclusive: Sequence[Run], share: str = TIMESLICE, assign: dict[str, str] | None = None
) -> list[Prediction]:
    """Predictions for ``share`` (``timeslice``, ``mps`` or ``all``); on the CPU, the one for pinned cores."""
    jobs, kind = read_jobs(exclusive, assign)
    if kind == "cpu":
        if not all(j.solo.cores for j in jobs):
            raise UsageError(
                "CPU runs without recorded cores (affinity): nothing to predict; pin them with cpus="
            )
        prediction = _prediction(
            jobs, CPU, Model("", None, True, "pinned cores: no device constants"), []
        )
        if (
            share != TIMESLICE
        ):  # the default names no mode; one the user named must not vanish in silence
            note = f"--share {share}: GPU sharing modes do not apply to CPU runs; this is the prediction for their cores"
            prediction = dataclasses.replace(prediction, notes=(note, *prediction.notes))
        return [prediction]
    gpu = evidence.device_identity(exclusive[0])[1]
    modes = MODES if share == "all" else (share,)
    return [_prediction(jobs, m, *gpu_model(gpu, m)) for m in modes]


def intervals(
    points: Sequence[PairPrediction],
    mode: str,
    spreads: Sequence[float] = (0.0, 0.0),
    widen: tuple[float, float] = (0.0, 0.0),
) -> tuple[tuple[Estimate, Estimate], Estimate]:
    """Each job's r and the pair's STP with their 95 % intervals, in log space (every bound > 0), from the point
    predictions ``points`` (the first is the estimate; the others, if any, span what the evidence leaves open) and
    the jobs' solo spreads: r * exp(+-e), e = sqrt(E_r^2 + w_r^2 + s^2), and STP * exp(+-sqrt(E_STP^2 + w_STP^2 +
    s_STP^2)), s_STP the spreads weighted by each job's 1/r; E the mode's out-of-sample |log error| (``ERRORS``), w
    what the constants and inputs lack (``widen``, from ``lacking``), s a relative spread (a log spread, to first
    order)."""
    value = points[0]
    rel = [math.sqrt(ERRORS.base(mode, "r") ** 2 + widen[0] ** 2 + s**2) for s in spreads]
    r = tuple(
        Estimate(
            value.slowdown[i],
            min(p.slowdown[i] for p in points) * math.exp(-rel[i]),
            max(p.slowdown[i] for p in points) * math.exp(rel[i]),
        )
        for i in range(2)
    )
    weights = [1 / x / value.stp for x in value.slowdown] if value.stp > 0 else [0.0, 0.0]
    rel_stp = math.sqrt(
        ERRORS.base(mode, "stp") ** 2
        + widen[1] ** 2
        + sum((w * s) ** 2 for w, s in zip(weights, spreads))
    )
    pair = Estimate(
        value.stp,
        min(p.stp for p in points) * math.exp(-rel_stp),
        max(p.stp for p in points) * math.exp(rel_stp),
    )
    return (r[0], r[1]), pair


def lacking(
    jobs: Sequence[Job],
    mode: str,
    calibrated: bool = True,
    c: Constants = DEFAULT,
    probed: bool = False,
) -> tuple[tuple[float, float], list[str]]:
    """What the constants and the jobs' runs lack for ``mode``, as the widening (w_r, w_STP) of the intervals (each
    missing input's measured error term, ``ERRORS``, in quadrature) and a note for each input the runs lack: copy
    time not recorded, a GPU utilisation outside the range the model was checked on, no GPM under MPS (no widening:
    every error in ERRORS was measured without GPM). The uncalibrated GPU's note is ``gpu_model``'s."""
    if mode == CPU:
        return (0.0, 0.0), []
    terms, notes = [], []
    if not calibrated:
        terms.append(ERRORS.uncalibrated)
    elif (
        probed and mode == TIMESLICE
    ):  # under MPS the probes' constants did as well as the fitted ones
        terms.append(ERRORS.probed)
    blind = [j.slot for j in jobs if not j.copies and j.nvml]
    if blind:
        terms.append(ERRORS.no_copies)
        notes.append(
            f"no copy time recorded for {' and '.join(dict.fromkeys(blind))}: copies taken as none; "
            "intervals widened"
        )
    low, high = ERRORS.checked_busy
    outside = [j for j in jobs if j.nvml and not low <= j.solo.busy <= high]
    if outside:
        terms.append(ERRORS.outside)
        notes.append(
            ", ".join(f"{j.slot}'s GPU utilisation {100 * j.solo.busy:.0f} %" for j in outside)
            + f" outside the {100 * low:.0f}-{100 * high:.0f} % the model was checked on: intervals widened"
        )
    if mode == MPS and any(math.isnan(j.solo.fill) for j in jobs if j.nvml):
        notes.append(
            f"no GPM SM activity: a job's kernels are taken to hold gamma*u of the SMs (gamma {c.sm_fill:.2f})"
        )
    return (
        math.sqrt(sum(t[0] ** 2 for t in terms)),
        math.sqrt(sum(t[1] ** 2 for t in terms)),
    ), notes


def _prediction(jobs: tuple[Job, Job], mode: str, model: Model, notes: list[str]) -> Prediction:
    a, b = (j.solo for j in jobs)
    c = model.constants or DEFAULT
    points = [predict_pair(a, b, mode, c)]
    if mode != CPU and not all(j.nvml for j in jobs):
        blind = ", ".join(j.slot for j in jobs if not j.nvml)
        notes = [
            *notes,
            f"no NVML data for {blind}: the GPU-busy share is unknown, so the interval spans a job "
            "all on the host (busy 0) to one all on the GPU (busy 1)",
        ]
        points = [
            predict_pair(_busy(jobs[0], x), _busy(jobs[1], x), mode, c) for x in (0.5, 0.0, 1.0)
        ]
    if mode == CPU and any(math.isnan(j.solo.cpu_share) for j in jobs):
        unseen = ", ".join(j.slot for j in jobs if math.isnan(j.solo.cpu_share))
        notes = [
            *notes,
            f"no CPU samples for {unseen} (processes.csv has none in its window): its share of its "
            "cores is unknown, so the interval spans a job idle on them (0) to one that fills them (1)",
        ]
        points = [
            predict_pair(_cpu_share(jobs[0], x), _cpu_share(jobs[1], x), mode, c)
            for x in (0.5, 0.0, 1.0)
        ]
        a, b = (_cpu_share(j, 0.5) for j in jobs)  # the reason in words is the estimate's
    if mode == CPU and any(j.solo.contended for j in jobs):
        crowded = " and ".join(j.slot for j in jobs if j.solo.contended)
        notes = [
            *notes,
            f"{crowded}'s cores were full with other work too while it ran alone: its CPU share there is "
            "what it got, not what it needed, so it is taken to need more than the cores hold beside its partner",
        ]
    widen, more = lacking(jobs, mode, model.calibrated, c, model.probed)
    more += _assumed_turns(jobs, mode, c)
    r, pair = intervals(points, mode, [j.spread for j in jobs], widen)
    names = (jobs[0].spec, jobs[1].spec)
    return Prediction(
        mode,
        jobs,
        r,
        pair,
        verdict(pair.low, pair.high),
        reason(a, b, mode, names, c),
        tuple(notes + more),
        model,
    )


def _assumed_turns(jobs: Sequence[Job], mode: str, c: Constants) -> list[str]:
    """What time slicing assumed for a job without a beside-partner phase (its turns per step)."""
    unphased = [j for j in jobs if j.nvml and math.isnan(j.solo.turns)]
    if mode != TIMESLICE or not unphased:
        return []
    seen = all(structured(j.solo, c) for j in unphased)
    how = (
        "one for each copy its kernels wait for and the whole time slices its kernels need (its step's structure)"
        if seen
        else f"the time slices its kernels need, at least {c.turns:g}"
    )
    return [
        f"no beside-partner phase for {' and '.join(dict.fromkeys(j.slot for j in unphased))}: turns per step "
        f"taken as {how} (assumed; `gpumon run JOB --partner-phase S` measures them)"
    ]


def _busy(job: Job, busy: float) -> Solo:
    s = job.solo
    return dataclasses.replace(s, busy=busy if math.isnan(s.busy) else s.busy)


def _cpu_share(job: Job, share: float) -> Solo:
    """The job's solo profile with ``share`` where its CPU share is unknown (the model would take the whole core)."""
    s = job.solo
    return dataclasses.replace(s, cpu_share=share if math.isnan(s.cpu_share) else s.cpu_share)


def better(predictions: Sequence[Prediction]) -> str | None:
    """The mode whose STP interval lies wholly above every other's, else None (cannot tell)."""
    for p in predictions:
        if all(p.stp.low > q.stp.high for q in predictions if q is not p):
            return p.share
    return None


def live_line(baselines: Sequence[tuple[str, str]], share: str = TIMESLICE) -> str:
    """``predicted r A 1.52 B 1.58, STP 0.95`` for the live line from the ``--baseline`` runs of A and B ("" if
    they do not make a pair the model can read: each is a solo run, from one device)."""
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
