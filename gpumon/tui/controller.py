"""The app's link to a live Session: launches, stops, capture, export, baselines (no Textual here).

Blocking calls (``start``, ``stop``, capture, ``export``, ``shutdown``) belong on
worker threads; ``launch`` belongs on the main thread, because Linux delivers
PDEATHSIG when the thread that forked a child exits.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from gpumon.core.jobs.beside import SLOT as BESIDE_SLOT
from gpumon.core.jobs.launcher import LaunchRequest, Workload
from gpumon.core.capture.outcome import exit_code
from gpumon.core.capture.probescan import ProbeScanner
from gpumon.frontends.plan import RunPlan, beside_request, short_name
from gpumon.core.interference.live_cause import load_baseline
from gpumon.core.capture.sequence import Event, Started
from gpumon.core.capture.session import Session
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.slots import Slot
from gpumon.core.store.runstore import export_dir
from gpumon.core.store.trace import Run, baseline_rate, export, load_run
from gpumon.errors import EnvironmentFailure, UsageError
from gpumon.tui.model import LiveModel, current_user


def export_csv(run: Run, root: Path | None = None) -> tuple[Path, list[Path]]:
    """Write ``run`` (as written so far) as plain CSV into ``<root or cwd>/<run>-csv``; that directory and the files.

    The folder is this run's own: exporting again replaces what an earlier press wrote with the run as it is now."""
    out = export_dir(run.path, "csv", root)
    return out, export(run, out, "csv", overwrite=True)


def load_baselines(
    model: LiveModel, baselines: tuple[tuple[str, str], ...], share: str
) -> dict[str, float]:
    """Give ``model`` the ``--baseline`` runs (slot, run directory): each exclusive rate and its evidence, and, with
    both, gpumon predict's answer for ``share`` beside the measured; returns the rates (blocking: reads the runs)."""
    rates = {}
    for slot, path in baselines:
        rates[slot] = rate = baseline_rate(slot, path)
        model.set_baseline(
            slot, rate, f"baseline {Path(path).name}", load_baseline(slot, path, rate)
        )
    if len(baselines) > 1:
        # deferred: +0.11 s CPU (numpy) on the monitor's first frame
        from gpumon.analysis.predict import live_line

        model.predicted = live_line(baselines, share)
    return rates


# The monitor's listener reads the probes just before each frame is built (``Controller.gather``) and, between,
# at least this often (s; sooner where a pipe would fill): each step is on the screen with the next frame, and the
# listener wakes once a frame (1 s), not 2-10 times a second; a period of its own as long as a frame would add a
# read between frames half the time (observer_cost, docs/tui.md)
SCREEN_LISTEN_S = 2.0
# How long a frame waits for that read (s): a listener slower than this is not waited for (the frame shows what the
# bus has; the steps come with the next one)
GATHER_WAIT_S = 0.2


class Controller:
    """Owns the session, the model fed by its bus, and the capture state."""

    def __init__(
        self, plan: RunPlan, session: Session | None = None, export_root: Path | None = None
    ) -> None:
        self.plan = plan
        self.export_root = export_root
        # the monitor shows every GPU of the box (overview lines); a headless run does not read them
        self.session = session or Session(
            dataclasses.replace(plan.session, gpu_overview=True, listen_s=SCREEN_LISTEN_S)
        )
        self.model = LiveModel(jobs_user=current_user(), live=self.session.live)
        # what the plan starts, when, or why not (the app advances it on its main thread)
        self.sequence = plan.sequence(self.session)
        self.session.bus.subscribe(self.model.handle, *LiveModel.TAKES)
        self.probes = ProbeScanner(
            self.session.clock
        )  # this user's probed processes gpumon did not start
        self.last_capture: Path | None = None
        self._lock = threading.Lock()
        self._started = False
        self._shut_down = False
        self._shutdown_done = threading.Event()
        self._final: Path | None = None

    def gather(self) -> bool:
        """Read the jobs' probes now, waiting at most ``GATHER_WAIT_S`` (the refresh thread, before each frame)."""
        return self.session.listener.read_now(GATHER_WAIT_S)

    @property
    def clock_now(self) -> float:
        return self.session.clock.now()

    @property
    def capture_path(self) -> Path | None:
        """The run directory being written now (None when not capturing or the capture failed)."""
        recorder = self.session.recorder
        return recorder.path if recorder is not None and self.session.capturing else None

    @property
    def shutting_down(self) -> bool:
        return self._shut_down

    def start(self) -> Path | None:
        """Open the sources, read the baselines, and capture when the plan has workloads (blocking)."""
        with self._lock:
            if self._started or self._shut_down:
                return None
            self._started = True
            self.session.start()
            self.probes.start()
            nvml = self.session.nvml
            if nvml is not None and self.session.nvml_status.available:
                self.model.gpu = GpuInfo.of_device(nvml.device_info())
            rates = load_baselines(self.model, self.plan.baselines, self.session.config.share.kind)
            self.session.set_exclusive_rates(rates)
            if self.plan.jobs:
                return self.session.start_capture(
                    self.plan.label,
                    list(self.plan.jobs),
                    self.plan.baselines,
                    self.plan.label_given,
                )
            return None

    def launch(self, *, slot: Slot, request: LaunchRequest) -> Workload:
        """Start ``request`` in ``slot`` (call on the main thread)."""
        self.model.set_spec(slot, request.spec)
        return self.session.launch(slot=slot, request=request)

    def attach(self, pid: int) -> Workload:
        """Watch a running process of this user as job B (never signalled), capturing from before it is attached so
        that its probe's history is recorded too (blocking: the rendezvous connection)."""
        request = beside_request(str(pid))
        if self.running(BESIDE_SLOT) is not None:
            raise UsageError(f"slot {BESIDE_SLOT} is busy; {BESIDE_SLOT} (shift) stops it first")
        with self._lock:
            if self._shut_down:
                raise EnvironmentFailure("shutting down: nothing can be attached now")
            if not self.session.capturing:
                self.session.start_capture(short_name(request), [request], label_given=False)
        self.model.set_spec(BESIDE_SLOT, request.spec)
        return self.session.attach(slot=BESIDE_SLOT, request=request)

    def stop(self, slot: Slot) -> None:
        """Stop the workload in ``slot`` (blocking up to the launcher's timeout)."""
        self.session.stop(slot)

    def running(self, slot: Slot) -> Workload | None:
        workload = self.session.launcher.get(slot)
        return workload if workload is not None and workload.running else None

    def capture_label(self) -> str:
        if self.plan.requests:
            return self.plan.label
        names = [
            short_name(w.request) for _, w in self.session.launcher.snapshot().items() if w.running
        ]
        return "-".join(names) or "idle"

    def toggle_capture(self) -> tuple[bool, Path | None]:
        """Start a capture, or finish the current one; returns (capturing now, run directory).

        Refused (EnvironmentFailure) once shutdown has begun: shutdown finishes the capture, and
        nothing may open a new one that would stay "recording" forever.
        """
        with self._lock:
            if self._shut_down:
                raise EnvironmentFailure(
                    "shutting down: the capture is being finished, no capture can start now"
                )
            if self.session.capturing:
                path = self.session.stop_capture()
                self.last_capture = path
                return False, path
            given = bool(self.plan.requests) and self.plan.label_given
            return True, self.session.start_capture(self.capture_label(), label_given=given)

    def export_csv(self) -> tuple[Path, list[Path]]:
        """Write the current (else the last) capture as plain CSV into ``<export root or cwd>/<run>-csv``."""
        path = self.capture_path or self.last_capture
        if path is None:
            raise UsageError("nothing captured yet (press c to start a capture)")
        return export_csv(load_run(path), self.export_root)

    def shutdown(self) -> Path | None:
        """Stop every workload and finish the capture; safe to call twice, and from two threads (blocking)."""
        with self._lock:
            first = not self._shut_down
            self._shut_down = True
        if not first:
            self._shutdown_done.wait()
            return self._final
        try:
            self.probes.stop()
            self._final = self.session.shutdown() if self._started else None
        finally:
            self._shutdown_done.set()
        if self._final is not None:
            self.last_capture = self._final
        return self._final

    def advance(self, stopping: str | None = None) -> list[Event]:
        """Start what the plan has due now (call on the main thread), and name each job started in the model."""
        events = self.sequence.advance(stopping)
        for event in events:
            if isinstance(event, Started):
                self.model.set_spec(event.slot, event.workload.request.spec)
        return events

    def exit_code(self) -> int:
        """1 when a workload failed on its own (or could not be started) or the capture failed, else 0 (as ``gpumon
        run --headless``)."""
        return exit_code(self.session, start_failed=bool(self.sequence.failed_starts))
