"""Exclusive vs shared runs, side by side: rates, slowdown, STP, distributions, warnings.

``compare(exclusive, shared)`` is the data API behind ``gpumon compare``, the
report and the TUI's Compare screen.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gpumon.core.records.enums import JobState, RunStatus
from gpumon.analysis import distributions as dist
from gpumon.analysis import jobsteps, rates, slowdown, spread, stats_helper, unprobed
from gpumon.analysis.jobsteps import JobSteps
from gpumon.analysis.rates import Curve, Segment, Window
from gpumon.core.records.slots import SLOTS
from gpumon.analysis.slowdown import Estimate, RateSample
from gpumon.analysis.why import attribute_jobs, nvml_warning
from gpumon.core.interference.attribution import Attribution
from gpumon.core.interference import evidence
from gpumon.core.jobs.beside import UNKNOWN_RATE, KnownUse
from gpumon.core.interference.evidence import device_of, mixed_devices
from gpumon.core.store.others import Disturbance, disturbances
from gpumon.core.records.rates import verdict
from gpumon.core.store.runmeta import WorkloadRecord
from gpumon.core.store.trace import Run, load_run
from gpumon.errors import UsageError
from gpumon.workloads.spec import parse_workload_spec

MIN_OVERLAP_S = 5.0
MIN_STEPS = 20
# the distribution tests take at most this many samples per side and metric, evenly spaced over the windows (a
# week's steps are millions): said in compare's notes when it applies (THINNED_NOTE); the rate intervals' block
# bootstrap is bounded anyway (slowdown.MAX_BINS bins per window)
MAX_TEST_SAMPLES = 100_000
THINNED_NOTE = (
    "Distribution tests on at most {cap:,} samples per side and metric, evenly spaced over the windows: "
    "{which}. (The rate intervals' block bootstrap resamples at most {bins} bins per window, however long "
    "the run.)"
)
EXCLUSIVE_RUNS = "exclusive runs"
EXCLUSIVE_PHASE = "exclusive phase of the shared run"


@dataclass(frozen=True)
class WorkloadResult:
    """One workload of the pair: its rates alone and shared, slowdown r and 1/r, distributions."""

    slot: str
    spec: str
    exclusive_rate: float
    shared_rate: float
    slowdown: Estimate
    normalized_throughput: Estimate
    baseline: str
    exclusive: tuple[Segment, ...]
    shared: tuple[Segment, ...]
    distributions: tuple[dist.DistributionTest, ...]
    why: Attribution | None = None
    known: KnownUse | None = (
        None  # a job without a probe: its rate is UNKNOWN_RATE, this is what is known
    )

    def to_dict(self) -> dict[str, Any]:
        why = (
            self.why.to_dict()
            if self.why is not None
            else {"cause": None, "shares": {}, "evidence": ""}
        )
        unseen = (
            {"rate": UNKNOWN_RATE, "known": self.known.to_dict()} if self.known is not None else {}
        )
        return {
            **why,
            **unseen,
            "spec": self.spec,
            "exclusive_rate": _num(self.exclusive_rate),
            "shared_rate": _num(self.shared_rate),
            "slowdown": self.slowdown.to_dict(),
            "normalized_throughput": self.normalized_throughput.to_dict(),
            "baseline": self.baseline,
            "exclusive": [s.to_dict() for s in self.exclusive],
            "shared": [s.to_dict() for s in self.shared],
            "distributions": {d.metric: d.to_dict() for d in self.distributions},
        }


@dataclass(frozen=True)
class PairResult:
    """The pair: STP with its interval, the verdict, and the overlap window of each shared run."""

    stp: Estimate
    verdict: str
    windows: tuple[Segment, ...]
    share: str = "timeslice"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stp": self.stp.to_dict(),
            "verdict": self.verdict,
            "share": self.share,
            "windows": [w.to_dict() for w in self.windows],
        }


@dataclass(frozen=True)
class Comparison:
    """Everything ``gpumon compare`` shows; ``samples[(slot, metric)]`` holds (exclusive, shared) arrays."""

    workloads: tuple[WorkloadResult, ...]
    pair: PairResult
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    exclusive_runs: tuple[str, ...]
    shared_runs: tuple[str, ...]
    confidence: float = slowdown.CONFIDENCE
    disturbed_by: tuple[
        Disturbance, ...
    ] = ()  # other GPU processes in a measured window (core/store/others.py)
    interval_basis: dict[str, str] = field(default_factory=dict)
    device: str = "?"  # what the jobs trained on (cpu, cuda:0): on the CPU a copy is a memcpy and the jobs share cores
    samples: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def workload(self, slot: str) -> WorkloadResult:
        return next(w for w in self.workloads if w.slot == slot)

    @property
    def tested(self) -> bool:
        """Whether the distribution tests ran (scipy): only then are there p-values to be cautious about."""
        return any(
            not (math.isnan(d.ks_pvalue) and math.isnan(d.chi2_pvalue))
            for w in self.workloads
            for d in w.distributions
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything but the verdict in words (``gpumon.analysis.text.comparison_json`` adds it)."""
        return {
            "confidence": self.confidence,
            "interval_basis": dict(self.interval_basis),
            "exclusive_runs": list(self.exclusive_runs),
            "shared_runs": list(self.shared_runs),
            "workloads": {w.slot: w.to_dict() for w in self.workloads},
            "pair": {
                **self.pair.to_dict(),
                "disturbed_by": [d.to_dict() for d in self.disturbed_by],
            },
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            **({"caution": dist.CAUTION} if self.tested else {}),
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def spec_key(spec: str) -> str:
    """A built-in spec's canonical text (``gpumon.workloads.spec``'s grammar: option order and spacing do not
    matter); anything else (a command, "?") as written."""
    try:
        return parse_workload_spec(spec).text
    except UsageError:
        return spec.strip()


class _RunData:
    """A run's jobs, read once: a row group at a time, never the whole table (``jobsteps.read_jobs``)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.name = run.path.name
        self._jobs: dict[str, JobSteps] | None = None
        self._curves: dict[str, Curve] = {}

    def jobs(self) -> dict[str, JobSteps]:
        """Each job with rows in steps.csv: its post-warm-up curve, when it ran, which steps copied."""
        if self._jobs is None:
            self._jobs = jobsteps.jobs_of(self.run)
        return self._jobs

    def workloads(self) -> dict[str, WorkloadRecord]:
        """Workloads by slot: from run.json, else the slots seen in steps.csv."""
        found = {w.slot: w for w in self.run.workloads}
        for slot in self.jobs():
            found.setdefault(slot, WorkloadRecord(slot, spec="?"))
        return dict(sorted(found.items()))

    def curve(self, slot: str) -> Curve:
        if slot not in self._curves:
            job = self.jobs().get(slot)
            c = job.curve() if job is not None else None
            if c is None:
                raise UsageError(
                    f"{self.run.path}: workload {slot} has fewer than two steps after warm-up"
                )
            self._curves[slot] = c
        return self._curves[slot]

    def span(self, slot: str) -> tuple[float, float]:
        """When the slot's process ran: run.json start_t/stop_t, else its first step start and last step end."""
        entry = self.workloads().get(slot)
        job = self.jobs().get(slot)
        first, last = job.span if job is not None else (math.inf, -math.inf)
        start = entry.start_t if entry is not None else None
        stop = entry.stop_t if entry is not None else None
        return (start if start is not None else first, stop if stop is not None else last)

    def part(self, segment: Segment) -> jobsteps.Part:
        """Where a segment's samples come from."""
        return jobsteps.Part(self.run, segment.slot, self.jobs()[segment.slot], segment.window)


@dataclass
class _Baseline:
    """The windows a slot's exclusive rate is measured in, and their rate samples."""

    segments: list[Segment] = field(default_factory=list)
    samples: list[RateSample] = field(default_factory=list)


def _segment(data: _RunData, slot: str, role: str, c: Curve, window: Window) -> Segment:
    return Segment(str(data.run.path), slot, role, window.start, window.end, c.steps_in(window))


def _shared_slots(shared: Sequence[_RunData]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The pair's specs by slot (from the first shared run) and, per run, its own slot for each."""
    first = shared[0].workloads()
    if len(first) != 2:
        raise UsageError(
            f"{shared[0].run.path}: not a shared run ({len(first)} workload(s), need 2)"
        )
    specs: dict[str, str] = {slot: w.spec_or_unknown for slot, w in zip(SLOTS, first.values())}
    mappings: list[dict[str, str]] = []
    for data in shared:
        own = data.workloads()
        if len(own) != 2:
            raise UsageError(f"{data.run.path}: not a shared run ({len(own)} workload(s), need 2)")
        own_specs = {slot: w.spec_or_unknown for slot, w in own.items()}
        order = list(own_specs)
        straight = [spec_key(own_specs[order[i]]) == spec_key(specs[SLOTS[i]]) for i in range(2)]
        crossed = [spec_key(own_specs[order[1 - i]]) == spec_key(specs[SLOTS[i]]) for i in range(2)]
        if all(straight):
            mappings.append({SLOTS[0]: order[0], SLOTS[1]: order[1]})
        elif all(crossed):
            mappings.append({SLOTS[0]: order[1], SLOTS[1]: order[0]})
        else:
            raise UsageError(
                f"{data.run.path}: workloads {' + '.join(own_specs.values())} do not match "
                f"{shared[0].name} ({specs['A']} + {specs['B']})"
            )
    return specs, mappings


def compare(
    exclusive: list[Run],
    shared: list[Run],
    assign: dict[str, str] | None = None,
    *,
    seed: int = 0,
    n_boot: int = slowdown.N_BOOT,
    tests: stats_helper.Tests | None = None,
) -> Comparison:
    """Compare exclusive and shared runs of a pair of workloads (repeats allowed on both sides).

    ``assign`` maps ``str(run.path)`` of an exclusive run to the slot ("A" or "B")
    it is the baseline of; other exclusive runs are matched by workload spec.
    With no exclusive runs, baselines come from the shared runs' exclusive
    phases (a job alone before the other started or after it stopped).
    ``tests``: where the distribution tests run (``gpumon compare`` starts its helper
    before importing the analysis); by default one is made here when scipy is installed.

    Named stages, each returning a small record: the runs checked and read (``_Inputs``), the overlap
    windows (``_Overlaps``), the baselines (``_Baselines``), the rates and STP (``_Rates``), the distribution
    tests keyed by (slot, metric) (``_Tested``), then each workload's result and the comparison.
    """
    _check_modes(exclusive, shared)
    rng = np.random.default_rng(seed)
    share = _share_mode(shared)
    if tests is None:  # scipy.stats imported in a helper process while big runs are read
        tests = stats_helper.for_runs([r.path for r in [*exclusive, *shared]])
    inputs = _read_inputs(exclusive, shared, share)
    blind = _blind_slots(inputs)
    if blind:
        return _compare_blind(inputs, blind, assign)
    overlaps = _Overlaps(*_overlaps(inputs.shared, inputs.mappings, rng, n_boot))
    base = _baselines(inputs, dict(assign or {}), rng, n_boot)
    rated = _rates(base, overlaps.samples, rng, n_boot)
    tested = _distribution_tests(inputs, base, overlaps, tests)
    workloads = _workloads(inputs, base, rated, overlaps, tested)
    return _comparison(inputs, workloads, overlaps, base, rated, tested)


@dataclass(frozen=True)
class _Inputs:
    """The runs read: each shared run's slots as the pair's (``mappings``), the pair's specs and share mode."""

    exclusive: list[_RunData]
    shared: list[_RunData]
    specs: dict[str, str]
    mappings: list[dict[str, str]]
    share: str

    @property
    def runs(self) -> list[Run]:
        return [d.run for d in (*self.exclusive, *self.shared)]

    def by_path(self) -> dict[str, _RunData]:
        return {str(d.run.path): d for d in (*self.exclusive, *self.shared)}


@dataclass(frozen=True)
class _Overlaps:
    """The shared runs' overlap windows, each slot's shared segments and the shared rate samples."""

    windows: list[Segment]
    segments: dict[str, list[Segment]]
    samples: list[RateSample]


@dataclass(frozen=True)
class _Baselines:
    """Each slot's baseline, the slots whose baseline is an exclusive phase, and what that choice says."""

    by_slot: dict[str, _Baseline]
    from_phase: set[str]
    notes: list[str]
    warnings: list[str]


@dataclass(frozen=True)
class _Rates:
    """The shared rates and each slot's exclusive rate, with their replicates; STP; each interval's basis."""

    shared: RateSample
    exclusive: dict[str, RateSample]
    stp: Estimate
    basis: dict[str, str]
    notes: list[str]


@dataclass(frozen=True)
class _Tested:
    """The distribution tests by (slot, metric), their samples by (slot, metric), and a note without scipy."""

    results: dict[tuple[str, str], dist.DistributionTest]
    samples: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
    notes: list[str]

    def of(self, slot: str) -> tuple[dist.DistributionTest, ...]:
        return tuple(test for (s, _), test in self.results.items() if s == slot)


def _check_modes(exclusive: Sequence[Run], shared: Sequence[Run]) -> None:
    """Refuse a comparison without a shared run, of mixed devices, or of runs given on the wrong side."""
    if not shared:
        raise UsageError("no shared run given (--shared RUN)")
    problem = mixed_devices([*exclusive, *shared])
    if problem:
        raise UsageError(problem)
    for run in exclusive:
        if run.mode == "shared":
            raise UsageError(
                f"{run.path}: not an exclusive run (mode shared in run.json); give it with --shared"
            )
    for run in shared:
        if run.mode == "exclusive":
            raise UsageError(
                f"{run.path}: not a shared run (mode exclusive in run.json); give it with --exclusive"
            )


def _read_inputs(exclusive: Sequence[Run], shared: Sequence[Run], share: str) -> _Inputs:
    shared_data = [_RunData(r) for r in shared]
    exclusive_data = [_RunData(r) for r in exclusive]
    specs, mappings = _shared_slots(shared_data)
    return _Inputs(exclusive_data, shared_data, specs, mappings, share)


def _blind_slots(inputs: _Inputs) -> list[str]:
    """The pair's slots that ran without a probe in some shared run."""
    return sorted(
        {
            s
            for d, m in zip(inputs.shared, inputs.mappings)
            for s in SLOTS
            if m[s] in unprobed.blind_slots(d.run)
        }
    )


def _baselines(
    inputs: _Inputs, assign: dict[str, str], rng: np.random.Generator, n_boot: int
) -> _Baselines:
    """From the exclusive runs (a slot without one: its shared runs' exclusive phases), else from those phases."""
    shared, mappings, specs = inputs.shared, inputs.mappings, inputs.specs
    notes: list[str] = []
    if inputs.exclusive:
        baselines = _exclusive_baselines(inputs.exclusive, specs, assign, rng, n_boot, notes)
        from_phase = _fill_from_phases(baselines, shared, mappings, specs, rng, n_boot, notes)
        return _Baselines(baselines, from_phase, notes, [])
    baselines = _phase_baselines(shared, mappings, specs, rng, n_boot)
    phase_notes, phase_warnings = _phase_messages(
        baselines, specs, _lost_staggers(shared, mappings)
    )
    return _Baselines(baselines, set(SLOTS), phase_notes, phase_warnings)


def _rates(
    base: _Baselines, shared_samples: list[RateSample], rng: np.random.Generator, n_boot: int
) -> _Rates:
    """The shared rates' and each baseline's bootstrap, STP, and the basis of each interval."""
    shared_rate = slowdown.combine(shared_samples, rng, n_boot)
    basis = {
        "shared": spread.basis(shared_samples),
        **{
            f"exclusive {slot}": spread.basis(_per_run(b))
            for slot, b in base.by_slot.items()
            if b.samples
        },
    }
    notes = [spread.WITHIN_NOTE] if spread.WITHIN in basis.values() else []
    exclusive_rate: dict[str, RateSample] = {}
    for slot, b in base.by_slot.items():
        # the same job twice: both slots share one baseline and so one set of replicates
        same = next(
            (exclusive_rate[s] for s in exclusive_rate if base.by_slot[s].samples == b.samples),
            None,
        )
        if b.samples:
            exclusive_rate[slot] = same or slowdown.combine(_per_run(b), rng, n_boot)
    if len(exclusive_rate) == len(SLOTS):
        stp = slowdown.stp_estimate([exclusive_rate[s] for s in SLOTS], shared_rate)
    else:
        stp = Estimate(math.nan)
    return _Rates(shared_rate, exclusive_rate, stp, basis, notes)


def _distribution_tests(
    inputs: _Inputs, base: _Baselines, overlaps: _Overlaps, tests: stats_helper.Tests | None
) -> _Tested:
    """Each metric exclusive against shared, per slot, keyed by (slot, metric); none without scipy."""
    samples: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    if tests is None:
        return _Tested({}, samples, [dist.TESTS_NEED])
    data = inputs.by_path()
    thinned: list[str] = []
    batch: dict[tuple[str, str], dist.Samples] = {
        (slot, s.metric.key): s
        for slot in SLOTS
        for s in _distributions(
            data, slot, base.by_slot[slot].segments, overlaps.segments[slot], samples, thinned
        )
    }
    tests.run(list(batch.values()))
    results = dict(zip(batch, tests.results(), strict=True))
    said = THINNED_NOTE.format(
        cap=MAX_TEST_SAMPLES, which=", ".join(thinned), bins=slowdown.MAX_BINS
    )
    return _Tested(results, samples, [said] if thinned else [])


def _workloads(
    inputs: _Inputs, base: _Baselines, rated: _Rates, overlaps: _Overlaps, tested: _Tested
) -> list[WorkloadResult]:
    """Each slot's result: its rates, slowdown and 1/r with their intervals, distributions and cause."""
    workloads = [_workload(j, slot, inputs, base, rated, overlaps) for j, slot in enumerate(SLOTS)]
    causes = attribute_jobs(
        inputs.runs,
        [
            (w.slot, w.spec, w.exclusive_rate, w.shared_rate, w.exclusive, w.shared)
            for w in workloads
        ],
    )
    return [
        dataclasses.replace(w, why=causes.get(w.slot), distributions=tested.of(w.slot))
        for w in workloads
    ]


def _workload(
    j: int, slot: str, inputs: _Inputs, base: _Baselines, rated: _Rates, overlaps: _Overlaps
) -> WorkloadResult:
    x = rated.exclusive.get(slot)
    if x is not None:
        value, replicates = slowdown.ratio(x, rated.shared, j)
        r = slowdown.interval(value, replicates)
        with np.errstate(divide="ignore"):  # a replicate r of 0 (spread's far tail): 1 / r is inf
            inverse = slowdown.interval(1 / value, None if replicates is None else 1 / replicates)
    else:
        r = inverse = Estimate(math.nan)
    return WorkloadResult(
        slot=slot,
        spec=inputs.specs[slot],
        exclusive_rate=float(x.points[0]) if x is not None else math.nan,
        shared_rate=float(rated.shared.points[j]),
        slowdown=r,
        normalized_throughput=inverse,
        baseline=EXCLUSIVE_PHASE if slot in base.from_phase else EXCLUSIVE_RUNS,
        exclusive=tuple(base.by_slot[slot].segments),
        shared=tuple(overlaps.segments[slot]),
        distributions=(),
    )


def _comparison(
    inputs: _Inputs,
    workloads: list[WorkloadResult],
    overlaps: _Overlaps,
    base: _Baselines,
    rated: _Rates,
    tested: _Tested,
) -> Comparison:
    """The comparison, with every warning: the baselines', the windows', NVML's and other GPU processes'."""
    warnings = [*base.warnings]
    warnings += _warnings(inputs.exclusive, inputs.shared, overlaps.windows, workloads)
    warnings += [w for w in [nvml_warning(inputs.runs)] if w]
    disturbed = _disturbances(inputs.by_path(), workloads)
    warnings += [
        f"{Path(d.run).name}: {d.phrase()}: a process that is not one of the jobs, so the "
        f"{'pair' if d.role == 'pair' else 'baseline'} is not clean"
        for d in disturbed
    ]
    stp = rated.stp
    return Comparison(
        workloads=tuple(workloads),
        pair=PairResult(
            stp=stp,
            verdict=verdict(stp.low, stp.high),
            windows=tuple(overlaps.windows),
            share=inputs.share,
        ),
        warnings=tuple(warnings),
        notes=tuple([*base.notes, *rated.notes, *tested.notes]),
        exclusive_runs=tuple(str(d.run.path) for d in inputs.exclusive),
        shared_runs=tuple(str(d.run.path) for d in inputs.shared),
        interval_basis=rated.basis,
        samples=tested.samples,
        disturbed_by=tuple(disturbed),
        device=device_of(inputs.shared[0].run),
    )


@dataclass(frozen=True)
class _SeenAlone:
    """A pair with a job without a probe: the seen job's shared windows, segments and rates, and what is known of
    the unseen one in each shared run."""

    windows: list[Segment]
    segments: list[Segment]
    rates: list[float]
    known: list[KnownUse]


def _compare_blind(inputs: _Inputs, blind: list[str], assign: dict[str, str] | None) -> Comparison:
    """A pair where one job ran without a probe (``--beside`` a process that has none): the other job's rates as
    measured, this one's rate ``unknown (no probe)`` and its slowdown told in what is known (SM %, GPU memory)."""
    if len(blind) > 1:
        raise UsageError("neither job has steps (no probe): nothing to compare")
    unseen = blind[0]
    seen = next(s for s in SLOTS if s != unseen)
    specs, exclusive = inputs.specs, inputs.exclusive
    shared = _seen_alone(inputs, seen, unseen)
    alone = _baseline_of(seen, exclusive, inputs.shared, inputs.mappings, specs, dict(assign or {}))
    x = float(np.mean([c.rate(w) for c, w in alone])) if alone else math.nan
    s = float(np.mean(shared.rates))
    r = x / s if x > 0 and s > 0 else math.nan
    nan = Estimate(math.nan)
    results = {
        seen: WorkloadResult(
            slot=seen,
            spec=specs[seen],
            exclusive_rate=x,
            shared_rate=s,
            slowdown=Estimate(r),
            normalized_throughput=Estimate(1 / r if r > 0 else math.nan),
            baseline=EXCLUSIVE_RUNS if exclusive else EXCLUSIVE_PHASE,
            exclusive=(),
            shared=tuple(shared.segments),
            distributions=(),
        ),
        unseen: _unseen(unseen, specs[unseen], shared.known),
    }
    other = specs[seen].split(":")[0]
    warnings = [
        f"{unseen} ({specs[unseen]}) has no probe: its rate is {UNKNOWN_RATE}, so no slowdown for it and "
        f"no STP; what is known: {results[unseen].known.phrase(other)}"  # type: ignore[union-attr]
    ]
    if not alone:
        warnings.append(
            f"{seen} ({specs[seen]}) never ran alone: no baseline, so no slowdown for it."
        )
    warnings += _warnings(exclusive, inputs.shared, shared.windows, [results[seen]])
    return Comparison(
        workloads=(results["A"], results["B"]),
        pair=PairResult(nan, verdict(math.nan, math.nan), tuple(shared.windows), inputs.share),
        warnings=tuple(warnings),
        notes=(
            "No intervals: one job's steps are unseen, so there is no joint bootstrap of the pair.",
        ),
        exclusive_runs=tuple(str(d.run.path) for d in exclusive),
        shared_runs=tuple(str(d.run.path) for d in inputs.shared),
        device=device_of(inputs.shared[0].run),
    )


def _unseen(slot: str, spec: str, known: list[KnownUse]) -> WorkloadResult:
    """A job without a probe: no rates, no slowdown; what is known of it in the shared runs, merged."""
    nan = Estimate(math.nan)
    return WorkloadResult(
        slot,
        spec,
        math.nan,
        math.nan,
        nan,
        nan,
        UNKNOWN_RATE,
        (),
        (),
        (),
        known=unprobed.merged(known),
    )


def _seen_alone(inputs: _Inputs, seen: str, unseen: str) -> _SeenAlone:
    """In each shared run: the window both jobs ran in after the seen one's warm-up, its rate there, and what is
    known of the unseen job (before the seen one started, and in that window)."""
    found = _SeenAlone([], [], [], [])
    for data, mapping in zip(inputs.shared, inputs.mappings):
        c = data.curve(mapping[seen])
        (b_start, b_stop), (a_start, _) = data.span(mapping[unseen]), data.span(mapping[seen])
        window = Window(max(c.first_t, b_start), min(c.last_t, b_stop))
        if window.duration <= 0:
            raise UsageError(
                f"{data.run.path}: the two workloads never ran together after warm-up (no overlap)"
            )
        found.windows.append(
            Segment(
                str(data.run.path), "A+B", "overlap", window.start, window.end, c.steps_in(window)
            )
        )
        found.segments.append(_segment(data, mapping[seen], "shared", c, window))
        found.rates.append(c.rate(window))
        found.known.append(
            unprobed.known_use(
                data.run,
                mapping[unseen],
                (b_start, min(a_start, b_stop)),
                (window.start, window.end),
            )
        )
    return found


def _baseline_of(
    slot: str,
    exclusive: Sequence[_RunData],
    shared: Sequence[_RunData],
    mappings: Sequence[dict[str, str]],
    specs: dict[str, str],
    assign: dict[str, str],
) -> list[tuple[Curve, Window]]:
    """Where one job ran alone: its exclusive runs (matched by spec or ``assign``), else its shared runs' solo phases."""
    found = []
    for data in exclusive:
        own_slot, meta = next(iter(data.workloads().items()))
        target = assign.get(str(data.run.path))
        if target == slot or (
            target is None and spec_key(meta.spec_or_unknown) == spec_key(specs[slot])
        ):
            c = data.curve(own_slot)
            found.append((c, c.span()))
    if exclusive:
        return found
    for data, mapping in zip(shared, mappings):
        other = next(s for s in SLOTS if s != slot)
        c = data.curve(mapping[slot])
        found += [(c, w) for w in rates.solo_windows(c, *data.span(mapping[other]))]
    return found


def _disturbances(
    runs: dict[str, _RunData], workloads: Sequence[WorkloadResult]
) -> list[Disturbance]:
    """Other GPU processes in each run's measured windows: in a baseline's windows (exclusive runs and
    exclusive phases) they disturb the baseline, in the shared windows the pair."""
    windows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for w in workloads:
        for seg in (*w.exclusive, *w.shared):
            role = "baseline" if seg.role.startswith("exclusive") else "pair"
            windows.setdefault((seg.run, role), []).append((seg.start, seg.end))
    return [
        dataclasses.replace(d, role=role)
        for (path, role), spans in windows.items()
        if path in runs
        for d in disturbances(runs[path].run, spans)
    ]


def _share_mode(shared: Sequence[Run]) -> str:
    """The one share mode of the shared runs (an exclusive baseline is valid for any mode)."""
    modes = sorted({run.share for run in shared})
    if len(modes) > 1:
        raise UsageError(
            f"the shared runs were recorded under different share modes ({', '.join(modes)}): "
            "compare one mode at a time"
        )
    return modes[0]


def _overlaps(
    shared: Sequence[_RunData],
    mappings: Sequence[dict[str, str]],
    rng: np.random.Generator,
    n_boot: int,
) -> tuple[list[Segment], dict[str, list[Segment]], list[RateSample]]:
    """Each shared run's overlap window, each job's segment in it, and the joint rate sample."""
    windows: list[Segment] = []
    segments: dict[str, list[Segment]] = {s: [] for s in SLOTS}
    samples: list[RateSample] = []
    for data, mapping in zip(shared, mappings):
        curves = [data.curve(mapping[s]) for s in SLOTS]
        window = rates.overlap(*curves)
        if window is None:
            raise UsageError(
                f"{data.run.path}: the two workloads never ran together after warm-up (no overlap)"
            )
        windows.append(
            Segment(
                str(data.run.path),
                "A+B",
                "overlap",
                window.start,
                window.end,
                min(c.steps_in(window) for c in curves),
            )
        )
        for slot, c in zip(SLOTS, curves):
            segments[slot].append(_segment(data, mapping[slot], "shared", c, window))
        samples.append(slowdown.window_rates(curves, window, rng, n_boot))
    return windows, segments, samples


def _per_run(baseline: _Baseline) -> list[RateSample]:
    """One sample per run: exclusive phases of one run (before and after the other job) merged by duration.

    Between-run intervals need runs, not windows of one run.
    """
    groups: dict[str, list[tuple[Segment, RateSample]]] = {}
    for seg, sample in zip(baseline.segments, baseline.samples):
        groups.setdefault(seg.run, []).append((seg, sample))
    merged = []
    for parts in groups.values():
        if len(parts) == 1:
            merged.append(parts[0][1])
            continue
        weights = np.array([seg.end - seg.start for seg, _ in parts]) / sum(
            seg.end - seg.start for seg, _ in parts
        )
        points = sum(w * sample.points for w, (_, sample) in zip(weights, parts))
        reps = [sample.replicates for _, sample in parts]
        replicates = (
            None if any(r is None for r in reps) else sum(w * r for w, r in zip(weights, reps))
        )
        merged.append(RateSample(points, replicates))
    return merged


def _lost_staggers(shared: Sequence[_RunData], mappings: Sequence[dict[str, str]]) -> list[str]:
    """Why a staggered run has no exclusive phase: the second job started before the first was past its warm-up."""
    lost = []
    for data, mapping in zip(shared, mappings):
        stagger = data.run.meta.stagger_s
        if not isinstance(stagger, (int, float)) or stagger <= 0:
            continue
        first, second = sorted(SLOTS, key=lambda s: data.span(mapping[s])[0])
        ready, started = data.curve(mapping[first]).first_t, data.span(mapping[second])[0]
        if started <= ready:
            lost.append(
                f"{data.run.path.name}: --stagger {stagger:g} was lost: {second} started at {started:.1f} s, "
                f"before {first}'s first step after its warm-up ({ready:.1f} s), so {first} never ran alone "
                f"(a longer --stagger on this box, or --exclusive runs)"
            )
    return lost


def _phase_messages(
    baselines: dict[str, _Baseline], specs: dict[str, str], lost: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Notes that baselines come from exclusive phases, warnings for a job that never ran alone (``lost``: why a
    staggered run has no exclusive phase)."""
    if not any(b.samples for b in baselines.values()):
        why = (
            "; ".join(lost)
            if lost
            else "give --exclusive runs, or a staggered shared run whose first phase is exclusive"
        )
        raise UsageError(f"no exclusive baseline: {why}")
    notes, warnings = [], []
    for slot, b in baselines.items():
        if b.samples:
            names = ", ".join(sorted({s.name for s in b.segments}))
            notes.append(
                f"Baseline of {slot} comes from the {EXCLUSIVE_PHASE} ({names}), not from exclusive runs."
            )
        else:
            warnings.append(
                f"{slot} ({specs[slot]}) never ran alone: no baseline, so no slowdown for it and no STP."
            )
    return notes, warnings


def _distributions(
    data: dict[str, _RunData],
    slot: str,
    exclusive: Sequence[Segment],
    shared: Sequence[Segment],
    samples: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]],
    thinned: list[str],
) -> list[dist.Samples]:
    """What to test: every metric with samples on both sides (each side thinned to ``MAX_TEST_SAMPLES``: named in
    ``thinned``); the samples go into ``samples``. A copy metric's samples are chosen before they are read
    (``jobsteps.copy_samples``), and left out where no chosen step copied anything."""
    copies = jobsteps.copy_samples(
        [data[s.run].part(s) for s in exclusive],
        [data[s.run].part(s) for s in shared],
        MAX_TEST_SAMPLES,
    )
    batch = []
    for metric in dist.METRICS:
        xs: np.ndarray | None
        ss: np.ndarray | None
        if metric.key in copies:
            copied = copies[metric.key]
            xs, ss, total = copied.exclusive, copied.shared, copied.total
        else:
            xs, ss = _pooled(data, exclusive, metric.key), _pooled(data, shared, metric.key)
            total = max(len(xs), len(ss))
            xs, ss = _thinned(xs), _thinned(ss)
        if total > MAX_TEST_SAMPLES:
            thinned.append(f"{slot} {metric.key}")
        if xs is None or ss is None:
            continue
        found = dist.samples_of(metric, xs, ss)
        if found is not None:
            batch.append(found)
            samples[(slot, metric.key)] = (found.exclusive, found.shared)
    return batch


def _thinned(values: np.ndarray) -> np.ndarray:
    """At most ``MAX_TEST_SAMPLES`` of ``values``, evenly spaced in their order (time): a test's memory and time stay
    bounded however long the run."""
    if len(values) <= MAX_TEST_SAMPLES:
        return values
    return values[np.linspace(0, len(values) - 1, MAX_TEST_SAMPLES).astype(np.intp)]


def _exclusive_baselines(
    exclusive: Sequence[_RunData],
    specs: dict[str, str],
    assign: dict[str, str],
    rng: np.random.Generator,
    n_boot: int,
    notes: list[str],
) -> dict[str, _Baseline]:
    """Each slot's exclusive runs, matched by spec or by ``assign``."""
    baselines: dict[str, _Baseline] = {slot: _Baseline() for slot in SLOTS}
    for data in exclusive:
        own = data.workloads()
        if len(own) != 1:
            raise UsageError(
                f"{data.run.path}: not an exclusive run ({len(own)} workloads, need 1)"
            )
        own_slot, meta = next(iter(own.items()))
        own_spec = meta.spec_or_unknown
        path = str(data.run.path)
        if path in assign:
            target = assign[path]
            if target not in SLOTS:
                raise UsageError(f"{path}: assigned to {target!r}; use A= or B=")
            targets = [target]
            if spec_key(own_spec) != spec_key(specs[target]):
                notes.append(
                    f"Baseline of {target} is {data.name} ({own_spec}), assigned by {target}= "
                    f"although the shared workload is {specs[target]}."
                )
        else:
            targets = [s for s in SLOTS if spec_key(own_spec) == spec_key(specs[s])]
            if not targets:
                raise UsageError(
                    f"{path}: workload {own_spec} matches neither shared workload "
                    f"(A={specs['A']}, B={specs['B']}); assign it with A=RUN or B=RUN"
                )
        c = data.curve(own_slot)
        window = c.span()
        sample = slowdown.window_rates([c], window, rng, n_boot)
        for target in targets:
            baselines[target].segments.append(_segment(data, own_slot, "exclusive", c, window))
            baselines[target].samples.append(sample)
    return baselines


def _fill_from_phases(
    baselines: dict[str, _Baseline],
    shared: Sequence[_RunData],
    mappings: Sequence[dict[str, str]],
    specs: dict[str, str],
    rng: np.random.Generator,
    n_boot: int,
    notes: list[str],
) -> set[str]:
    """A slot no exclusive run was given for takes its baseline from the shared runs' exclusive phases, as the live
    line of ``gpumon run A --beside PID --baseline A=RUN`` does (the watched job's rate alone before A started); the
    slots so filled. Without such a phase either, refused."""
    missing = [slot for slot, b in baselines.items() if not b.samples]
    if not missing:
        return set()
    phases = _phase_baselines(shared, mappings, specs, rng, n_boot)
    for slot in missing:
        if not phases[slot].samples:
            raise UsageError(
                f"no exclusive run for {slot} ({specs[slot]}), and it never ran alone in the shared "
                f"runs: give one with --exclusive {slot}=RUN"
            )
        baselines[slot] = phases[slot]
        names = ", ".join(sorted({s.name for s in phases[slot].segments}))
        notes.append(
            f"Baseline of {slot} comes from the {EXCLUSIVE_PHASE} ({names}): no exclusive run of it was "
            "given."
        )
    return set(missing)


def _phase_baselines(
    shared: Sequence[_RunData],
    mappings: Sequence[dict[str, str]],
    specs: dict[str, str],
    rng: np.random.Generator,
    n_boot: int,
) -> dict[str, _Baseline]:
    """Each slot's baselines from the shared runs' exclusive phases (a job alone), matched by spec."""
    baselines: dict[str, _Baseline] = {slot: _Baseline() for slot in SLOTS}
    for data, mapping in zip(shared, mappings):
        for slot, other in (("A", "B"), ("B", "A")):
            own, theirs = mapping[slot], mapping[other]
            c = data.curve(own)
            other_start, other_end = data.span(theirs)
            for window in rates.solo_windows(c, other_start, other_end):
                sample = slowdown.window_rates([c], window, rng, n_boot)
                for target in SLOTS:
                    if spec_key(specs[target]) == spec_key(specs[slot]):
                        baselines[target].segments.append(
                            _segment(data, own, "exclusive phase", c, window)
                        )
                        baselines[target].samples.append(sample)
    return baselines


def _metric_values(data: _RunData, slot: str, window: Window, metric: str) -> np.ndarray:
    """One sampled metric's values of one job inside ``window`` (device.csv's GPU utilisation, processes.csv's CPU)."""
    if metric == dist.GPU_UTIL.key:
        return evidence.window_values(data.run, "device", "gpu_util", window.start, window.end)
    return evidence.window_values(data.run, "processes", "cpu_pct", window.start, window.end, slot)


def _pooled(data: dict[str, _RunData], segments: Sequence[Segment], metric: str) -> np.ndarray:
    """A sampled metric's values over all the segments of a condition (repeats pooled)."""
    parts = [_metric_values(data[s.run], s.slot, s.window, metric) for s in segments]
    return np.concatenate(parts) if parts else np.array([])


def _device_of(data: _RunData) -> str:
    meta = data.run.meta
    name = meta.gpu.name if meta.gpu is not None else None
    uuid = meta.gpu.uuid if meta.gpu is not None else None
    host = meta.host.hostname if meta.host is not None else None
    parts = [meta.device if meta.device is not None else "?"]
    if name:
        parts.append(f"{name} {uuid or ''}".strip())
    if host:
        parts.append(f"on {host}")
    return " ".join(parts)


def _warnings(
    exclusive: Sequence[_RunData],
    shared: Sequence[_RunData],
    windows: Sequence[Segment],
    workloads: Sequence[WorkloadResult],
) -> list[str]:
    """Every reason the data may not support a claim."""
    out = []
    for w in windows:
        if w.end - w.start < MIN_OVERLAP_S:
            out.append(
                f"{w.name}: overlap window is {w.end - w.start:.1f} s (< {MIN_OVERLAP_S:.0f} s): too short to support a claim"
            )
    seen = set()
    for result in workloads:
        for seg in (*result.exclusive, *result.shared):
            if (seg.run, seg.slot, seg.start) in seen:
                continue
            seen.add((seg.run, seg.slot, seg.start))
            if seg.steps < MIN_STEPS:
                out.append(
                    f"{seg.name}: {result.slot} has only {seg.steps} steps in its {seg.role} window (< {MIN_STEPS})"
                )
        if not math.isnan(result.slowdown.value) and not result.slowdown.has_interval:
            out.append(f"{result.slot}: too few steps for a confidence interval of its slowdown")
    for data in [*exclusive, *shared]:
        status = data.run.meta.status
        if status == RunStatus.TRUNCATED:
            error = data.run.meta.capture_error
            reason = (
                error.reason
                if error is not None and error.reason is not None
                else "no reason recorded"
            )
            out.append(
                f"{data.name}: run is truncated ({reason}): its capture ended before its jobs"
            )
        elif status not in (
            None,
            RunStatus.COMPLETE,
            RunStatus.FAILED,
        ):  # failed: the job's own line below says how
            out.append(f"{data.name}: run is {status!r}, not complete (it may have crashed)")
        for slot, meta in data.workloads().items():
            code = meta.exit_status
            if code not in (None, 0) and meta.state != JobState.STOPPED:
                tail = (meta.tail or "").strip().splitlines()
                why = f": {tail[-1]}" if tail else ""
                out.append(
                    f"{data.name}: workload {slot} ({meta.spec_or_unknown}) exited early with status {code}{why}"
                )
    devices: dict[str, list[str]] = {}
    for data in [*exclusive, *shared]:
        devices.setdefault(_device_of(data), []).append(data.name)
    if len(devices) > 1:
        listing = "; ".join(f"{d} ({', '.join(names)})" for d, names in devices.items())
        out.append(f"runs were recorded on different devices: {listing}")
    return out


def split_runs(runs: Sequence[Run]) -> tuple[list[Run], list[Run]]:
    """Runs with one workload (exclusive) and with two (shared), in the given order."""
    exclusive = [r for r in runs if len(r.workloads) == 1]
    shared = [r for r in runs if len(r.workloads) == 2]
    return exclusive, shared


def compare_paths(
    paths: Sequence[str | Path], assign: dict[str, str] | None = None
) -> tuple[Comparison, list[Run]]:
    """Load run directories, split them by workload count, and compare them (for the TUI)."""
    runs = [load_run(p) for p in paths]
    exclusive, shared = split_runs(runs)
    return compare(exclusive, shared, assign), runs
