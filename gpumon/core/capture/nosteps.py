"""A command of yours that trains but takes no step: the auto-probe counts ``optimizer.step()`` calls, so a
training loop that updates the weights by hand (a manual SGD step, as many classic scripts do) shows
``starting`` and no rate for as long as it runs. Once such a job has used NO_STEPS_CPU_S of CPU since its first
backward pass (the auto-probe's ``training`` meta: never while it imports or loads its data, however long) without
a step, one notice says why and what to do: headless prints it, the monitor shows it in the job's panel, and the
capture keeps it in run.json's notices (``kind``: ``no steps``). A step after it withdraws it: a second notice
(``kind``: ``no steps withdrawn``) that the front ends and run.json read as the first one's end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpumon.core.records.enums import JobState
from gpumon.core.records.model import (
    ENDED_STATES,
    NO_STEPS,
    NO_STEPS_WITHDRAWN,
    Notice,
    ProcessSample,
    StepBatch,
    WorkloadMeta,
    WorkloadState,
)

NO_STEPS_CPU_S = (
    5.0  # CPU-seconds of the job's process tree since its first backward pass, without a step
)
DOCS = "docs/probe.md#auto-probe-unmodified-scripts"


def no_steps_text(cpu_s: float) -> str:
    return (
        f"no steps seen after {cpu_s:.0f} s of CPU since its first backward pass: the auto-probe counts "
        f"optimizer.step(); call gpumon.probe.step() in your loop ({DOCS})"
    )


def withdrawn_text(t: float) -> str:
    return f"steps arrived at {t:.1f} s: the no-steps notice is withdrawn"


@dataclass
class _Watched:
    training: bool = False  # its first backward pass ran: CPU counts from then
    t: float = 0.0  # when its CPU was last added up
    cpu_s: float = 0.0


class NoStepsWatch:
    """Bus subscriber: publishes the ``no steps`` notice of a launched command that trains and takes no step, and
    withdraws it when steps arrive."""

    TAKES = (WorkloadState, WorkloadMeta, StepBatch, ProcessSample)

    def __init__(self, publish: Callable[[object], None], cpu_s: float = NO_STEPS_CPU_S) -> None:
        self.publish = publish
        self.cpu_s = cpu_s
        self._watched: dict[str, _Watched] = {}
        self._said: set[str] = set()  # jobs told they take no step, until one arrives

    def handle(self, item: object) -> None:
        if isinstance(item, WorkloadState):
            if item.state == JobState.RUNNING and (item.job or {}).get("kind") == "cmd":
                self._watched[item.slot] = _Watched()
            elif item.state in ENDED_STATES:
                self._watched.pop(item.slot, None)
        elif isinstance(item, WorkloadMeta):
            watched = self._watched.get(item.slot)
            if watched is not None and item.info.get("training") and not watched.training:
                watched.training = True
                watched.t = -1.0  # the next process sample starts the count
        elif isinstance(item, StepBatch):
            self._watched.pop(item.slot, None)
            if item.slot in self._said:
                self._said.discard(item.slot)
                t = item.steps[0].t
                self.publish(Notice(t, withdrawn_text(t), item.slot, kind=NO_STEPS_WITHDRAWN))
        elif isinstance(item, ProcessSample):
            self._sample(item)

    def _sample(self, item: ProcessSample) -> None:
        watched = self._watched.get(item.slot)
        if watched is None or not watched.training or item.t <= watched.t:
            return
        if watched.t >= 0 and item.cpu_pct == item.cpu_pct:  # NaN: not measured this tick
            watched.cpu_s += item.cpu_pct / 100 * (item.t - watched.t)
        watched.t = item.t
        if watched.cpu_s >= self.cpu_s:
            del self._watched[item.slot]
            self._said.add(item.slot)
            self.publish(Notice(item.t, no_steps_text(watched.cpu_s), item.slot, kind=NO_STEPS))
