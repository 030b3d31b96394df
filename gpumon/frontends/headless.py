"""``gpumon run --headless``: no TUI; one status line per second per workload, for scripts and CI."""

from __future__ import annotations

import json
import math
import queue
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from gpumon.core.records.printable import printable
from gpumon.core.records.enums import JobState
from gpumon.console.stopsignals import StopGuard
from gpumon.core.capture.outcome import exit_code
from gpumon.core.capture.sequence import LaunchFailed, NotStarted, Started, TimeUp
from gpumon.core.capture.session import Session
from gpumon.core.interference.live import LiveFigures, LiveNow
from gpumon.core.interference.live_cause import LiveCauses, cause_words, load_baseline
from gpumon.core.jobs.beside import SLOT as BESIDE_SLOT
from gpumon.core.jobs.beside import UNKNOWN_RATE, KnownUse, LiveKnownUse
from gpumon.core.jobs.launcher import Workload
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import (
    ENDED_STATES,
    NO_STEPS,
    NO_STEPS_WITHDRAWN,
    Notice,
    SourceStatus,
    WorkloadState,
)
from gpumon.core.records.rates import Interference, interference
from gpumon.core.records.slots import Slot, is_slot
from gpumon.core.records.specwords import shown_spec
from gpumon.core.records.tokens import tokens_per_s
from gpumon.core.records.units import DASH, bytes_per_s, fmt_rate, json_number, pct
from gpumon.core.store.trace import baseline_rate
from gpumon.errors import UsageError
from gpumon.frontends.detach import CAPTURING, move_output_to_log
from gpumon.frontends.plan import RunPlan, short_name

STATUS_PERIOD_S = 1.0
EVENTS = (
    WorkloadState,
    Notice,
    SourceStatus,
)  # what the main thread prints besides the status lines
# Nobody watches a screen here: the probes are read once per status line (steps keep the child's own times).
LISTEN_S = STATUS_PERIOD_S


def one_line(text: str, width: int = 60) -> str:
    """``text`` on one line (a multi-line ``python -c`` command), cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


SPEC_WIDTH = (
    24  # the spec column, widened to the run's longest spec up to SPEC_MAX (longer ones end in "…")
)
SPEC_MAX = 60


def spec_width(specs: list[str]) -> int:
    return min(
        SPEC_MAX, max([SPEC_WIDTH, *(len(one_line(shown_spec(s), SPEC_MAX)) for s in specs)])
    )


def status_line(
    t: float,
    spec: str,
    state: str,
    f: LiveFigures,
    copy_word: str = "copy",
    width: int = SPEC_WIDTH,
    meta: dict | None = None,
) -> str:
    """``copy_word``: ``memcpy`` for a job on the CPU (a RAM-to-RAM copy timed on the host, no link); ``meta``: what
    the job said of itself (a framework callback or the auto-probe: its steps are optimizer steps, of N
    micro-batches)."""
    copy = f"{copy_word} {bytes_per_s(f.copy_bandwidth)} ({bytes_per_s(f.copy_bytes_per_s)} wall)"
    tokens = tokens_per_s(f.samples_per_s, meta or {})
    said = (
        "" if math.isnan(tokens) else f" {fmt_rate(tokens, 'tokens/s')}"
    )  # where a callback said tokens
    return (
        f"{t:7.1f}s {f.slot} {one_line(shown_spec(spec), width):<{width}} {state:<8} {fmt_rate(f.iter_per_s):>11} "
        f"{fmt_rate(f.samples_per_s, 'samples/s'):>17}{said}  {copy}  cpu {pct(f.cpu_pct)}  "
        f"{steps_words(f.steps, meta or {})}"
    )


def steps_words(steps: int, meta: dict) -> str:
    """``steps 75``, or what a step is when the job said so: ``optimizer steps 75 (4 micro-batches each)``."""
    counts = str(meta.get("counts") or "steps")
    micro = meta.get("micro_batches")
    each = f" ({micro} micro-batches each)" if isinstance(micro, int) and micro > 1 else ""
    return f"{counts} {steps}{each}"


def status_json(t: float, spec: str, state: str, f: LiveFigures, meta: dict | None = None) -> str:
    """``counts``: what a step is (``optimizer steps`` when a callback or the auto-probe said so, else ``steps``)."""
    meta = meta or {}
    micro = meta.get("micro_batches")
    return json.dumps(
        {
            "t": round(t, 3),
            "process": f.slot,
            "spec": spec,
            "state": state,
            "steps": f.steps,
            "counts": str(meta.get("counts") or "steps"),
            "micro_batches": micro if isinstance(micro, int) else None,
            "iter_per_s": json_number(f.iter_per_s),
            "samples_per_s": json_number(f.samples_per_s),
            "tokens_per_s": json_number(tokens_per_s(f.samples_per_s, meta)),
            "copy_bandwidth": json_number(f.copy_bandwidth),
            "copy_bytes_per_s": json_number(f.copy_bytes_per_s),
            "cpu_pct": json_number(f.cpu_pct),
            "warmup": f.warmup,
        }
    )


def blind_line(
    t: float, spec: str, f: LiveFigures, known: KnownUse, other: str, width: int = SPEC_WIDTH
) -> str:
    """An attached job without a probe: its rate unknown, and its SM % and GPU memory alone and now."""
    return (
        f"{t:7.1f}s {f.slot} {one_line(shown_spec(spec), width):<{width}} running  rate {UNKNOWN_RATE}  "
        f"{known.phrase(other or 'the other job')}  cpu {pct(f.cpu_pct)}"
    )


def blind_json(t: float, spec: str, f: LiveFigures, known: KnownUse, other: str) -> str:
    return json.dumps(
        {
            "t": round(t, 3),
            "process": f.slot,
            "spec": spec,
            "state": "running",
            "steps": None,
            "iter_per_s": None,
            "rate": UNKNOWN_RATE,
            "known": known.to_dict(),
            "cpu_pct": json_number(f.cpu_pct),
        }
    )


def interference_line(t: float, result: Interference, words: str = "") -> str:
    """``  12.0s interference  A r 1.42  B r 1.05  sharing pays: STP 1.66; fcn runs 1.42× slower, …``; while the
    window cannot hold a verdict, ``   3.0s interference  measuring… (4 s left)`` (no r)."""
    if result.measuring:
        return f"{t:7.1f}s interference  {result.text}"
    ratios = "  ".join(
        f"{slot} r {DASH if math.isnan(r) else f'{r:.2f}'}" for slot, r in result.slowdown.items()
    )
    line = f"{t:7.1f}s interference  {ratios}  {result.text}".rstrip()
    return f"{line}; {words}" if words and result.text else f"{line}  {words}".rstrip()


def interference_json(
    t: float, result: Interference, words: str = "", causes: dict | None = None
) -> str:
    return json.dumps(
        {
            "t": round(t, 3),
            "shared_rate": {slot: json_number(s) for slot, s in result.shared.items()},
            "slowdown": {slot: json_number(r) for slot, r in result.slowdown.items()},
            "stp": json_number(result.stp),
            "verdict": result.verdict,
            "measuring": result.measuring,
            "left_s": json_number(result.left_s),
            "text": result.text,
            "words": words,
            "cause": {slot: why.to_dict() for slot, why in (causes or {}).items()},
        }
    )


class StatusPrinter:
    """The lines printed once a second while jobs run: each job's status, and the interference line with each job's
    cause against the ``--baseline`` runs."""

    def __init__(self, session: Session, plan: RunPlan, as_json: bool, out: TextIO) -> None:
        self.session = session
        self.as_json = as_json
        self.out = out
        self.exclusive = {slot: baseline_rate(slot, path) for slot, path in plan.baselines}
        self.causes = LiveCauses(
            {slot: load_baseline(slot, path, self.exclusive[slot]) for slot, path in plan.baselines}
        )
        self.gpu: GpuInfo | None = None  # the jobs' GPU, once NVML answers (for the causes)
        self.known = LiveKnownUse(
            BESIDE_SLOT
        )  # an attached job without a probe: what is known of it
        self.no_steps: set[str] = (
            set()
        )  # jobs said to take no step the probe sees (NO_STEPS notices)
        self.spec_width = spec_width([r.spec for r in plan.jobs])

    def print_status(self) -> None:
        """One line per running job, and the interference line while two run (from the session's live figures)."""
        live = self.session.live.now(self.session.clock.now())
        now = live.t
        workloads = self.session.launcher.snapshot()
        for slot in live.running:
            workload = workloads.get(slot) if is_slot(slot) else None
            if workload is None:
                continue
            figures = live.figures[slot]
            if not workload.owned and workload.probe is None:
                other = next((short_name(w.request) for p, w in workloads.items() if p != slot), "")
                known = self.known.known()
                line = (
                    blind_json(now, workload.request.spec, figures, known, other)
                    if self.as_json
                    else blind_line(
                        now, workload.request.spec, figures, known, other, self.spec_width
                    )
                )
                emit(line, self.out)
                continue
            waiting = NO_STEPS if slot in self.no_steps else "starting"
            state = waiting if not figures.steps else "warm-up" if figures.warmup else "running"
            meta = self.session.workload_meta.get(slot, {})
            if self.as_json:
                emit(status_json(now, workload.request.spec, state, figures, meta), self.out)
            else:
                copy_word = "memcpy" if str(meta.get("device") or "") == "cpu" else "copy"
                emit(
                    status_line(
                        now, workload.request.spec, state, figures, copy_word, self.spec_width, meta
                    ),
                    self.out,
                )
        if len(live.running) > 1:
            self.print_interference(live, [s for s in live.running if s in workloads], workloads)

    def print_interference(
        self, live: LiveNow, slots: list[Slot], workloads: dict[Slot, Workload]
    ) -> None:
        """Slowdown, STP and each job's cause against the ``--baseline`` runs over the overlap window so far (a job
        without one: against its exclusive phase so far, as the TUI's line, e.g. the watched job of ``--beside``)."""
        if self.exclusive and live.overlap is not None:
            now = live.t
            result = interference({**live.exclusive, **self.exclusive}, live.overlap)
            figures: dict[str, LiveFigures] = {
                p: live.figures[p] for p in slots if p in live.figures
            }
            causes = (
                self.causes.causes(result.shared, figures, self.gpu) if not result.measuring else {}
            )
            requests = {p: workloads[p].request for p in slots}
            words = cause_words(
                {p: short_name(r) for p, r in requests.items()}, result.slowdown, causes
            )
            if self.as_json:
                emit(interference_json(now, result, words, causes), self.out)
            else:
                emit(interference_line(now, result, words), self.out)


def emit(text: str, stream: TextIO) -> None:
    """Print a line (its control characters escaped: specs, notices and job output are outside text); a terminal
    that is gone (SSH drop, closed pipe) must not stop the run."""
    try:
        print(printable(text), file=stream, flush=True)
    except (OSError, ValueError):
        pass


class HeadlessRun:
    """Runs a plan to completion on the main thread; signals stop it cleanly."""

    def __init__(
        self,
        plan: RunPlan,
        as_json: bool,
        out: TextIO = sys.stdout,
        err: TextIO = sys.stderr,
        detached: bool = False,
    ) -> None:
        """``detached``: this is a detached runner, whose output moves to the run's runner.log once it captures."""
        self.plan = plan
        self.as_json = as_json
        self.detached = detached
        self.out = out
        self.err = err
        # the interference line needs --baseline runs: without them, no overlap rates are kept
        self.session = Session(
            replace(plan.session, listen_s=LISTEN_S, live_overlap=bool(plan.baselines))
        )
        self.sequence = plan.sequence(self.session)
        self.events: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.wake = threading.Event()
        self.signal_received: int | None = None
        self._shutdown_lock = threading.Lock()
        self._final: tuple[Path | None] | None = None
        self.status = StatusPrinter(self.session, plan, as_json, out)
        self.duration_ended = False  # the run was stopped at the end of --duration (its jobs: "stopped at --duration")

    def _on_event(self, item: object) -> None:
        """Bus subscriber of ``EVENTS``: queued for the main thread, which prints them."""
        self.events.put(item)
        if isinstance(item, Notice) or (
            isinstance(item, WorkloadState) and item.state in ENDED_STATES
        ):
            self.wake.set()

    def _on_signal(self, signum: int) -> None:
        self.signal_received = signum
        self.wake.set()

    def _shutdown(self) -> Path | None:
        """Stop the workloads and finish the capture, once (the main thread or the stop guard's)."""
        with self._shutdown_lock:
            if self._final is None:
                self._final = (self.session.shutdown(),)
            return self._final[0]

    def _finish(self) -> int:
        self._shutdown()
        return self._exit_code()

    def run(self) -> int:
        guard = StopGuard(self._on_signal, self._finish).install()
        try:
            return self._run()
        finally:
            guard.done()
            guard.restore()

    def _run(self) -> int:
        self.session.bus.subscribe(self._on_event, *EVENTS)
        if self.status.causes.baselines:  # causes are only said against --baseline runs
            self.session.bus.subscribe(self.status.causes.handle, *LiveCauses.TAKES)
        self.session.bus.subscribe(self.status.known.handle, *LiveKnownUse.TAKES)
        path = None
        try:
            self.session.start()
            self.session.set_exclusive_rates(self.status.exclusive)
            if self.session.metrics is not None:
                self._say(f"gpumon: metrics at {self.session.metrics.url}")
            if self.session.nvml is not None and self.session.nvml_status.available:
                self.status.gpu = GpuInfo.of_device(self.session.nvml.device_info())
            path = self.session.start_capture(
                self.plan.label, list(self.plan.jobs), self.plan.baselines, self.plan.label_given
            )
            if self.detached:
                move_output_to_log(path)
            self._say(f"{CAPTURING}{path}")
            self._run_workloads()
        finally:
            final = self._shutdown()
            self._print_events()
        failure = self._failure_line()
        if failure:
            self._say(failure)
        error = self.session.capture_error
        if final is not None and (error is None or error.finalised):
            self._say(
                f"gpumon: run saved to {final}" + (" (truncated)" if error is not None else "")
            )
            if self.as_json:
                emit(json.dumps({"run": str(final), "status": self._exit_code()}), self.out)
        return self._exit_code()

    def _run_workloads(self) -> None:
        """Drive the plan's run sequence (``RunSequence``: what starts when, or why not) and print a status line a
        second until the jobs gpumon launched have ended (with none, the attached one), a signal, or --duration."""
        clock = self.session.clock
        sequence = self.sequence
        self._advance()
        next_status = clock.now() + STATUS_PERIOD_S
        while not sequence.over and (sequence.pending or self._any_running()):
            due = sequence.wake_at()
            self._wait_until(next_status if due is None else min(next_status, due))
            self._print_events()
            self._advance()
            if clock.now() >= next_status and not sequence.over:
                self.status.print_status()
                next_status = clock.now() + STATUS_PERIOD_S

    def _advance(self) -> None:
        """Let the run sequence start what is due (on this, the main thread) and say what it did."""
        stopping = (
            f"stopped by {signal.Signals(self.signal_received).name}"
            if self.signal_received
            else None
        )
        for event in self.sequence.advance(stopping):
            if (
                isinstance(event, Started)
                and event.slot == BESIDE_SLOT
                and self.plan.beside is not None
            ):
                attached = event.workload
                how = (
                    "reading its probe"
                    if attached.probe is not None
                    else "no probe: its rate is unknown"
                )
                self._say(
                    f"gpumon: watching pid {attached.pid} as {BESIDE_SLOT} ({how}); gpumon never signals it"
                )
            elif isinstance(event, NotStarted):
                self._say(
                    f"gpumon: workload {event.slot} not started ({one_line(event.request.spec)}): {event.reason}"
                )
            elif isinstance(event, LaunchFailed):
                self._say(
                    f"gpumon: workload {event.slot} ({one_line(event.request.spec)}) could not start: {event.error}"
                )
            elif isinstance(event, TimeUp):
                self.duration_ended = True

    def _any_running(self) -> bool:
        """A job gpumon launched still runs (an attached one keeps the run going only when none was launched)."""
        workloads = self.session.launcher.snapshot().values()
        owned = [w for w in workloads if w.owned]
        return any(w.running for w in (owned or workloads))

    def _wait_until(self, t: float) -> None:
        """Wait until run time ``t`` or until something happened (a job ended, a notice, a signal)."""
        remaining = t - self.session.clock.now()
        if remaining > 0 and self.signal_received is None and self.wake.wait(remaining):
            self.wake.clear()

    def _failure_line(self) -> str:
        """One line saying which job failed and how (and what did not start), or "" when none did."""
        failed = self.session.launcher.failed()
        parts = [
            f"workload {w.slot} ({one_line(w.request.spec)}) {w.ending()} at {w.stop_t or 0:.1f} s"
            for w in failed
        ]
        parts += [
            f"workload {slot} could not start: {error}"
            for slot, error in sorted(self.sequence.failed_starts.items())
            if slot not in {w.slot for w in failed}
        ]  # an attach that raised: no workload records it
        if not parts:
            return ""
        parts += [f"workload {slot} not started" for slot in sorted(self.sequence.not_started)]
        return "gpumon: run failed: " + "; ".join(parts)

    def _print_events(self) -> None:
        while True:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, WorkloadState) and item.state == JobState.FAILED:
                continue  # it could not be started: the run sequence's LaunchFailed said so, with the reason
            if isinstance(item, WorkloadState) and item.state in ENDED_STATES:
                self._say(f"gpumon: workload {item.slot} {self._ended_words(item)}")
                workloads = self.session.launcher.snapshot()
                if len(workloads) > 1:  # the overlap's final figures
                    self.status.print_interference(
                        self.session.live.now(item.t), list(workloads), workloads
                    )
                if (
                    item.exit_status not in (0, None)
                    and item.state == JobState.EXITED
                    and item.tail
                ):
                    last = [line for line in item.tail.splitlines() if line.strip()][-3:]
                    for line in last:
                        self._say(f"gpumon:   {item.slot}| {line}")
            elif isinstance(item, Notice):
                if item.kind == NO_STEPS and item.slot:
                    self.status.no_steps.add(item.slot)
                elif item.kind == NO_STEPS_WITHDRAWN:
                    self.status.no_steps.discard(item.slot or "")
                who = f" {item.slot}" if item.slot else ""
                self._say(f"gpumon:{who} {item.text}")
            elif isinstance(item, SourceStatus) and not item.available:
                self._say(f"gpumon: NVML {item.reason}")

    def _ended_words(self, state: WorkloadState) -> str:
        """How a job ended; an attached process was never ours to stop, and its status is not ours to know."""
        workload = self.session.launcher.get(state.slot) if is_slot(state.slot) else None
        if state.state == JobState.STOPPED and (
            workload is None or workload.owned
        ):  # gpumon stopped it: its status is ours
            if self.signal_received is not None:
                return f"stopped ({signal.Signals(self.signal_received).name} to gpumon)"
            return (
                f"stopped at --duration {self.plan.duration_s:g} s"
                if self.duration_ended
                else "stopped"
            )
        if workload is None or workload.owned:
            return f"{state.state} with status {state.exit_status}"
        if state.state == JobState.DETACHED:
            return f"detached: pid {state.pid} still running (gpumon never signals it)"
        return f"(pid {state.pid}) exited by itself (status unknown: gpumon did not start it)"

    def _say(self, text: str) -> None:
        emit(text, self.err)

    def _exit_code(self) -> int:
        return exit_code(self.session, self.signal_received, bool(self.sequence.failed_starts))


def run_headless(plan: RunPlan, as_json: bool, detached: bool = False) -> int:
    if not plan.jobs:
        raise UsageError("--headless needs at least one workload (e.g. gpumon run fcn --headless)")
    return HeadlessRun(plan, as_json, detached=detached).run()
