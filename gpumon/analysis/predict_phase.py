"""How a job shares, read off its beside-partner phase (pure Python; docs/predict.md, "The beside-partner phase").

A job's solo capture may end with a short phase beside gpumon's standard GPU-bound partner (a built-in ``gemm``
whose queue never empties: it holds every turn it gets for a whole slice tau). Bubble-Up (Mars et al., MICRO'11)
measured an application's sensitivity beside a calibrated pressure source and the pressure it exerts; here the
two are the job's step beside the partner (T'_p) and the partner's loss (lambda = 1 - x'_P / x_P, its rate beside
over alone). With the job's solo decomposition (G, H, C) and the GPU's tau and sigma:

    T'_p = G + m*sigma_j + (m - 1)*(tau + sigma_j) + max(H + C, tau + sigma_j)     the job waits m whole slices
    lambda * T'_p = G + 2*m*sigma_j                                                what it takes from the partner

solved for m (the turns a step waits for: how often its queue drains and waits) and sigma_j (the switch its
context costs) by fixed-point iteration from sigma_j = sigma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpumon.analysis.predict_model import DEFAULT, Constants, Solo, host_s, kernel_s

ITERATIONS = 50
# the standard GPU-bound partner of `gpumon run JOB --partner-phase` (a built-in whose queue never empties)
PARTNER_SPEC = "gemm"


def partner_spec(job: str) -> str:
    """The partner's spec beside built-in ``job``: the standard partner at the job's preset, if it names one."""
    preset = (
        [o for o in job.split(":", 1)[1].split(",") if o.startswith("preset=")]
        if ":" in job
        else []
    )
    return f"{PARTNER_SPEC}:{preset[0]}" if preset else PARTNER_SPEC


@dataclass(frozen=True)
class Phase:
    """What a beside-partner phase measured: the job's step beside the partner, and the partner's rates."""

    step_s: float  # T'_p: the job's mean step beside the partner
    partner_alone: float  # x_P: the partner's steps per second alone (its own solo phase)
    partner_beside: float  # x'_P: beside the job

    @property
    def loss(self) -> float:
        """lambda: the share of the partner's time the job took (0..1)."""
        if not (self.partner_alone > 0 and self.partner_beside > 0):  # NaN too: not measured
            return math.nan
        return min(1.0, max(0.0, 1 - self.partner_beside / self.partner_alone))


@dataclass(frozen=True)
class Sharing:
    """The job's turns per step and its switch cost, as ``Solo.turns`` and ``Solo.switch_s`` take them."""

    turns: float
    switch_s: float
    pressure_s: float  # lambda * T'_p: the partner's seconds the job takes per step of its own


def sharing(solo: Solo, phase: Phase, c: Constants = DEFAULT) -> Sharing:
    """m and sigma_j from the phase (module docstring); m at least 1, sigma_j at least 0."""
    g, off = kernel_s(solo, c), host_s(solo, c) + solo.copy_s
    if not phase.step_s > 0:
        return Sharing(math.nan, math.nan, math.nan)
    pressure = (
        phase.loss * phase.step_s
    )  # NaN: the partner's rate alone unknown (sigma_j stays the GPU's)
    sigma, m = c.switch_s, 1.0
    for _ in range(ITERATIONS):
        tail = max(off, c.slice_s + sigma)
        m = max(1.0, (phase.step_s - g - tail + c.slice_s + sigma) / (c.slice_s + 2 * sigma))
        new = sigma if math.isnan(pressure) else max(0.0, (pressure - g) / (2 * m))
        if abs(new - sigma) <= 1e-12:
            break
        sigma = new
    return Sharing(m, sigma if not math.isnan(pressure) else math.nan, pressure)


def with_phase(solo: Solo, phase: Phase | None, c: Constants = DEFAULT) -> Solo:
    """The solo profile with what its phase measured (unchanged without one)."""
    if phase is None:
        return solo
    s = sharing(solo, phase, c)
    return replace(solo, turns=s.turns, switch_s=s.switch_s)
