"""The pair model behind ``gpumon predict``: each job's shared step time from two solo profiles (pure Python).

Equations and their physics are in docs/predict.md. The constants of a GPU model (its time slice, switch cost,
how its NVML utilisation reads kernel time, how much of the SMs a GPU-bound job fills under MPS) are a
``Constants``: measured by ``gpumon calibrate`` (``gpumon.core.store.calibration``), or fitted on captures
(``FITTED``, benchmarks/predict_accuracy.py); ``DEFAULT`` is what an uncalibrated GPU gets. The errors behind the
intervals are ``ERRORS``, the one place they live. Rates, r, STP and the verdict are ``gpumon.core.records.rates``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from gpumon.core.records.rates import slowdown, stp

TIMESLICE, MPS, CPU = "timeslice", "mps", "cpu"
# Not fitted: how far above 1 two jobs' CPU shares of their common cores may sum and still fit (the jitter of
# cpu_pct: two single-threaded jobs alone on a 2-core box read 0.50 each, give or take a percent)
CORE_ROOM = 0.05
ITERATIONS = 200
H100 = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class Constants:
    """One GPU model's constants (no constant is per workload or per pair)."""

    slice_s: float = 3.5e-3  # tau: the longest a context holds the GPU while the other has work
    switch_s: float = 0.6e-3  # sigma: one switch between two contexts that both have work
    util_scale: float = (
        1.0  # kappa: kernel time per unit of NVML utilisation (1: the counter reads true)
    )
    sm_fill: float = (
        0.88  # gamma: under MPS without GPM, the SMs a job's kernels hold per unit of busy share
    )
    max_held: float = (
        0.95  # guard, not fitted: the most of my kernel time a partner's held SMs can block (20x)
    )
    turns: float = (
        1.0  # k0: the turns a step takes at least when no beside-partner phase measured them
    )

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# Fitted on one GPU model's captures (benchmarks/predict_accuracy.py, every pair of each mode): the constants of
# that GPU model until ``gpumon calibrate`` measures it. The H100's: time slicing on q4_contention and modes
# (13 pairs), MPS on modes (3 pairs), 2026-11-23.
FITTED = {H100: Constants()}
DEFAULT = FITTED[H100]
# What a GPU with no constants of its own gets (``gpumon predict`` says it is uncalibrated): the grid point of
# ``predict_fit.GRID`` with two turns a step (the built-in step's two readinesses, docs/predict.md) ranked by the
# worse of its two ratios to r = 1's MAPE of r over the two datasets (the H100's 13 time-sliced pairs, Lucid's
# 181): 17.1 % (r = 1: 46.8 %) and 7.2 % (17.8 %), in sample on both, 2026-11-27; second on that ranking, within
# 0.5 % of the first (1.5 ms, 0.6 ms, 0.55: 18.8 % and 7.1 %), and nearer the H100 on it. The H100's kappa 1.0
# read Lucid's NVML utilisation as kernel time: 19.4 % there, worse than r = 1. benchmarks/predict_accuracy.py
# scores the choice nested (made again without each held-out family). Since each job's turns come from its step's
# structure where the capture shows it (the H100's built-ins; not Lucid's runs), it scores 15.7 % on the H100's.
UNCALIBRATED = Constants(slice_s=2.0e-3, switch_s=0.6e-3, util_scale=0.6, turns=2.0)


@dataclass(frozen=True)
class Errors:
    """How far out-of-sample predictions missed (benchmarks/predict_accuracy.py, 2026-11-27): the log error
    |ln(measured / predicted)| of r and of STP that at least 95 % of them fell within, rounded up to a whole percent
    (the intervals are log space); each missing input adds its own term (the error measured where that input was
    missing, less the base error, in quadrature)."""

    # the GPU's own constants, the job's family (workload) never seen, every input recorded (H100, copies timed)
    r: tuple[tuple[str, float], ...] = ((TIMESLICE, 0.15), (MPS, 0.35), (CPU, 0.10))
    stp: tuple[tuple[str, float], ...] = ((TIMESLICE, 0.11), (MPS, 0.10), (CPU, 0.10))
    # a GPU with no constants of its own gets UNCALIBRATED: its error on the H100's pairs (30.1 %, 28.8 %, each job's
    # turns from its step's structure; 30.4 %, 29.6 % with k0 alone) against the H100's own constants (leave one
    # family out: 14.5 %, 11.0 %), as (r, STP); on Lucid's GPU, where it was also chosen, 23.2 % and 11.4 % against
    # 23.0 % and 12.3 % (no term): the larger is kept
    uncalibrated: tuple[float, float] = (0.27, 0.27)
    # time-slicing constants measured by `gpumon calibrate`'s probes (turns from each step's structure, k0 = 2 where
    # unseen), not fitted on pairs: their error on the H100's time-sliced pairs (22.8 %, 18.1 %) against the
    # pair-fitted ones' (leave one family out), as (r, STP); under MPS the probes' constants did as well as the
    # fitted ones (no term)
    probed: tuple[float, float] = (0.18, 0.15)
    # no copy time recorded (Lucid's runs against the H100's, both leave-one-family-out)
    no_copies: tuple[float, float] = (0.18, 0.06)
    # a job whose NVML utilisation lies outside ``checked_busy``, the range the model was checked on (Lucid fitted on
    # jobs at 30-90 %, the others predicted)
    outside: tuple[float, float] = (0.26, 0.11)
    checked_busy: tuple[float, float] = (0.09, 1.0)

    def base(self, mode: str, what: str = "r") -> float:
        return dict(self.r if what == "r" else self.stp)[mode]


ERRORS = Errors()


@dataclass(frozen=True)
class Solo:
    """One job alone: its step time, the GPU-busy part of it (NaN: no NVML), its CPU demand and pinned cores."""

    step_s: float
    busy: float = math.nan  # u: fraction of the step the GPU worked for the job (NVML utilisation)
    fill: float = (
        math.nan
    )  # f: share of the SMs its kernels keep active while they run (GPM SM activity / u)
    copy_s: float = 0.0  # C: host-to-device copy seconds per step (CUDA events), on the copy engine
    cpu_share: float = math.nan  # the job's CPU use in cores over the cores it may run on (0..1)
    cores: frozenset[int] = frozenset()
    contended: bool = (
        False  # its cores were full, other work on them too: cpu_share is what it got, not needed
    )
    # from its beside-partner phase (``predict_phase``; NaN: no phase): the turns a step waits for beside a
    # GPU-bound partner (m), and the switch its context costs a partner (sigma_j)
    turns: float = math.nan
    switch_s: float = math.nan
    # D, from the step's structure as its solo capture shows it: 1 when its step times a host-to-device copy its
    # kernels wait for (the compute queue empties and fills again), 0 when it copies nothing; NaN: copies unseen
    copy_waits: float = math.nan


def kernel_s(job: Solo, c: Constants = DEFAULT) -> float:
    """G = kappa*(u*T - C): kernel seconds per step: the GPU-busy time less the copies (NVML counts a copy as busy;
    CUDA events time it), read through the GPU's utilisation scale kappa (kernel time per unit of utilisation)."""
    return c.util_scale * max(0.0, job.step_s * min(max(job.busy, 0.0), 1.0) - job.copy_s)


def host_s(job: Solo, c: Constants = DEFAULT) -> float:
    """H = T - G - C: the rest of the step (CPU, Python, launch gaps), which overlaps the partner's GPU work."""
    return max(0.0, job.step_s - kernel_s(job, c) - job.copy_s)


@dataclass(frozen=True)
class PairPrediction:
    """Predicted shared step times and slowdowns of A and B, and the pair's STP (point values)."""

    mode: str
    step_s: tuple[float, float]
    slowdown: tuple[float, float]
    stp: float


def turns(job: Solo, c: Constants = DEFAULT) -> float:
    """m: the turns a step waits for: measured beside a GPU-bound partner (the job's phase); else, where the solo
    capture shows the step's structure, D + max(1, ceil(G/tau)) (a readiness after a copy the kernels wait for, and
    whole slices for the kernels: each readiness starts a fresh one, the step's end cuts the last short); else the
    time slices its kernels need, at least ``c.turns`` (k0, assumed). Constants fitted on pairs with one turn a step
    (k0 = 1, ``FITTED``) absorbed the structure in tau and sigma: they keep the last form."""
    if not math.isnan(job.turns):
        return max(1.0, job.turns)
    g = kernel_s(job, c)
    if structured(job, c):
        return job.copy_waits + max(1.0, math.ceil(g / c.slice_s))
    return max(c.turns, g / c.slice_s)


def structured(job: Solo, c: Constants) -> bool:
    """Whether ``turns`` reads the job's step structure (no phase, copies seen, constants that did not absorb it)."""
    return math.isnan(job.turns) and not math.isnan(job.copy_waits) and c.turns > 1


def kernel_turns(job: Solo, c: Constants = DEFAULT) -> float:
    """The turns that run the job's kernels: all m, less D where the structure gave m (with a copy, the step's first
    readiness records an event and the queue empties at the copy: that turn holds no kernels)."""
    return turns(job, c) - (job.copy_waits if structured(job, c) else 0.0)


def pair_switch(a: Solo, b: Solo, c: Constants = DEFAULT) -> float:
    """sigma of a pair: the mean of the two jobs' measured switch costs, the GPU's ``c.switch_s`` for one unmeasured."""
    return sum(c.switch_s if math.isnan(j.switch_s) else j.switch_s for j in (a, b)) / 2


def holds(a: Solo, b: Solo, c: Constants = DEFAULT) -> tuple[float, float]:
    """b_A, b_B: how long each context keeps the GPU once it has it. A context yields as soon as it runs out of work,
    so it holds what queued while the other held (its kernels arrive at i = G/T of the time, and go on arriving while
    it runs: b = i*(b' + 2*sigma)/(1 - i)), at most its step's kernels G and at most one slice tau. Two light jobs
    hand the GPU back and forth in short holds; beside a GPU-bound job (i -> 1) the holds grow to whole slices."""
    caps = [min(kernel_s(j, c) / kernel_turns(j, c), c.slice_s) for j in (a, b)]
    rates = [kernel_s(j, c) / j.step_s if j.step_s > 0 else 0.0 for j in (a, b)]
    held = [0.0, 0.0]
    for _ in range(
        ITERATIONS
    ):  # monotone from zero and bounded by the caps: converges to the least fixed point
        new = [
            cap if i >= 1 else min(cap, i * (other + 2 * c.switch_s) / (1 - i))
            for cap, i, other in zip(caps, rates, held[::-1])
        ]
        if all(abs(n - o) <= 1e-15 for n, o in zip(new, held)):
            break
        held = new
    return new[0], new[1]


def _off_gpu(me: Solo, copying: float, c: Constants) -> float:
    """H + C * (1 + k'): host time, and copies sharing the link with the partner's (copying k' of its time)."""
    return host_s(me, c) + me.copy_s * (1 + copying)


def timeslice_step(
    me: Solo,
    partner: Solo,
    ready: float,
    copying: float = 0.0,
    hold: float = math.nan,
    c: Constants = DEFAULT,
) -> float:
    """T' = G + n*rho*sigma + (n - 1)*rho*(b' + sigma) + max(H + C*(1 + k'), rho*(b' + sigma)): my kernels take n
    turns; at each turn's end the partner, when it has work (rho, ``ready``), holds the GPU for b' (``hold``,
    ``holds``) and a switch costs sigma both ways, no switch when it has none; my host part and copies overlap one
    of its holds; ``copying`` (k') is the share of its time it copies."""
    g = kernel_s(me, c)
    if g <= 0:
        return _off_gpu(me, copying, c)  # no kernels: no turn to wait for
    n = turns(me, c)
    b = holds(me, partner, c)[1] if math.isnan(hold) else hold
    wait = ready * (b + c.switch_s)
    return g + n * ready * c.switch_s + (n - 1) * wait + max(_off_gpu(me, copying, c), wait)


def sm_fill(job: Solo, c: Constants = DEFAULT) -> float:
    """f: the share of the SMs a job's kernels hold while they run: measured (GPM) where the capture has it, else
    gamma * u (a job that keeps the GPU busy runs grids that fill the SMs; a launch-bound one runs small ones)."""
    fill = job.fill if not math.isnan(job.fill) else c.sm_fill * min(max(job.busy, 0.0), 1.0)
    return min(max(fill, 0.0), 1.0) if not math.isnan(fill) else 0.0


def mps_step(
    me: Solo, partner: Solo, executing: float, copying: float = 0.0, c: Constants = DEFAULT
) -> float:
    """T' = H + C*(1 + k') + G / (1 - f'*e'): kernels of both run at once where SMs are free, but a running block
    keeps its SM until it ends (no preemption under MPS): while the partner's kernels run (e', the share of time
    they execute) they hold f' of the SMs, and my kernels progress on the rest; a copy slows by the partner's k'."""
    held = min(sm_fill(partner, c) * executing, c.max_held)
    return _off_gpu(me, copying, c) + kernel_s(me, c) / (1 - held)


def _cpu_share(job: Solo) -> float:
    return min(job.cpu_share, 1.0) if not math.isnan(job.cpu_share) else 1.0


def room_for_both(a: Solo, b: Solo) -> bool:
    """The cores the two may share hold both jobs' CPU use (c + c' <= 1, within ``CORE_ROOM``): unpinned jobs the
    scheduler puts on cores of their own, or two half-idle jobs on one core; neither then waits for the other. Never
    for a job that had to share its cores with other work alone (``contended``): it would have used more of them."""
    return not (a.contended or b.contended) and _cpu_share(a) + _cpu_share(b) <= 1 + CORE_ROOM


def cpu_step(me: Solo, partner: Solo) -> float:
    """T' = T * (1 + c' * overlap) when the shared cores are oversubscribed (else T): time-sharing cores; overlap is
    the share of my cores the partner may use."""
    if not me.cores or not partner.cores:
        return math.nan
    overlap = len(me.cores & partner.cores) / len(me.cores)
    if room_for_both(me, partner):
        return me.step_s
    return me.step_s * (1 + _cpu_share(partner) * overlap)


def _arrivals(job: Solo, step: float, other: Solo, other_step: float, c: Constants) -> float:
    """The share of the other's turn ends at which a job whose turns were measured has a turn pending: its m turns
    per shared step T' over the other's m' turns per T'' (0 without a phase: its busy share alone says)."""
    if math.isnan(job.turns) or step <= 0:
        return 0.0
    return min(1.0, turns(job, c) * other_step / (step * turns(other, c)))


def predict_pair(a: Solo, b: Solo, mode: str, c: Constants = DEFAULT) -> PairPrediction:
    """Shared step times of A and B by fixed-point iteration (each job's wait depends on the other's shared step)."""
    if mode == TIMESLICE:
        c = replace(c, switch_s=pair_switch(a, b, c))
    if mode == CPU:
        steps = (cpu_step(a, b), cpu_step(b, a))
    else:
        steps, copying = (a.step_s, b.step_s), (0.0, 0.0)
        held = holds(a, b, c)
        for _ in range(ITERATIONS):
            # k: the share of its shared step a job copies, its copies stretched by the partner's (1 + k')
            copying = (
                min(1.0, a.copy_s * (1 + copying[1]) / steps[0]),
                min(1.0, b.copy_s * (1 + copying[0]) / steps[1]),
            )
            if (
                mode == TIMESLICE
            ):  # rho: the share of its shared step a job has kernels to run (or waiting to)
                kernels = tuple(
                    max(0.0, 1 - _off_gpu(j, k, c) / t, _arrivals(j, t, o, t_o, c))
                    for j, t, k, o, t_o in zip((a, b), steps, copying[::-1], (b, a), steps[::-1])
                )
                new = (
                    timeslice_step(a, b, kernels[1], copying[1], held[1], c),
                    timeslice_step(b, a, kernels[0], copying[0], held[0], c),
                )
            else:  # e: the share of its shared step a job's kernels execute (hold SMs)
                executing = (kernel_s(a, c) / steps[0], kernel_s(b, c) / steps[1])
                new = (
                    mps_step(a, b, executing[1], copying[1], c),
                    mps_step(b, a, executing[0], copying[0], c),
                )
            if all(abs(n - o) <= 1e-12 * max(o, 1e-12) for n, o in zip(new, steps)):
                steps = new
                break
            steps = new
    r = tuple(
        slowdown(1 / solo.step_s, 1 / t) if t > 0 else math.nan for solo, t in zip((a, b), steps)
    )
    return PairPrediction(
        mode,
        (steps[0], steps[1]),
        (r[0], r[1]),
        stp(r) if not any(map(math.isnan, r)) else math.nan,
    )


def reason(
    a: Solo, b: Solo, mode: str, names: tuple[str, str] = ("A", "B"), c: Constants = DEFAULT
) -> str:
    """The dominant physics in words."""
    if mode == CPU:
        if not a.cores & b.cores:
            return "pinned to different cores: neither waits for the other"
        if room_for_both(a, b):
            return "their cores have room for both: neither waits for the other"
        return "both on the same cores, more than they hold: they take turns on them"
    bound = [s.busy * c.util_scale >= 0.85 for s in (a, b)]
    if mode == MPS:
        if all(bound):
            return "both GPU-bound: under MPS their kernels compete for the SMs"
        for i, j in ((0, 1), (1, 0)):
            if bound[j] and kernel_s((a, b)[i], c) > 0:
                return f"{names[i]}'s kernels wait for the SMs {names[j]}'s kernels hold (no preemption under MPS)"
        return "kernels run side by side under MPS and fill each other's idle SMs"
    if all(bound):
        return "both GPU-bound: time slices split the GPU"
    held = holds(a, b, c)
    for i, j in ((0, 1), (1, 0)):
        if (
            kernel_s((a, b)[i], c) < c.slice_s
            and held[j] >= c.slice_s
            and kernel_s((a, b)[j], c) > 2 * c.slice_s
        ):
            return f"{names[i]}'s short kernels wait for {names[j]}'s time slices"
    if sum(kernel_s(j, c) / j.step_s for j in (a, b)) < 1:
        return "light jobs: each yields the GPU as soon as its kernels are done, and the other fills its gaps"
    return "host parts overlap while the GPU parts take turns"
