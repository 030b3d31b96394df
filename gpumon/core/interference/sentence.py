"""The verdict in the user's words: does sharing pay, how much each job slowed, and why.

"sharing pays: together they do 1.30x the work of one alone (STP 1.30 [1.26, 1.33]);
lstm barely notices fcn (r 1.03); fcn runs 2.4x slower, mostly waiting for the GPU".
Wording only: the verdict word, r, STP and what a slowdown is called come from gpumon.core.records.rates, the cause
from gpumon.core.interference.attribution. No torch, no pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from gpumon.core.interference.attribution import NONE, UNKNOWN, Attribution
from gpumon.core.records.rates import BARELY, FASTER, LOSES, PAYS, effect

TWO_DIGITS_BELOW = (
    1.5  # "runs 1.19× slower" (a small slowdown to the digit r has), "runs 2.4× slower"
)


@dataclass(frozen=True)
class JobWords:
    """One job as the sentence names it: its label, the other job's label, its slowdown and its cause."""

    label: str
    other: str
    r: float
    why: Attribution | None = None
    known: str = (
        ""  # a job without a probe: "rate unknown (no probe); SM 30 % alone → 15 % beside fcn ..."
    )


def labels(names: Sequence[str], slots: Sequence[str]) -> list[str]:
    """Workload names (``fcn``), or ``fcn A``/``fcn B`` when both jobs have the same name."""
    if len(set(names)) == len(names):
        return list(names)
    return [f"{n} {s}" for n, s in zip(names, slots)]


def job_words(job: JobWords) -> str:
    """``fcn runs 2.4x slower, mostly waiting for the GPU``, ``lstm barely notices fcn (r 1.03)`` ...

    The words follow ``gpumon.core.records.rates.effect``: the live line and compare call a slowdown the same.
    """
    if job.known:
        return f"{job.label}: {job.known}"
    said = effect(job.r)
    if not said:
        return f"{job.label}: no exclusive rate, so no slowdown"
    if said in (FASTER, BARELY):
        return f"{job.label} {said} {job.other} (r {job.r:.2f})"
    text = f"{job.label} runs {job.r:.{2 if job.r < TWO_DIGITS_BELOW else 1}f}× slower"
    why = job.why
    if why is None or why.cause == NONE:
        return text
    if why.cause == UNKNOWN:
        return f"{text} ({why.phrase})"
    return f"{text}, {why.phrase}"


def head(
    verdict: str, stp: float, stp_text: str, interval: bool = True, no_interval: str = ""
) -> str:
    """``sharing pays: together they do 1.30x the work of one alone (STP 1.30 [1.26, 1.33])``.

    ``interval``: whether ``stp_text`` holds an interval (the live line has a point only); ``no_interval``: why
    compare has none (too few steps), said instead of an interval that straddles 1.
    """
    if math.isnan(stp):
        return "cannot tell whether sharing pays: STP needs both jobs' exclusive rates"
    work = f"together they do {stp:.2f}× the work of one alone (STP {stp_text})"
    if verdict == PAYS:
        return f"sharing pays: {work}"
    if verdict == LOSES:
        return f"sharing loses: {work.replace('they do', 'they do only')}"
    if not interval:
        return f"sharing breaks even: {work}"
    if no_interval:
        return f"cannot tell whether sharing pays: {work}, and no interval: {no_interval}"
    return f"cannot tell whether sharing pays: {work}, an interval that straddles 1"


def disturbed_words(who: Sequence[str]) -> str:
    """``disturbed: pid 4242 (alice, python3) also used the GPU, so this is not a clean measurement``."""
    return f"disturbed: {' and '.join(who)} also used the GPU, so this is not a clean measurement"


def sentence(
    verdict: str,
    stp: float,
    stp_text: str,
    jobs: Sequence[JobWords],
    interval: bool = True,
    disturbed_by: Sequence[str] = (),
    no_interval: str = "",
) -> str:
    """The whole verdict: the head, then each job, then who disturbed it, separated by semicolons."""
    parts = [head(verdict, stp, stp_text, interval, no_interval), *(job_words(j) for j in jobs)]
    if disturbed_by:
        parts.append(disturbed_words(disturbed_by))
    return "; ".join(parts)
