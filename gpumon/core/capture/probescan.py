"""The probed processes of this user that gpumon did not start, with their live iteration rate (the monitor's list).

A thread looks in the rendezvous directory every ``SCAN_S`` seconds (``gpumon.core.probing.rendezvous``: stale entries
are removed there), connects to each new probe and reads its steps on a listener and a bus of its own, so
nothing here reaches a capture; attaching one as job B is ``Session.attach``. Each followed probe is a job of that
bus, keyed by its PID: "running" while its connection is open, "exited" once it closed, and its rate comes from the
bus's live computation (``LiveStats``), as a session's jobs' do.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import psutil

from gpumon.core.probing import rendezvous
from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.probing.listener import Listener
from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import WorkloadState

SCAN_S = 2.0


@dataclass(frozen=True)
class Probed:
    """One probed process: its PID, command line, live iteration rate and steps so far."""

    pid: int
    command: str
    iter_per_s: float
    steps: int


class ProbeScanner(threading.Thread):
    """Finds and follows the probes of this user; ``processes()`` is safe from any thread."""

    def __init__(self, clock: RunClock) -> None:
        super().__init__(name="gpumon-probe-scan", daemon=True)
        self.clock = clock
        self.bus = Bus()
        self.live = LiveStats(shared=False, bus=self.bus)
        self.listener = Listener(self.bus, clock)
        self._followed: dict[int, tuple[str, threading.Event]] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def run(self) -> None:
        self.listener.start()
        while not self._stop_event.is_set():
            self.scan()
            self.processes()  # keeps each one's window of steps short even when nobody looks
            self._stop_event.wait(SCAN_S)
        self.listener.stop()

    def stop(self) -> None:
        self._stop_event.set()

    def scan(self) -> None:
        """Follow every probe not followed yet; forget the ones whose connection closed."""
        followed = self._forget_closed()
        for pid in rendezvous.probed_pids():
            if pid in followed or pid == os.getpid():
                continue
            sock = rendezvous.connect(pid)
            if sock is None:
                continue
            closed = self.listener.watch(sock.detach(), str(pid), "probe")
            with self._lock:
                self._followed[pid] = (_command(pid), closed)
            self.bus.publish(WorkloadState(str(pid), "running", self.clock.now(), pid=pid))

    def _forget_closed(self) -> set[int]:
        """Drop the probes whose connection closed (each one "exited" on the bus); the PIDs still followed."""
        with self._lock:
            gone = [pid for pid, (_, closed) in self._followed.items() if closed.is_set()]
            for pid in gone:
                del self._followed[pid]
            followed = set(self._followed)
        for pid in gone:
            self.bus.publish(WorkloadState(str(pid), "exited", self.clock.now(), pid=pid))
        return followed

    def processes(self) -> list[Probed]:
        """The probed processes followed now, by PID."""
        self._forget_closed()
        live = self.live.now(self.clock.now())
        with self._lock:
            commands = {str(pid): command for pid, (command, _) in self._followed.items()}
        return sorted(
            (
                Probed(
                    int(key), commands[key], live.figures[key].iter_per_s, live.figures[key].steps
                )
                for key in live.running
                if key in commands
            ),
            key=lambda probed: probed.pid,
        )


def _command(pid: int) -> str:
    try:
        argv = psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    return " ".join([os.path.basename(argv[0]), *argv[1:]]) if argv else "?"
