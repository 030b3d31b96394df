"""``gpumon run --headless``: no TUI; one status line per second per workload, for scripts and CI."""

from __future__ import annotations

import json
import queue
import sys
import threading
from pathlib import Path
from typing import TextIO

from gpumon.core.interference import Interference, baseline_rate, interference
from gpumon.core.live import LiveFigures, LiveStats
from gpumon.core.model import Notice, SourceStatus, WorkloadState
from gpumon.core.plan import RunPlan
from gpumon.core.session import Session
from gpumon.core.units import bytes_per_s, fmt_rate, json_number, pct
from gpumon.errors import UsageError
from gpumon.stopsignals import StopGuard

STATUS_PERIOD_S = 1.0


def status_line(t: float, spec: str, state: str, f: LiveFigures) -> str:
    copy = f"copy {bytes_per_s(f.copy_bandwidth)} ({bytes_per_s(f.copy_bytes_per_s)} wall)"
    return (
        f"{t:7.1f}s {f.process} {spec:<24.24} {state:<8} {fmt_rate(f.iter_per_s):>11} "
        f"{fmt_rate(f.samples_per_s, 'samples/s'):>17}  {copy}  cpu {pct(f.cpu_pct)}  steps {f.steps}"
    )


def status_json(t: float, spec: str, state: str, f: LiveFigures) -> str:
    return json.dumps(
        {
            "t": round(t, 3),
            "process": f.process,
            "spec": spec,
            "state": state,
            "steps": f.steps,
            "iter_per_s": json_number(f.iter_per_s),
            "samples_per_s": json_number(f.samples_per_s),
            "copy_bandwidth": json_number(f.copy_bandwidth),
            "copy_bytes_per_s": json_number(f.copy_bytes_per_s),
            "cpu_pct": json_number(f.cpu_pct),
            "warmup": f.warmup,
        }
    )


def interference_line(t: float, result: Interference) -> str:
    ratios = "  ".join(f"{slot} r {r:.2f}" for slot, r in result.slowdown.items())
    return f"{t:7.1f}s interference  {ratios}  {result.verdict}".rstrip()


def interference_json(t: float, result: Interference) -> str:
    return json.dumps(
        {
            "t": round(t, 3),
            "slowdown": {slot: json_number(r) for slot, r in result.slowdown.items()},
            "stp": json_number(result.stp),
            "verdict": result.verdict,
        }
    )


class HeadlessRun:
    """Runs a plan to completion on the main thread; signals stop it cleanly."""

    def __init__(self, plan: RunPlan, as_json: bool, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
        self.plan = plan
        self.as_json = as_json
        self.out = out
        self.err = err
        self.session = Session(plan.session)
        self.live = LiveStats()
        self.events: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.wake = threading.Event()
        self.signal_received: int | None = None
        self._shutdown_lock = threading.Lock()
        self._final: tuple[Path | None] | None = None
        self.exclusive = {slot: baseline_rate(slot, path) for slot, path in plan.baselines}

    def _on_event(self, item: object) -> None:
        if isinstance(item, (WorkloadState, Notice, SourceStatus)):
            self.events.put(item)
            if isinstance(item, WorkloadState) and item.state in ("exited", "stopped", "failed"):
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
        self.session.bus.subscribe(self.live.handle)
        self.session.bus.subscribe(self._on_event)
        path = None
        try:
            self.session.start()
            self.session.set_exclusive_rates(self.exclusive)
            if self.session.metrics is not None:
                self._say(f"gpumon: metrics at {self.session.metrics.url}")
            path = self.session.start_capture(self.plan.label, list(self.plan.requests))
            self._say(f"gpumon: capturing to {path}")
            self._run_workloads()
        finally:
            final = self._shutdown()
            self._print_events()
        if final is not None:
            self._say(f"gpumon: run saved to {final}")
            if self.as_json:
                self._emit(json.dumps({"run": str(final), "status": self._exit_code()}), self.out)
        return self._exit_code()

    def _run_workloads(self) -> None:
        clock = self.session.clock
        start = clock.now()
        for i, request in enumerate(self.plan.requests):
            if i and self.plan.stagger_s and not self._wait_until(start + self.plan.stagger_s * i):
                return
            self.session.launch(request)
        end = start + self.plan.duration_s if self.plan.duration_s else None
        while self.signal_received is None and self._any_running():
            next_status = clock.now() + STATUS_PERIOD_S
            if end is not None:
                next_status = min(next_status, end)
            self._wait_until(next_status)
            self._print_events()
            self._print_status()
            if end is not None and clock.now() >= end:
                return

    def _any_running(self) -> bool:
        return any(w.running for w in self.session.launcher.workloads.values())

    def _wait_until(self, t: float) -> bool:
        """Wait until run time ``t``, a signal or a workload exit; False if a signal came."""
        while self.signal_received is None:
            remaining = t - self.session.clock.now()
            if remaining <= 0:
                return True
            if self.wake.wait(remaining):
                self.wake.clear()
                self._print_events()
                if not self._any_running():
                    return True
        return False

    def _print_status(self) -> None:
        now = self.session.clock.now()
        for process, workload in sorted(self.session.launcher.workloads.items()):
            if not workload.running:
                continue
            figures = self.live.figures(process, now)
            state = "starting" if not figures.steps else "warm-up" if figures.warmup else "running"
            render = status_json if self.as_json else status_line
            self._emit(render(now, workload.request.spec, state, figures), self.out)
        running = [p for p, w in self.session.launcher.workloads.items() if w.running]
        if self.exclusive and len(running) > 1:
            shared = {p: self.live.figures(p, now).iter_per_s for p in running}
            result = interference(self.exclusive, shared)
            render_interference = interference_json if self.as_json else interference_line
            self._emit(render_interference(now, result), self.out)

    def _print_events(self) -> None:
        while True:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, WorkloadState) and item.state in ("exited", "stopped", "failed"):
                self._say(f"gpumon: workload {item.process} {item.state} with status {item.exit_status}")
                if item.exit_status not in (0, None) and item.state == "exited" and item.tail:
                    last = [line for line in item.tail.splitlines() if line.strip()][-3:]
                    for line in last:
                        self._say(f"gpumon:   {item.process}| {line}")
            elif isinstance(item, Notice):
                who = f" {item.process}" if item.process else ""
                self._say(f"gpumon:{who} {item.text}")
            elif isinstance(item, SourceStatus) and not item.available:
                self._say(f"gpumon: NVML {item.reason}")

    def _say(self, text: str) -> None:
        self._emit(text, self.err)

    @staticmethod
    def _emit(text: str, stream: TextIO) -> None:
        """Print a line; a terminal that is gone (SSH drop, closed pipe) must not stop the run."""
        try:
            print(text, file=stream, flush=True)
        except (OSError, ValueError):
            pass

    def _exit_code(self) -> int:
        if self.signal_received is not None:
            return 128 + self.signal_received
        failed = [
            w
            for w in self.session.launcher.workloads.values()
            if not w.stop_requested and w.exit_status not in (0, None)
        ]
        return 1 if failed else 0


def run_headless(plan: RunPlan, as_json: bool) -> int:
    if not plan.requests:
        raise UsageError("--headless needs at least one workload (e.g. gpumon run fcn --headless)")
    return HeadlessRun(plan, as_json).run()
