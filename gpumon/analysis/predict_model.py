"""The pair model behind ``gpumon predict``: each job's shared step time from two solo profiles (pure Python).

Equations and their physics are in docs/predict.md; the fitted constants are
``CONSTANTS``, the one place they live. Rates, r, STP and the verdict are
``gpumon.core.records.rates``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpumon.core.records.rates import slowdown, stp

TIMESLICE, MPS, CPU = "timeslice", "mps", "cpu"
# Not fitted: how far above 1 two jobs' CPU shares of their common cores may sum and still fit (the jitter of
# cpu_pct: two single-threaded jobs alone on a 2-core box read 0.50 each, give or take a percent)
CORE_ROOM = 0.05
ITERATIONS = 200


@dataclass(frozen=True)
class Constants:
    """Fitted once on the H100 captures (benchmarks/predict_accuracy.py); no constant per workload or pair."""

    slice_s: float = 4.0e-3        # tau: the time slice a GPU-bound context holds the GPU for
    switch_s: float = 0.6e-3       # sigma: the cost of one context switch between time slices
    sm_fill: float = 0.88          # gamma: without GPM, the SMs a job's running kernels hold per unit of GPU-busy share
    max_held: float = 0.95         # guard, not fitted: the most of my kernel time a partner's held SMs can block (20x)
    # E: the relative error of r, and of STP, that at least 95 % of the leave-one-workload-out predictions fell within
    # (benchmarks/predict_accuracy.py), rounded up to a whole percent; STP's from both modes' pairs together;
    # CPU: the pinned-core tests' tolerance, there being no leave-out data
    errors_r: tuple[tuple[str, float], ...] = ((TIMESLICE, 0.14), (MPS, 0.42), (CPU, 0.10))
    errors_stp: tuple[tuple[str, float], ...] = ((TIMESLICE, 0.13), (MPS, 0.13), (CPU, 0.10))

    def r_error(self, mode: str) -> float:
        return dict(self.errors_r)[mode]

    def stp_error(self, mode: str) -> float:
        return dict(self.errors_stp)[mode]


CONSTANTS = Constants()


@dataclass(frozen=True)
class Solo:
    """One job alone: its step time, the GPU-busy part of it (NaN: no NVML), its CPU demand and pinned cores."""

    step_s: float
    busy: float = math.nan          # u: fraction of the step the GPU worked for the job (NVML utilisation)
    fill: float = math.nan          # f: share of the SMs its kernels keep active while they run (GPM SM activity / u)
    copy_s: float = 0.0             # C: host-to-device copy seconds per step (CUDA events), on the copy engine
    cpu_share: float = math.nan     # the job's CPU use in cores over the cores it may run on (0..1)
    cores: frozenset[int] = frozenset()

    @property
    def gpu_s(self) -> float:
        """G: kernel seconds per step: the GPU-busy time less the copies (NVML counts both as busy)."""
        return max(0.0, self.step_s * min(max(self.busy, 0.0), 1.0) - self.copy_s)

    @property
    def host_s(self) -> float:
        """H: the rest of the step (CPU, Python, launch gaps), which overlaps the partner's GPU work."""
        return max(0.0, self.step_s - self.gpu_s - self.copy_s)


@dataclass(frozen=True)
class PairPrediction:
    """Predicted shared step times and slowdowns of A and B, and the pair's STP (point values)."""

    mode: str
    step_s: tuple[float, float]
    slowdown: tuple[float, float]
    stp: float


def _turns(job: Solo, c: Constants) -> float:
    """n: the time slices a job's GPU work needs per step (at least one)."""
    return max(1.0, job.gpu_s / c.slice_s)


def _burst(job: Solo, c: Constants) -> float:
    """b: how long a job holds the GPU once it has it (its GPU work, at most one slice)."""
    return min(job.gpu_s, c.slice_s)


def _off_gpu(me: Solo, copying: float) -> float:
    """H + C * (1 + k'): host time, and copies sharing the link with the partner's (copying k' of its time)."""
    return me.host_s + me.copy_s * (1 + copying)


def timeslice_step(me: Solo, partner: Solo, ready: float, copying: float = 0.0, c: Constants = CONSTANTS) -> float:
    """T' = G + n*sigma + (n - 1)*rho*(b' + sigma) + max(H + C*(1 + k'), rho*(b' + sigma)): the kernels take turns, the
    host part and the copies overlap one of the partner's turns; ``ready`` (rho) is the chance the partner has kernels
    to run when a turn ends, ``copying`` (k') the share of its time it copies."""
    if me.gpu_s <= 0:
        return _off_gpu(me, copying)  # no kernels: no turn to wait for
    n = _turns(me, c)
    wait = ready * (_burst(partner, c) + c.switch_s)
    return me.gpu_s + n * c.switch_s + (n - 1) * wait + max(_off_gpu(me, copying), wait)


def sm_fill(job: Solo, c: Constants = CONSTANTS) -> float:
    """f: the share of the SMs a job's kernels hold while they run: measured (GPM) where the capture has it, else
    gamma * u (a job that keeps the GPU busy runs grids that fill the SMs; a launch-bound one runs small ones)."""
    fill = job.fill if not math.isnan(job.fill) else c.sm_fill * min(max(job.busy, 0.0), 1.0)
    return min(max(fill, 0.0), 1.0) if not math.isnan(fill) else 0.0


def mps_step(me: Solo, partner: Solo, executing: float, copying: float = 0.0, c: Constants = CONSTANTS) -> float:
    """T' = H + C*(1 + k') + G / (1 - f'*e'): kernels of both run at once where SMs are free, but a running block
    keeps its SM until it ends (no preemption under MPS): while the partner's kernels run (e', the share of time
    they execute) they hold f' of the SMs, and my kernels progress on the rest; a copy slows by the partner's k'."""
    held = min(sm_fill(partner, c) * executing, c.max_held)
    return _off_gpu(me, copying) + me.gpu_s / (1 - held)


def _cpu_share(job: Solo) -> float:
    return min(job.cpu_share, 1.0) if not math.isnan(job.cpu_share) else 1.0


def room_for_both(a: Solo, b: Solo) -> bool:
    """The cores the two may share hold both jobs' CPU use (c + c' <= 1, within ``CORE_ROOM``): unpinned jobs the
    scheduler puts on cores of their own, or two half-idle jobs on one core; neither then waits for the other."""
    return _cpu_share(a) + _cpu_share(b) <= 1 + CORE_ROOM


def cpu_step(me: Solo, partner: Solo) -> float:
    """T' = T * (1 + c' * overlap) when the shared cores are oversubscribed (else T): time-sharing cores; overlap is
    the share of my cores the partner may use."""
    if not me.cores or not partner.cores:
        return math.nan
    overlap = len(me.cores & partner.cores) / len(me.cores)
    if room_for_both(me, partner):
        return me.step_s
    return me.step_s * (1 + _cpu_share(partner) * overlap)


def predict_pair(a: Solo, b: Solo, mode: str, c: Constants = CONSTANTS) -> PairPrediction:
    """Shared step times of A and B by fixed-point iteration (each job's wait depends on the other's shared step)."""
    if mode == CPU:
        steps = (cpu_step(a, b), cpu_step(b, a))
    else:
        steps, copying = (a.step_s, b.step_s), (0.0, 0.0)
        for _ in range(ITERATIONS):
            # k: the share of its shared step a job copies, its copies stretched by the partner's (1 + k')
            copying = (min(1.0, a.copy_s * (1 + copying[1]) / steps[0]), min(1.0, b.copy_s * (1 + copying[0]) / steps[1]))
            if mode == TIMESLICE:  # rho: the share of its shared step a job has kernels to run (or waiting to)
                kernels = tuple(max(0.0, 1 - (j.host_s + j.copy_s * (1 + k)) / t)
                                for j, t, k in zip((a, b), steps, copying[::-1]))
                new = (timeslice_step(a, b, kernels[1], copying[1], c), timeslice_step(b, a, kernels[0], copying[0], c))
            else:  # e: the share of its shared step a job's kernels execute (hold SMs)
                executing = (a.gpu_s / steps[0], b.gpu_s / steps[1])
                new = (mps_step(a, b, executing[1], copying[1], c), mps_step(b, a, executing[0], copying[0], c))
            if all(abs(n - o) <= 1e-12 * max(o, 1e-12) for n, o in zip(new, steps)):
                steps = new
                break
            steps = new
    r = tuple(slowdown(1 / solo.step_s, 1 / t) if t > 0 else math.nan for solo, t in zip((a, b), steps))
    return PairPrediction(mode, (steps[0], steps[1]), (r[0], r[1]), stp(r) if not any(map(math.isnan, r)) else math.nan)


def reason(a: Solo, b: Solo, mode: str, names: tuple[str, str] = ("A", "B")) -> str:
    """The dominant physics in words."""
    if mode == CPU:
        if not a.cores & b.cores:
            return "pinned to different cores: neither waits for the other"
        if room_for_both(a, b):
            return "their cores have room for both: neither waits for the other"
        return "both on the same cores, more than they hold: they take turns on them"
    bound = [s.busy >= 0.85 for s in (a, b)]
    if mode == MPS:
        if all(bound):
            return "both GPU-bound: under MPS their kernels compete for the SMs"
        for i, j in ((0, 1), (1, 0)):
            if bound[j] and (a, b)[i].gpu_s > 0:
                return f"{names[i]}'s kernels wait for the SMs {names[j]}'s kernels hold (no preemption under MPS)"
        return "kernels run side by side under MPS and fill each other's idle SMs"
    if all(bound):
        return "both GPU-bound: time slices split the GPU"
    for i, j in ((0, 1), (1, 0)):
        me, other = (a, b)[i], (a, b)[j]
        if me.gpu_s < CONSTANTS.slice_s and other.gpu_s > 2 * CONSTANTS.slice_s:
            return f"{names[i]}'s short kernels wait for {names[j]}'s time slices"
    return "host parts overlap while the GPU parts take turns"
