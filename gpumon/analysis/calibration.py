"""From the calibration probes' timings to a GPU model's constants (pure Python; ``gpumon calibrate``).

Two probes keep the device busy with back-to-back kernels of length d, each stamping every kernel's end on its own
clock. Alone, a probe's ends are d apart. Time-sliced beside the other, they come in runs (this probe held the
device: one slice, tau) separated by gaps (the other held it for its slice, with a switch each way: tau' + 2*sigma).
So tau is the median run, and sigma half of what a gap holds beyond the other probe's median run. A probe that
runs one kernel at a time with host gaps between measures how NVML's utilisation reads kernel time (its kernels'
own time over the wall, against NVML's figure for the same seconds: the utilisation scale). Under MPS the two run
at once: each one's kernel rate alone over its rate beside the other is its slowdown r = 1 + gamma, gamma the SMs a
GPU-bound job's kernels hold (docs/predict.md).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

GAP_FACTOR = (
    1.5  # an end further than this many kernel lengths after the previous one follows a gap
)
MIN_RUNS = 4  # fewer whole runs (or gaps) than this: the probes did not alternate enough to tell


class CalibrationFailed(RuntimeError):
    """The probes' timings cannot give the constant (with why, in one line)."""


@dataclass(frozen=True)
class Timeline:
    """One probe's kernels seen while the other probe also had work: the runs it held the device for, the gaps."""

    runs: tuple[float, ...]
    gaps: tuple[float, ...]
    kernel_s: float


def timeline(ends: Sequence[float]) -> Timeline:
    """Runs and gaps of one probe's kernels, from their end times. The first run (from the probe's start, perhaps
    before the other had work) is dropped, and the last is never closed by a gap (the other may have finished):
    every run kept lies between two of the other probe's turns, every gap is one."""
    inside = sorted(ends)
    if len(inside) < 3:
        return Timeline((), (), math.nan)
    steps = [b - a for a, b in zip(inside, inside[1:])]
    step = statistics.median(
        steps
    )  # a kernel's length on the device, as most consecutive ends are one apart
    runs, gaps, first = [], [], inside[0] - step
    for a, b in zip(inside, inside[1:]):
        if b - a > GAP_FACTOR * step:
            runs.append(a - first)
            gaps.append(b - a - step)
            first = b - step
    return Timeline(tuple(runs[1:]), tuple(gaps), step)


@dataclass(frozen=True)
class Slicing:
    """The time slice and the switch cost, and what they were read from."""

    slice_s: float
    switch_s: float
    runs: int
    gaps: int
    kernel_s: float
    busy_share: float  # the share of the shared window either probe's kernels ran (1 - switching)

    def details(self) -> dict[str, float]:
        return {
            "runs": self.runs,
            "gaps": self.gaps,
            "kernel_s": self.kernel_s,
            "busy_share": self.busy_share,
        }


def slicing(a: Timeline, b: Timeline) -> Slicing:
    """tau = the median run of both probes; sigma = (median gap of each, less the other's median run) / 2, averaged;
    CalibrationFailed when the probes alternated fewer than ``MIN_RUNS`` times."""
    for name, t in (("A", a), ("B", b)):
        if len(t.runs) < MIN_RUNS or len(t.gaps) < MIN_RUNS:
            raise CalibrationFailed(
                f"probe {name} saw {len(t.runs)} whole time slices and {len(t.gaps)} gaps beside "
                f"the other (at least {MIN_RUNS} needed): the device did not time-slice them"
            )
    run_a, run_b = statistics.median(a.runs), statistics.median(b.runs)
    gap_a, gap_b = statistics.median(a.gaps), statistics.median(b.gaps)
    switch = max(0.0, ((gap_a - run_b) + (gap_b - run_a)) / 4)
    busy = (run_a + run_b) / (
        (run_a + gap_a + run_b + gap_b) / 2
    )  # one cycle: both runs and two switches
    return Slicing(
        (run_a + run_b) / 2,
        switch,
        len(a.runs) + len(b.runs),
        len(a.gaps) + len(b.gaps),
        (a.kernel_s + b.kernel_s) / 2,
        busy,
    )


def seen_slice(short: Timeline, switch_s: float) -> float:
    """The slice as a job with short kernels sees it beside a partner whose kernels fill the SMs: the short probe's
    median gap (the partner's hold and a switch each way) less two switches; CalibrationFailed with too few gaps."""
    if len(short.gaps) < MIN_RUNS:
        raise CalibrationFailed(
            f"the short-kernel probe saw {len(short.gaps)} gaps beside the SM-filling one "
            f"(at least {MIN_RUNS} needed): the device did not time-slice them"
        )
    return max(statistics.median(short.gaps) - 2 * switch_s, 0.0)


def util_scale(
    busy_s: float, wall_s: float, nvml_util_pct: Sequence[float]
) -> tuple[float, float, float]:
    """kappa = the probe's kernel time over the wall, against NVML's mean utilisation over the same seconds; with
    both figures. CalibrationFailed when NVML gave no reading or read the device idle."""
    known = [u for u in nvml_util_pct if not math.isnan(u)]
    if not known:
        raise CalibrationFailed("NVML gave no utilisation while the duty probe ran")
    nvml = statistics.fmean(known) / 100
    if nvml <= 0:
        raise CalibrationFailed("NVML read the GPU idle while the duty probe's kernels ran")
    true = busy_s / wall_s
    return true / nvml, true, nvml


def spacing(ends: Sequence[float]) -> float:
    """The median time between consecutive kernel ends: a kernel's length as the probe saw it (robust to the stretch
    at either end where the other probe had not started or had already finished)."""
    return statistics.median(b - a for a, b in zip(ends, ends[1:])) if len(ends) > 2 else math.nan


def sm_fill(
    alone: Sequence[Sequence[float]], beside: Sequence[Sequence[float]]
) -> tuple[float, list[float]]:
    """gamma = mean(r) - 1 over the probes, r = a probe's kernel spacing beside the other under MPS over its spacing
    alone (two GPU-bound jobs: r = 1 + gamma), kept within [0.05, 1]; with each probe's r."""
    r = [spacing(b) / spacing(a) for a, b in zip(alone, beside)]
    r = [x for x in r if not math.isnan(x) and x > 0]
    if not r:
        raise CalibrationFailed("the MPS probes gave no kernel timings")
    return min(1.0, max(0.05, statistics.fmean(r) - 1)), r
