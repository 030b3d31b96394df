"""The monitor's state, fed by the bus: live figures, time-binned histories, logs, exclusive rates.

``LiveModel.handle`` is a bus subscriber (quick, any thread); ``view(now)`` builds
the immutable snapshot one refresh draws, on the refresh thread. No Textual here.
"""

from __future__ import annotations

import getpass
import threading

from gpumon.core.interference.live import LiveNow, LiveStats
from gpumon.core.interference.live_cause import Baseline, LiveCauses
from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import (
    DeviceSample,
    GpuOthers,
    GpuOverview,
    HostSample,
    LogLine,
    Notice,
    ProcessSample,
    RingBuffer,
    SourceStatus,
    StepBatch,
    WorkloadMeta,
    WorkloadState,
)
from gpumon.core.records.rates import Interference, interference
from gpumon.tui.devices import OTHERS_STALE_S, Devices, link_bps
from gpumon.tui.slots import Slots
from gpumon.tui.view import View, WorkloadView

__all__ = ["LiveModel", "OTHERS_STALE_S", "current_user", "link_bps"]

BIN_S = 1.0
HISTORY_BINS = 240
LOG_LINES = 200
NOTICES = 20


def current_user() -> str | None:
    """Who runs gpumon (and so its jobs); None when the UID has no name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


class Notices:
    """The latest notices, and how many there were in all."""

    def __init__(self, keep: int = NOTICES) -> None:
        self.latest: RingBuffer[Notice] = RingBuffer(keep)
        self.total = 0

    def add(self, notice: Notice) -> None:
        self.latest.append(notice)
        self.total += 1

    def lines(self) -> tuple[str, ...]:
        """The kept notices as the panel shows them: each led by its slot, if it has one."""
        return tuple(
            n.text if not n.slot else f"{n.slot}: {n.text}" for n in self.latest.snapshot()
        )


class LiveModel:
    """Everything the monitor needs from the bus; ``wake`` is set on every item it takes.

    It composes the per-slot state (``slots``), the GPU and host side (``devices``), the notices and the live
    interference line (``live``, ``causes``)."""

    # what ``handle`` takes (Bus.subscribe): not the LiveNow records a refresh's own view() publishes, which would
    # wake the refresh thread again for nothing
    TAKES = (
        StepBatch,
        DeviceSample,
        HostSample,
        ProcessSample,
        LogLine,
        WorkloadState,
        WorkloadMeta,
        SourceStatus,
        Notice,
        GpuOthers,
        GpuOverview,
    )

    def __init__(
        self,
        bin_s: float = BIN_S,
        history: int = HISTORY_BINS,
        log_lines: int = LOG_LINES,
        jobs_user: str | None = None,
        live: LiveStats | None = None,
    ) -> None:
        """``jobs_user``: whose our jobs are in the process table (None: not known, as in a replay). ``live``: the live
        computation of the bus this model is fed from (a session's, ``Session.live``); None: the model's feed has no
        other (a replay, a followed run), so the model keeps that bus's one and feeds it itself."""
        self.history = history
        self._feeds_live = live is None
        self.live = live if live is not None else LiveStats()
        self.wake = threading.Event()
        self.causes = LiveCauses({})
        self.predicted = (
            ""  # gpumon predict's answer from the two --baseline runs, shown beside the measured
        )
        self.slots = Slots(bin_s, history, log_lines)
        self.devices = Devices(bin_s, history, jobs_user)
        self.notices = Notices()

    # the GPU side's state, read and set by the front ends and tests
    @property
    def gpu(self) -> GpuInfo | None:
        return self.devices.gpu

    @gpu.setter
    def gpu(self, gpu: GpuInfo | None) -> None:
        self.devices.gpu = gpu

    @property
    def shown_gpu(self) -> int | None:
        return self.devices.shown_gpu

    @shown_gpu.setter
    def shown_gpu(self, index: int | None) -> None:
        self.devices.shown_gpu = index

    @property
    def device(self) -> DeviceSample | None:
        return self.devices.device

    @property
    def overview(self) -> GpuOverview | None:
        return self.devices.overview

    @property
    def baselines(self) -> dict[str, tuple[float, str]]:
        return self.slots.baselines

    def set_spec(self, slot: str, spec: str) -> None:
        """Name what is (about to be) running in ``slot``."""
        self.slots.set_spec(slot, spec)

    def set_baseline(
        self, slot: str, rate: float, source: str, evidence: Baseline | None = None
    ) -> None:
        """An exclusive rate from elsewhere (a ``--baseline`` run); it wins over the exclusive phase.

        ``evidence``: what that run recorded of the job alone, for the cause of its slowdown.
        """
        self.slots.baselines[slot] = (rate, source)
        if evidence is not None:
            self.causes.set_baseline(slot, evidence)
        self.wake.set()

    def next_gpu(self) -> int | None:
        """Show the next GPU of the box in the device panel (after the last, the first); its index, None with one GPU."""
        shown = self.devices.next_gpu()
        if shown is not None:
            self.wake.set()
        return shown

    # -- bus side -------------------------------------------------------------

    def handle(self, item: object) -> None:
        """Bus subscriber: file the item, then wake the refresh thread.

        Steps, the item that comes most often, go straight to their slot: nothing else files them.
        """
        if self._feeds_live:
            self.live.handle(item)
        if type(item) is StepBatch:
            self.slots.file_steps(item)
        else:
            self.causes.handle(item)
            self.slots.handle(item)
            self.devices.handle(item)
            if isinstance(item, Notice):
                self.notices.add(item)
        if not self.wake.is_set():  # setting a set Event still takes its lock
            self.wake.set()

    # -- refresh side ---------------------------------------------------------

    def view(self, now: float, width: int = HISTORY_BINS) -> View:
        """The snapshot one refresh draws; ``width`` bins of history per graph."""
        n = min(width, self.history)
        live = self.live.now(now)
        workloads = self.slots.view(now, n, live)
        result = self._interference(live, workloads)
        figures = {w.slot: w.figures for w in workloads if w.figures is not None}
        causes = (
            self.causes.causes(result.shared, figures, self.gpu)
            if result is not None and not result.measuring
            else {}
        )
        return View(
            t=now,
            workloads=workloads,
            interference=result,
            causes=causes,
            predicted=self.predicted,
            notices=self.notices.lines(),
            notice_total=self.notices.total,
            jobs_device=next((w.device for w in workloads if w.device), ""),
            **self.devices.view(now, n, workloads),
        )

    @staticmethod
    def _interference(live: LiveNow, workloads: tuple[WorkloadView, ...]) -> Interference | None:
        """The interference line: while two jobs run; or, none any more, after they ran together: the run's
        result (a replay's end)."""
        exclusive = {w.slot: w.exclusive_rate for w in workloads}
        ended_together = not live.running and live.overlap is not None and live.overlap.duration > 0
        overlap = live.overlap if len(live.running) > 1 or ended_together else None
        return interference(exclusive, overlap) if overlap is not None else None
