"""A monitoring session: bus, sources, listener, launcher and (optional) capture, for any front end."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

import gpumon
from gpumon.core.probing import rendezvous
from gpumon.core.jobs.beside import SLOT as BESIDE_SLOT
from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.jobs.launcher import LaunchRequest, Launcher, Workload
from gpumon.core.probing.listener import GATHER_S, Listener
from gpumon.core.capture.metrics import MetricsServer
from gpumon.core.capture.nosteps import NoStepsWatch
from gpumon.core.capture.stagger import StaggerWatch
from gpumon.core.interference.live import LiveStats
from gpumon.core.records.machine import GpuInfo, HostInfo
from gpumon.core.records.model import Notice, SourceStatus, WorkloadMeta
from gpumon.core.jobs.mps import MpsControl
from gpumon.core.records.share import ShareMode
from gpumon.core.records.slots import SLOTS, Slot
from gpumon.core.store.recorder import (
    FLUSH_INTERVAL_S,
    CaptureError,
    Recorder,
    create_run_dir,
    initial_meta,
)
from gpumon.core.store.runmeta import RunMeta, WorkloadRecord
from gpumon.core.store.runner import RunnerInfo
from gpumon.core.capture.sampler import Sampler, auto_interval_ms
from gpumon.core.sources.host import HostSource
from gpumon.core.sources.nvml import NvmlSource
from gpumon.core.store.runsfolder import default_runs_dir
from gpumon.errors import EnvironmentFailure, GpumonError, UsageError


@dataclass(frozen=True)
class SessionConfig:
    device: str = "auto"
    interval_ms: int | None = None  # None: chosen when NVML opens (sampler.auto_interval_ms)
    gpu_index: int | str | None = None  # an NVML index or a GPU-/MIG- UUID
    runs_dir: Path = field(default_factory=default_runs_dir)
    warmup: int | None = None
    stagger_s: float = 0.0
    nvml: bool = True
    share: ShareMode = field(default_factory=ShareMode)
    metrics: tuple[str, int] | None = None
    python: str | None = (
        None  # interpreter of the built-in workloads; None: $GPUMON_PYTHON, else ours
    )
    on_capture_error: str = "stop"
    detached: bool = (
        False  # this process is a detached runner (gpumon run --detach): run.json's runner says so
    )
    gpu_overview: bool = (
        False  # sample every GPU of the box for the overview lines (the TUI's; not recorded)
    )
    # How often the listener reads the jobs' probes: a screen's step-to-screen latency (GATHER_S); a front end
    # that only records and prints a line a second reads less often, for less CPU (steps carry their own times).
    listen_s: float = GATHER_S
    # Keep each job's rate over the overlap (the live slowdown's shared rate); a front end with nothing to compare
    # it with (a headless run without --baseline) spares that work at every step.
    live_overlap: bool = True


def planned_slots(requests: list[LaunchRequest]) -> list[tuple[Slot, LaunchRequest]]:
    """The slot of each planned job: an attached process (``--beside``) is B, the launched ones take A, then B."""
    free = [slot for slot in SLOTS if slot != BESIDE_SLOT or not any(r.beside for r in requests)]
    return sorted(
        ((BESIDE_SLOT if r.beside else free.pop(0), r) for r in requests), key=lambda pair: pair[0]
    )


def default_threads() -> int:
    """CPU threads per workload: half the cores, alone or shared, so exclusive and shared runs compare."""
    return max(1, (os.cpu_count() or 1) // len(SLOTS))


class Session:
    """Everything a front end needs: start, launch into slots, capture, shut down."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.bus = Bus()
        self.clock = RunClock.start()
        # A listener that reads no more often than the recorder writes has the capture written right after each read:
        # what a viewer follows in the files is then no older than the listener's period (not twice that).
        gathered = self._write_capture_soon if config.listen_s >= FLUSH_INTERVAL_S else None
        self.listener = Listener(self.bus, self.clock, config.listen_s, gathered)
        self.launcher = Launcher(self.bus, self.clock, self.listener, config.warmup)
        # the one live computation of this session's jobs: the TUI, the headless lines and Prometheus all read it
        self.live = LiveStats(shared=config.live_overlap, bus=self.bus)
        self.host = HostSource()
        self.nvml = NvmlSource(config.gpu_index) if config.nvml else None
        self.nvml_status = SourceStatus("nvml", False, "unavailable: disabled (--no-nvml)")
        self.sampler: Sampler | None = None
        # the sampling interval: --interval's, else chosen at start() from what NVML can read
        self.interval_ms: int | None = config.interval_ms
        self.mps: MpsControl | None = None
        # bound here, on the caller's thread, so a taken port is one clear error before anything starts
        self.metrics = (
            MetricsServer(*config.metrics, self.bus, self.clock.now, self.live)
            if config.metrics
            else None
        )
        self.recorder: Recorder | None = None
        self._unsubscribe_recorder: Callable[[], None] | None = None
        self.capture_error: CaptureError | None = None
        self.shutting_down = False
        self.workload_meta: dict[str, dict[str, Any]] = {}
        self.bus.subscribe(self._on_event, WorkloadMeta)
        self.bus.subscribe(NoStepsWatch(self.bus.publish).handle, *NoStepsWatch.TAKES)
        self.bus.subscribe(
            StaggerWatch(self.bus.publish, config.stagger_s).handle, *StaggerWatch.TAKES
        )

    def _write_capture_soon(self) -> None:
        recorder = self.recorder
        if recorder is not None:
            recorder.flush_soon()

    def _on_event(self, item: object) -> None:
        if isinstance(item, WorkloadMeta):
            self.workload_meta[item.slot] = item.info

    def start(self) -> None:
        if self.nvml is not None:
            self.nvml_status = self.nvml.open()
        if self.metrics is not None:
            self.metrics.metrics.labels = self._metric_labels()
        self.listener.start()
        self.bus.publish(self.nvml_status)
        nvml = self.nvml if self.nvml_status.available else None
        interval_ms = self.interval_ms = self.config.interval_ms or auto_interval_ms(nvml)
        self.sampler = Sampler(
            self.bus,
            self.clock,
            self.host,
            nvml,
            interval_ms / 1000,
            self.launcher.pids,
            expect_gpu_processes=self.config.device != "cpu",
            overview=self.config.gpu_overview,
        )
        self.sampler.start()

    def launch(self, *, slot: Slot, request: LaunchRequest) -> Workload:
        """Start ``request`` in ``slot`` (a job keeps its slot: no other slot is chosen)."""
        if self.shutting_down:
            raise EnvironmentFailure(f"not starting {slot}: gpumon is shutting down")
        if self.capture_error is not None and self.config.on_capture_error == "stop":
            raise EnvironmentFailure(f"not starting {slot}: {self.capture_error.line()}")
        if self.metrics is not None:
            self.metrics.metrics.name_job(slot, request.spec)
        new_capture_for_relaunch(self, slot)
        return self.launcher.start(
            slot=slot,
            request=request,
            default_threads=default_threads(),
            extra_env=self._share_env(slot),
        )

    def attach(self, *, slot: Slot, request: LaunchRequest) -> Workload:
        """Watch the running process of a ``--beside`` request in ``slot``, through its probe rendezvous
        when it has one; gpumon never signals it."""
        target = request.beside
        if target is None:
            raise ValueError("attach needs a --beside request")
        if self.shutting_down:
            raise EnvironmentFailure(f"not attaching {slot}: gpumon is shutting down")
        if not target.alive():
            raise UsageError(f"--beside {target.pid}: the process has exited")
        if self.metrics is not None:
            self.metrics.metrics.name_job(slot, request.spec)
        if self.sampler is not None:
            self.sampler.claim(target.pid)
        probe = rendezvous.connect(target.pid)
        unusable = rendezvous.problem() if probe is None else None
        if unusable:  # else the process simply runs no probe
            self.bus.publish(
                Notice(self.clock.now(), f"cannot read the probe of pid {target.pid}: {unusable}")
            )
        elif probe is None and target.wrapped:
            self.bus.publish(
                Notice(
                    self.clock.now(),
                    f"pid {target.pid} runs under gpumon wrap, but its probe opens "
                    "at its first training step and it has taken none yet: its rate stays unknown in "
                    "this run (watch it again once it trains)",
                )
            )
        return self.launcher.attach(slot=slot, request=request, probe=probe)

    def _share_env(self, slot: Slot) -> dict[str, str]:
        """The MPS client environment for ``slot`` (gpumon's daemon starts with the first job)."""
        if not self.config.share.mps:
            return {}
        mps = self.mps if self.mps is not None else self._start_mps(None)
        return mps.client_env(SLOTS.index(slot))

    def _start_mps(self, home: Path | None) -> MpsControl:
        mps = MpsControl(self.config.share)
        mps.start(home)
        self.mps = mps
        return mps

    def set_exclusive_rates(self, rates: dict[str, float]) -> None:
        """Exclusive rates (from --baseline runs) for the live slowdown, STP and verdict metrics."""
        if self.metrics is not None:
            self.metrics.metrics.exclusive.update(rates)

    def _metric_labels(self) -> dict[str, str]:
        """dcgm-exporter's label names and values for this GPU (empty where there is none)."""
        info = (
            self.nvml.device_info() if self.nvml is not None and self.nvml_status.available else {}
        )
        index = info.get("index")
        return {
            "gpu": "" if index is None else str(index),
            "UUID": info.get("uuid") or "",
            "device": "" if index is None else f"nvidia{index}",
            "modelName": info.get("name") or "",
            "Hostname": socket.gethostname(),
        }

    def stop(self, slot: Slot) -> None:
        self.launcher.stop(slot)

    @property
    def capturing(self) -> bool:
        """A capture is open and still writing (a failed one is not capturing)."""
        return self.recorder is not None and not self.recorder.failed

    def start_capture(
        self,
        label: str,
        planned_workloads: list[LaunchRequest] | None = None,
        baselines: tuple[tuple[str, str], ...] = (),
        label_given: bool = True,
    ) -> Path:
        """Open a new run directory and record everything published from now on.

        ``baselines``: the ``--baseline`` runs (slot, run directory), kept in run.json so that a viewer
        attached later (``gpumon attach``) shows the same live slowdown. ``label_given``: False for a label made
        from the jobs' names (run.json says so: a name then picks a given label first).
        """
        if self.shutting_down:
            raise EnvironmentFailure("no new capture: gpumon is shutting down")
        if self.recorder is not None and not self.recorder.failed:
            return self.recorder.path
        self.stop_capture()
        runs = self._capture_jobs(planned_workloads)
        path = create_run_dir(self.config.runs_dir, label, time.localtime())
        meta = capture_meta(
            self, label, [self._workload_record(slot, r) for slot, r in runs], label_given
        )
        meta.baselines = dict(baselines)
        self.recorder = self._open_recorder(path, meta)
        self._unsubscribe_recorder = self.bus.subscribe(self.recorder.handle, *Recorder.TAKES)
        return path

    def _capture_jobs(
        self, planned: list[LaunchRequest] | None
    ) -> list[tuple[Slot, LaunchRequest]]:
        """The jobs a new capture records: the planned ones, else those running now."""
        if not planned:
            return [(slot, w.request) for slot, w in self.launcher.snapshot().items() if w.running]
        runs = planned_slots(planned)
        for _, request in runs:
            if request.beside is not None and self.sampler is not None:
                # job B from the capture's first tick, not "another"
                self.sampler.claim(request.beside.pid)
        return runs

    def _open_recorder(self, path: Path, meta: RunMeta) -> Recorder:
        """A recorder writing ``path`` (gpumon's MPS daemon started there when the run shares by MPS); when
        either cannot start, nothing was recorded and nothing is left behind."""
        try:
            recorder = Recorder(path, meta, on_error=self._on_capture_error)
        except EnvironmentFailure:  # it could not even start (a full disk)
            shutil.rmtree(path, ignore_errors=True)
            raise
        if self.config.share.mps and self.mps is None:
            try:
                self._start_mps(path)  # its pipe and log directories live in the run directory
            except GpumonError:  # the daemon would not start (or --share was refused)
                recorder.close(0.0)
                shutil.rmtree(path, ignore_errors=True)
                raise
        return recorder

    def _on_capture_error(self, error: CaptureError) -> None:
        """The recorder's first failed write: say so on the bus, and stop the workloads unless told not to."""
        if self.capture_error is None:
            self.capture_error = error
        now = self.clock.now()
        self.bus.publish(Notice(now, error.line()))
        if not error.finalised:
            self.bus.publish(
                Notice(now, f"could not finalise {error.path / 'run.json'}: {error.finalise_error}")
            )
        if self.config.on_capture_error == "stop":
            self.bus.publish(
                Notice(now, "stopping the workloads (--on-capture-error continue keeps them)")
            )
            threading.Thread(
                target=self.launcher.stop_all, name="gpumon-capture-stop", daemon=True
            ).start()

    def _workload_record(self, slot: Slot, request: LaunchRequest) -> WorkloadRecord:
        entry = WorkloadRecord(slot, spec=request.spec, kind=request.kind, argv=list(request.argv))
        running = self.launcher.get(slot)
        if request.beside is not None:
            entry.attach(request.beside.to_json())
        if running is not None and running.request == request:
            entry.pid, entry.start_t, entry.exit_status = (
                running.pid,
                running.start_t,
                running.exit_status,
            )
            if request.beside is not None:
                entry.probe = running.probe is not None
            if slot in self.workload_meta:
                entry.meta = self.workload_meta[slot]
        return entry

    def stop_capture(self) -> Path | None:
        """Finish the capture (everything queued is written) and return its directory."""
        if self.recorder is None:
            return None
        recorder, self.recorder = self.recorder, None
        if self._unsubscribe_recorder is not None:
            self._unsubscribe_recorder()
        return recorder.close(self.clock.now() - recorder.meta.capture_start_t)

    def shutdown(self) -> Path | None:
        """Stop every workload, wait for their last events, stop sampling, finish the capture."""
        self.shutting_down = True
        self.launcher.stop_all()
        if self.mps is not None:
            self.mps.stop()
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler.join(2.0)
        self.listener.stop()
        self.listener.join(2.0)
        path = self.stop_capture()
        if self.metrics is not None:
            self.metrics.close()
        if self.nvml is not None:
            self.nvml.close()
        return path


def capture_meta(
    session: "Session", label: str, workloads: list[WorkloadRecord], label_given: bool = True
) -> RunMeta:
    """The run.json a new capture of ``session`` starts with: the machine, the GPU, the sampling, the sharing,
    the runner and ``workloads`` (``label_given``: False for a label made from the jobs' names)."""
    config = session.config
    device = (
        session.nvml.device_info()
        if session.nvml is not None and session.nvml_status.available
        else None
    )
    meta = initial_meta(
        label_given=label_given,
        label=label,
        mode="shared" if len(workloads) > 1 else "exclusive",
        clock_t0_ns=session.clock.t0_ns,
        started_at=session.clock.started_at,
        interval_ms=session.interval_ms,
        device=config.device,
        stagger_s=config.stagger_s,
        host=host_info(),
        gpu=None if device is None else GpuInfo.of_device(device),
        nvml=session.nvml_status,
        versions=versions(None if device is None else device.get("driver")),
        workloads=workloads,
    )
    meta.capture_start_t = round(session.clock.now(), 6)
    meta.share = config.share
    meta.runner = RunnerInfo.current(config.detached)
    return meta


def host_info() -> HostInfo:
    """This machine, for run.json."""
    return HostInfo(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        cpus=os.cpu_count(),
        cpu_affinity=tuple(sorted(os.sched_getaffinity(0))),
        mem_total_mib=round(psutil.virtual_memory().total / 2**20),
    )


def versions(driver: str | None) -> dict[str, Any]:
    """The versions run.json keeps (torch's is the jobs' own: the monitor never imports it)."""
    return {
        "python": platform.python_version(),
        "gpumon": gpumon.__version__,
        "torch": None,
        "driver": driver,
    }


def new_capture_for_relaunch(session: "Session", slot: Slot) -> None:
    """A job launched into a slot that already held one in the open capture starts a new capture (same label):
    one run directory never holds two jobs in one slot, so ``runs``, ``compare`` and ``export`` never mix
    their steps (docs/architecture.md, "A relaunched slot is a new capture"). The capture closed here is final
    (``complete``, or ``failed`` when its job failed); the new one records the jobs still running and this one."""
    recorder, earlier = session.recorder, session.launcher.get(slot)
    if recorder is None or recorder.failed or earlier is None:
        return
    entry = recorder.meta.workload(slot)  # the capture began with it running
    began_in = earlier.start_t is not None and earlier.start_t >= recorder.meta.capture_start_t
    if not began_in and (entry is None or entry.pid is None):
        return  # its earlier job ended before this capture began: this is the capture's first in the slot
    label = recorder.meta.label or "run"
    path = session.stop_capture()
    session.bus.publish(
        Notice(
            session.clock.now(),
            f"a new job in slot {slot}: capture {path} finished, a new one starts",
            slot,
        )
    )
    session.start_capture(label)
