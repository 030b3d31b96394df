"""The monitor's per-slot state, fed by the bus: each job's spec, state, steps, rates, log and metadata, and the
workload panels each refresh draws. No Textual here."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from gpumon.core.jobs.beside import UNKNOWN_RATE
from gpumon.core.interference.live import RUNNING_STATES, LiveFigures, LiveNow
from gpumon.core.records.enums import JobState
from gpumon.core.records.model import (
    NO_STEPS,
    NO_STEPS_WITHDRAWN,
    LogLine,
    Notice,
    RingBuffer,
    StepBatch,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
)
from gpumon.core.records.slots import SLOTS
from gpumon.tui.series import BinnedSeries, nice_ceiling
from gpumon.tui.view import Series, WorkloadView

NAN = math.nan


@dataclass
class SlotState:
    """Mutable per-slot state, written by bus threads, read by the refresh thread, both under ``Slots``' lock."""

    iter_rate: BinnedSeries
    sample_rate: BinnedSeries
    log: RingBuffer[str]
    spec: str = ""
    state: WorkloadState | None = None
    start_t: float = NAN
    last_step: StepEvent | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    no_steps: str = (
        ""  # the NO_STEPS notice's words: a command that works and takes no step the probe sees
    )


class Slots:
    """Every slot's state; ``baselines``: the exclusive rates from elsewhere (``--baseline`` runs), by slot."""

    def __init__(self, bin_s: float, history: int, log_lines: int) -> None:
        self.bin_s = bin_s
        self.history = history
        self.baselines: dict[str, tuple[float, str]] = {}
        self._log_lines = log_lines
        # A slot's state is replaced when a new job starts in it, while bus threads may still be writing the last
        # steps or lines of the one before: replacing, writing and reading all hold this lock, so a writer never
        # fills a state that has just been replaced and the refresh never sees half of one.
        self._lock = threading.Lock()
        self._slots: dict[str, SlotState] = {slot: self._new_slot() for slot in SLOTS}

    def _new_slot(self) -> SlotState:
        return SlotState(
            BinnedSeries(self.bin_s, self.history),
            BinnedSeries(self.bin_s, self.history),
            RingBuffer(self._log_lines),
        )

    def set_spec(self, slot: str, spec: str) -> None:
        """Name what is (about to be) running in ``slot``."""
        with self._lock:
            self._slots[slot].spec = spec

    # -- bus side -------------------------------------------------------------

    def handle(self, item: object) -> None:
        """File a step, log line, state, metadata or no-steps notice in its slot; ignore the rest."""
        if isinstance(item, StepBatch):
            self.file_steps(item)
            return
        with self._lock:
            if isinstance(item, LogLine):
                if item.slot in self._slots:
                    self._slots[item.slot].log.append(item.text)
            elif isinstance(item, WorkloadState):
                self._file_state(item)
            elif isinstance(item, WorkloadMeta):
                if item.slot in self._slots:
                    self._slots[item.slot].meta = dict(item.info)
            elif isinstance(item, Notice):
                if item.kind in (NO_STEPS, NO_STEPS_WITHDRAWN) and item.slot in self._slots:
                    self._slots[item.slot].no_steps = item.text if item.kind == NO_STEPS else ""

    def file_steps(self, batch: StepBatch) -> None:
        """The steps in their slot's state."""
        with self._lock:
            slot = self._slots.get(batch.slot)
            if slot is None:
                return
            # the graphs' rates are wall-clock too: each step over the time since the one before
            steps = batch.steps if slot.last_step is None else (slot.last_step, *batch.steps)
            pairs = list(zip(steps, steps[1:]))
            slot.iter_rate.add_all((step.t, 1.0, step.t - before.t) for before, step in pairs)
            slot.sample_rate.add_all(
                (step.t, step.samples, step.t - before.t) for before, step in pairs
            )
            slot.last_step = batch.steps[-1]

    def _file_state(self, state: WorkloadState) -> None:
        """A job's new state; a job starting in a slot gets a fresh state there (the lock held)."""
        if state.slot not in self._slots:
            return
        if state.state == JobState.STARTING:
            spec = self._slots[state.slot].spec
            self._slots[state.slot] = self._new_slot()
            self._slots[state.slot].spec = spec
        slot = self._slots[state.slot]
        if state.state == JobState.RUNNING:
            slot.start_t = state.t
        slot.state = state

    # -- refresh side ---------------------------------------------------------

    def view(self, now: float, n: int, live: LiveNow) -> tuple[WorkloadView, ...]:
        """Every slot's panel, with ``n`` bins of history, from the live computation's answer ``live``."""
        with self._lock:
            return tuple(
                self._workload_view(
                    name,
                    slot,
                    now,
                    n,
                    live.figures.get(name),
                    name in live.running,
                    live.exclusive.get(name, NAN),
                )
                for name, slot in self._slots.items()
            )

    def _exclusive(self, name: str, phase: float) -> tuple[float, str]:
        """A ``--baseline`` run's rate, else the job's exclusive phase so far (the live computation's), else NaN."""
        if name in self.baselines:
            return self.baselines[name]
        return (phase, "exclusive phase") if not math.isnan(phase) else (NAN, "")

    def _workload_view(
        self,
        name: str,
        slot: SlotState,
        now: float,
        n: int,
        figures: LiveFigures | None,
        running: bool,
        phase: float,
    ) -> WorkloadView:
        state = slot.state
        figures = figures if state is not None else None
        label, healthy = _state_label(state, slot.last_step)
        hint = slot.no_steps if label == JobState.STARTING else ""
        exclusive, source = self._exclusive(name, phase)
        end = state.t if state is not None and state.state not in RUNNING_STATES else now
        iter_values = slot.iter_rate.values(now, n, 0.0 if running else NAN)
        sample_values = slot.sample_rate.values(now, n)
        # the scale of what the graph shows now: a fast first step that scrolled away no longer flattens the rest
        top = nice_ceiling(max(_shown_peak(iter_values), exclusive if exclusive > 0 else 0.0))
        return WorkloadView(
            slot=name,
            spec=slot.spec,
            state=NO_STEPS if hint else label,
            healthy=healthy,
            pid=state.pid if state is not None else None,
            figures=figures,
            elapsed_s=end - slot.start_t if not math.isnan(slot.start_t) else NAN,
            iter_rate=Series(iter_values, top, "it/s"),
            sample_rate=Series(
                sample_values, nice_ceiling(_shown_peak(sample_values)), "samples/s"
            ),
            exclusive_rate=exclusive,
            exclusive_source=source,
            last_step_t=slot.last_step.t if slot.last_step is not None else NAN,
            log=tuple(slot.log.snapshot()),
            hint=hint,
            device=str(slot.meta.get("device") or ""),
            meta=dict(slot.meta),
            active=running,
        )


def _shown_peak(values: tuple[float, ...]) -> float:
    """The largest of a graph's shown values (0 when none is known)."""
    return max([v for v in values if v == v], default=0.0)


def _state_label(state: WorkloadState | None, last_step: StepEvent | None) -> tuple[str, bool]:
    """The panel's state word and whether it is good news."""
    if state is None:
        return "empty", True
    if (
        state.state == JobState.RUNNING and state.attached is not None
    ):  # --beside: not ours, never signalled
        return (
            "watched, not ours" if state.attached.get("probe") else f"watched, rate {UNKNOWN_RATE}"
        ), True
    if state.state == JobState.DETACHED:
        return "detached (still running)", True
    if state.state == JobState.STARTING or (state.state == JobState.RUNNING and last_step is None):
        return "starting", True
    if state.state == JobState.RUNNING:
        return ("warm-up" if last_step is not None and last_step.warmup else "running"), True
    if state.state == JobState.EXITED:
        return f"exited {state.exit_status}", state.exit_status == 0
    if state.state == JobState.STOPPED:
        return "stopped", True
    return state.state, False
