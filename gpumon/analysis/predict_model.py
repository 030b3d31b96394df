"""The pair model behind ``gpumon predict``: each job's shared step time from two solo profiles (pure Python).

Equations and their physics are in docs/predict.md; the fitted constants are
``CONSTANTS``, the one place they live. Rates, r, STP and the verdict are
``gpumon.core.rates``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpumon.core.rates import slowdown, stp

TIMESLICE, MPS, CPU = "timeslice", "mps", "cpu"
ITERATIONS = 200


@dataclass(frozen=True)
class Constants:
    """Fitted once on the H100 captures (benchmarks/predict_accuracy.py); no constant per workload or pair."""

    slice_s: float = 4.0e-3        # tau: the time slice a GPU-bound context holds the GPU for
    switch_s: float = 0.6e-3       # sigma: the cost of one context switch between time slices
    mps_contention: float = 0.70   # alpha: the share of the partner's SM activity that delays a kernel under MPS
    # the relative error of r that ~95 % of leave-one-workload-out predictions fell within (CPU: pinned-core tests)
    error: tuple[tuple[str, float], ...] = ((TIMESLICE, 0.15), (MPS, 0.30), (CPU, 0.10))

    def relative_error(self, mode: str) -> float:
        return dict(self.error)[mode]


CONSTANTS = Constants()


@dataclass(frozen=True)
class Solo:
    """One job alone: its step time, the GPU-busy part of it (NaN: no NVML), its CPU demand and pinned cores."""

    step_s: float
    busy: float = math.nan          # fraction of the step the GPU worked for the job (SM active, else NVML util)
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


def mps_step(me: Solo, partner: Solo, active: float, copying: float = 0.0, c: Constants = CONSTANTS) -> float:
    """T' = H + C*(1 + k') + G*(1 + alpha*a'): kernels of both run at once; a kernel slows by the partner's SM
    activity a', a copy by the partner's copying k'."""
    return _off_gpu(me, copying) + me.gpu_s * (1 + c.mps_contention * active)


def cpu_step(me: Solo, partner: Solo) -> float:
    """T' = T * (1 + c' * overlap): time-sharing pinned cores; overlap is the share of my cores the partner may use."""
    if not me.cores or not partner.cores:
        return math.nan
    overlap = len(me.cores & partner.cores) / len(me.cores)
    share = partner.cpu_share if not math.isnan(partner.cpu_share) else 1.0
    return me.step_s * (1 + min(share, 1.0) * overlap)


def predict_pair(a: Solo, b: Solo, mode: str, c: Constants = CONSTANTS) -> PairPrediction:
    """Shared step times of A and B by fixed-point iteration (each job's wait depends on the other's shared step)."""
    if mode == CPU:
        steps = (cpu_step(a, b), cpu_step(b, a))
    else:
        steps, copying = (a.step_s, b.step_s), (0.0, 0.0)
        for _ in range(ITERATIONS):
            # k: the share of its shared step a job copies, its copies stretched by the partner's (1 + k')
            copying = (min(1.0, a.copy_s * (1 + copying[1]) / steps[0]), min(1.0, b.copy_s * (1 + copying[0]) / steps[1]))
            # rho (time slicing) and a (MPS): the share of its shared step a job has kernels to run
            kernels = tuple(max(0.0, 1 - (j.host_s + j.copy_s * (1 + k)) / t)
                            for j, t, k in zip((a, b), steps, copying[::-1]))
            step = timeslice_step if mode == TIMESLICE else mps_step
            new = (step(a, b, kernels[1], copying[1], c), step(b, a, kernels[0], copying[0], c))
            if all(abs(n - o) <= 1e-12 * max(o, 1e-12) for n, o in zip(new, steps)):
                steps = new
                break
            steps = new
    r = tuple(slowdown(1 / solo.step_s, 1 / t) if t > 0 else math.nan for solo, t in zip((a, b), steps))
    return PairPrediction(mode, (steps[0], steps[1]), (r[0], r[1]), stp(r) if not any(map(math.isnan, r)) else math.nan)


def reason(a: Solo, b: Solo, mode: str, names: tuple[str, str] = ("A", "B")) -> str:
    """The dominant physics in words."""
    if mode == CPU:
        if a.cores & b.cores:
            return "both pinned to the same cores: they take turns on them"
        return "pinned to different cores: neither waits for the other"
    bound = [s.busy >= 0.85 for s in (a, b)]
    if mode == MPS:
        if all(bound):
            return "both GPU-bound: under MPS their kernels compete for the SMs"
        return "kernels run side by side under MPS and fill each other's idle SMs"
    if all(bound):
        return "both GPU-bound: time slices split the GPU"
    for i, j in ((0, 1), (1, 0)):
        me, other = (a, b)[i], (a, b)[j]
        if me.gpu_s < CONSTANTS.slice_s and other.gpu_s > 2 * CONSTANTS.slice_s:
            return f"{names[i]}'s short kernels wait for {names[j]}'s time slices"
    return "host parts overlap while the GPU parts take turns"
