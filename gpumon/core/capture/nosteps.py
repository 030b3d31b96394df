"""A command of yours that works but takes no step: the auto-probe counts ``optimizer.step()`` calls, so a
training loop that updates the weights by hand (a manual SGD step, as many classic scripts do) shows
``starting`` and no rate for as long as it runs. Once such a job has used NO_STEPS_CPU_S of CPU without a
step, one notice says why and what to do: headless prints it, the monitor shows it in the job's panel, and
the capture keeps it in run.json's notices (``kind``: ``no steps``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpumon.core.records.enums import JobState
from gpumon.core.records.model import (
    ENDED_STATES,
    NO_STEPS,
    Notice,
    ProcessSample,
    StepEvent,
    WorkloadState,
)

NO_STEPS_CPU_S = (
    5.0  # CPU-seconds of the job's process tree, a torch import and more, before it is said
)
DOCS = "docs/probe.md#auto-probe-unmodified-scripts"


def no_steps_text(cpu_s: float) -> str:
    return (
        f"no steps seen after {cpu_s:.0f} s of CPU: the auto-probe counts optimizer.step(); "
        f"call gpumon.probe.step() in your loop ({DOCS})"
    )


@dataclass
class _Watched:
    t: float  # when its CPU was last added up
    cpu_s: float = 0.0


class NoStepsWatch:
    """Bus subscriber: publishes the ``no steps`` notice of a launched command that uses CPU and takes no step."""

    TAKES = (WorkloadState, StepEvent, ProcessSample)

    def __init__(self, publish: Callable[[object], None], cpu_s: float = NO_STEPS_CPU_S) -> None:
        self.publish = publish
        self.cpu_s = cpu_s
        self._watched: dict[str, _Watched] = {}

    def handle(self, item: object) -> None:
        if isinstance(item, WorkloadState):
            if item.state == JobState.RUNNING and (item.job or {}).get("kind") == "cmd":
                self._watched[item.slot] = _Watched(item.t)
            elif item.state in ENDED_STATES:
                self._watched.pop(item.slot, None)
        elif isinstance(item, StepEvent):
            self._watched.pop(item.slot, None)
        elif isinstance(item, ProcessSample):
            watched = self._watched.get(item.slot)
            if watched is None or item.t <= watched.t:
                return
            if item.cpu_pct == item.cpu_pct:  # NaN: not measured this tick
                watched.cpu_s += item.cpu_pct / 100 * (item.t - watched.t)
            watched.t = item.t
            if watched.cpu_s >= self.cpu_s:
                del self._watched[item.slot]
                self.publish(Notice(item.t, no_steps_text(watched.cpu_s), item.slot, kind=NO_STEPS))
