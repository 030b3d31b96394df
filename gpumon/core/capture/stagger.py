"""A ``--stagger`` that a busy box loses: the second job started before the first took a step after its warm-up,
so the first never ran alone and the run has no exclusive phase to be its own baseline (``compare --shared``
then says the same). Said once, when the second job starts: headless prints it, the monitor shows it, and the
capture keeps it in run.json's notices."""

from __future__ import annotations

from typing import Callable

from gpumon.core.records.enums import JobState
from gpumon.core.records.model import Notice, StepBatch, WorkloadState

LOST_STAGGER = "lost stagger"  # Notice.kind


class StaggerWatch:
    """Bus subscriber: the ``lost stagger`` notice of a staggered pair (``stagger_s`` > 0; launched jobs only)."""

    TAKES = (WorkloadState, StepBatch)

    def __init__(self, publish: Callable[[object], None], stagger_s: float) -> None:
        self.publish = publish
        self.stagger_s = stagger_s
        self._started: list[str] = []  # launched jobs, in the order they started
        self._alone: set[str] = set()  # jobs that took a step after their warm-up

    def handle(self, item: object) -> None:
        if self.stagger_s <= 0:
            return
        if isinstance(item, StepBatch):
            if item.slot not in self._alone and not all(step.warmup for step in item.steps):
                self._alone.add(item.slot)
        elif (
            isinstance(item, WorkloadState)
            and item.state == JobState.RUNNING
            and item.job is not None
        ):
            if item.slot in self._started:
                return
            self._started.append(item.slot)
            if len(self._started) == 2 and self._started[0] not in self._alone:
                first, second = self._started
                self.publish(
                    Notice(
                        item.t,
                        (
                            f"--stagger {self.stagger_s:g} was lost: {second} started at {item.t:.1f} s, before {first} took a "
                            f"step after its warm-up, so {first} never ran alone (no exclusive phase to compare against; "
                            f"a longer --stagger on this box, or --baseline/--exclusive runs)"
                        ),
                        second,
                        kind=LOST_STAGGER,
                    )
                )
