"""``gpumon run``'s run sequence as a plain state machine: what to start, when, or why not.

Job A starts at once and job B ``stagger_s`` later, or not at all: not once a started job has failed (or could
not be started), a stop came (a signal, the user quit) or the capture stopped (``--on-capture-error stop``).
With ``--beside`` the running process is B, attached first, and A starts once B's lead is known
(``SoloHistory``), not at all if B ends first. ``--duration`` ends the run, and with it every start still
waiting. A job that never starts is published as "not started" with the reason, so run.json records it.

The headless runner and the TUI each make one from the plan and call ``advance`` on their main thread (the thread
that forks the jobs: PDEATHSIG follows it) when ``wake_at`` comes or something happened; they only say what it
returns (``Started``, ``NotStarted``, ``LaunchFailed``, ``TimeUp``) and never decide the order themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpumon.core.records.enums import JobState
from gpumon.core.capture.session import Session
from gpumon.core.jobs.beside import SLOT as BESIDE_SLOT
from gpumon.core.jobs.beside import SoloHistory
from gpumon.core.jobs.launcher import LaunchRequest, Workload
from gpumon.core.records.model import WorkloadState
from gpumon.core.records.slots import SLOTS, Slot
from gpumon.errors import GpumonError

# With --beside, how often to look whether B's lead is known (its steps arrive on the bus in between).
LEAD_POLL_S = 0.25


@dataclass(frozen=True)
class Started:
    """A job of the plan was launched (or, ``--beside``, attached) in its slot."""

    slot: Slot
    workload: Workload  # as it was just after the start


@dataclass(frozen=True)
class NotStarted:
    """A job of the plan will never start, and why (also published as its "not started" state)."""

    slot: Slot
    request: LaunchRequest
    reason: str


@dataclass(frozen=True)
class LaunchFailed:
    """Starting a job raised (it could not be forked, or its slot was taken meanwhile); ``error`` says so."""

    slot: Slot
    request: LaunchRequest
    error: str


@dataclass(frozen=True)
class TimeUp:
    """``--duration`` is over: the front end stops the run."""

    duration_s: float


Event = Started | NotStarted | LaunchFailed | TimeUp


@dataclass
class _Waiting:
    slot: Slot
    request: LaunchRequest
    at: float | None  # run time it is due (None: once B's lead is known, --beside)


class RunSequence:
    """The plan's starts in order; ``advance`` does what is due and returns what it did."""

    def __init__(
        self,
        session: Session,
        requests: tuple[LaunchRequest, ...],
        *,
        stagger_s: float,
        duration_s: float | None,
        beside: LaunchRequest | None = None,
    ) -> None:
        """``requests``: the jobs to launch (A, then B); ``beside``: a running process to watch as B first."""
        self.session = session
        self.requests = requests
        self.stagger_s = stagger_s
        self.duration_s = duration_s
        self.beside = beside
        self.start_t: float | None = None
        self.over = False  # stopped or timed out: nothing more starts
        self.not_started: dict[Slot, str] = {}
        self.failed_starts: dict[
            Slot, str
        ] = {}  # jobs whose start or attach raised, and what it said
        self._waiting: list[_Waiting] = []
        self._history: SoloHistory | None = None
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def pending(self) -> bool:
        """A job of the plan still waits to start."""
        return bool(self._waiting)

    def wake_at(self) -> float | None:
        """The run time by which ``advance`` should be called again (None: nothing more to do by time)."""
        if self.over or self.start_t is None:
            return None
        times = [
            w.at if w.at is not None else self.session.clock.now() + LEAD_POLL_S
            for w in self._waiting
        ]
        if self.duration_s:
            times.append(self.start_t + self.duration_s)
        return min(times) if times else None

    def advance(self, stopping: str | None = None) -> list[Event]:
        """Start what is due now, give up on what cannot start any more, and say the time is up when it is.

        ``stopping``: why the front end is stopping ("stopped by SIGTERM", "the monitor was quit"), so that
        nothing more starts. Call on the main thread.
        """
        events: list[Event] = []
        if self.over:
            return events
        if self.start_t is None:
            events += self._begin(stopping)
        now = self.session.clock.now()
        time_up = bool(self.duration_s) and now >= (self.start_t or now) + (self.duration_s or 0.0)
        for waiting in list(self._waiting):
            reason = self._why_not(waiting, now, stopping, time_up)
            if reason is not None:
                events.append(self._give_up(waiting, reason))
            elif (
                waiting.at is not None
                and now >= waiting.at
                or waiting.at is None
                and self._lead_known(now)
            ):
                events.append(self._launch(waiting))
        if not self._waiting and self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if time_up and self.duration_s:
            events.append(TimeUp(self.duration_s))
        if time_up or stopping is not None:
            self.over = True
        return events

    def _begin(self, stopping: str | None) -> list[Event]:
        """Plan the starts from now; with ``--beside`` attach B at once (A waits for B's lead)."""
        self.start_t = self.session.clock.now()
        events: list[Event] = []
        launched = iter(SLOTS)
        if self.beside is not None:
            if self.requests:
                self._history = SoloHistory(BESIDE_SLOT)
                self._unsubscribe = self.session.bus.subscribe(
                    self._history.handle, *SoloHistory.TAKES
                )
            if stopping is None:
                try:
                    events.append(
                        Started(
                            BESIDE_SLOT, self.session.attach(slot=BESIDE_SLOT, request=self.beside)
                        )
                    )
                except (
                    GpumonError
                ) as exc:  # e.g. it exited since the plan was checked: A must not start then
                    self.failed_starts[BESIDE_SLOT] = str(exc)
                    events.append(LaunchFailed(BESIDE_SLOT, self.beside, str(exc)))
            launched = iter(s for s in SLOTS if s != BESIDE_SLOT)
            self._waiting = [_Waiting(next(launched), r, None) for r in self.requests]
        else:
            self._waiting = [
                _Waiting(next(launched), r, self.start_t + self.stagger_s * i)
                for i, r in enumerate(self.requests)
            ]
        return events

    def _lead_known(self, now: float) -> bool:
        """``--beside``: B's steps alone (or B watched alone) span the lead, so A may start."""
        assert self._history is not None and self.start_t is not None
        return self._history.enough(now - self.start_t, self.stagger_s)

    def _why_not(
        self, waiting: _Waiting, now: float, stopping: str | None, time_up: bool
    ) -> str | None:
        """Why ``waiting`` can no longer start (None: it still may), in the words run.json and stderr give."""
        session = self.session
        attached = session.launcher.get(BESIDE_SLOT) if self.beside is not None else None
        failed = session.launcher.failed()
        capture_stopped = (
            session.capture_error is not None and session.config.on_capture_error == "stop"
        )
        if stopping is not None:
            why = f"{stopping} before its start"
        elif attached is not None and not attached.owned and not attached.running:
            why = f"{BESIDE_SLOT} (pid {attached.pid}) ended at {attached.stop_t or 0:.1f} s, before {waiting.slot}'s start"
        elif failed:
            w = failed[0]
            why = f"{w.slot} {w.ending()} at {w.stop_t or 0:.1f} s, before {waiting.slot}'s start"
        elif self.failed_starts:
            slot, error = next(iter(self.failed_starts.items()))
            why = f"{slot} could not start ({error}), before {waiting.slot}'s start"
        elif capture_stopped:
            why = "the capture stopped before its start"
        elif time_up:
            why = f"--duration {self.duration_s:g} ended before its start"
        else:
            return None
        if self.stagger_s:
            at = waiting.at if waiting.at is not None else now
            why += f" at {at:.1f} s (--stagger {self.stagger_s:g})"
        return why

    def _give_up(self, waiting: _Waiting, reason: str) -> NotStarted:
        self._waiting.remove(waiting)
        self.not_started[waiting.slot] = reason
        self.session.bus.publish(
            WorkloadState(waiting.slot, JobState.NOT_STARTED, self.session.clock.now(), tail=reason)
        )
        return NotStarted(waiting.slot, waiting.request, reason)

    def _launch(self, waiting: _Waiting) -> Started | LaunchFailed:
        self._waiting.remove(waiting)
        try:
            workload = self.session.launch(slot=waiting.slot, request=waiting.request)
        except GpumonError as exc:
            self.failed_starts[waiting.slot] = str(exc)
            return LaunchFailed(waiting.slot, waiting.request, str(exc))
        return Started(waiting.slot, workload)
