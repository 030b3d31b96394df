"""The process that writes a run (its runner), as run.json records it, and whether it still runs.

Every capture names its runner (``run.json`` ``runner``: PID, the process's start time, user, host,
whether it was started with ``--detach``). A run whose status is still ``recording`` is ``running``
while that very process lives (same PID *and* start time, so a recycled PID is not mistaken for it),
and ``interrupted`` once it is gone: killed, crashed, the machine rebooted. ``gpumon runs``, ``attach``
and ``stop`` all ask here.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
from dataclasses import asdict, dataclass
from typing import Any

import psutil

RECORDING = "recording"
RUNNING = "running"
INTERRUPTED = "interrupted"
START_TIME_SLACK_S = 0.05  # psutil's create_time is boot time + jiffies: the same process reads the same value


def user_name(uid: int) -> str:
    """The login name of ``uid``, else the number as text."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@dataclass(frozen=True)
class RunnerInfo:
    """Who writes a run: enough to find that exact process again, on this host, and to tell whose it is."""

    pid: int
    started: float  # the process's start time, seconds since the epoch (psutil create_time)
    uid: int
    user: str
    host: str
    detached: bool = False

    @classmethod
    def current(cls, detached: bool = False) -> "RunnerInfo":
        """This process."""
        pid = os.getpid()
        uid = os.getuid()
        return cls(pid, psutil.Process(pid).create_time(), uid, user_name(uid), socket.gethostname(), detached)

    @classmethod
    def from_json(cls, entry: object) -> "RunnerInfo | None":
        """run.json's ``runner``; None for runs recorded before it (no entry), or a garbled entry."""
        if not isinstance(entry, dict):
            return None
        try:
            return cls(
                int(entry["pid"]), float(entry["started"]), int(entry["uid"]), str(entry["user"]),
                str(entry["host"]), bool(entry.get("detached", False)),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def here(self) -> bool:
        """The run is written on this machine (a runs directory on a shared file system may hold others')."""
        return self.host == socket.gethostname()

    def process(self) -> psutil.Process | None:
        """The runner's process, if it still runs here: this PID with the recorded start time (not a recycled PID)."""
        if not self.here:
            return None
        try:
            process = psutil.Process(self.pid)
            same = abs(process.create_time() - self.started) <= START_TIME_SLACK_S
            return process if same and process.status() != psutil.STATUS_ZOMBIE else None
        except psutil.Error:
            return None

    def alive(self) -> bool:
        return self.process() is not None

    def stop(self) -> bool:
        """Ask the runner to stop as ``q`` would (SIGTERM: it stops its jobs and finalises the run); False if gone."""
        process = self.process()
        if process is None:
            return False
        try:
            process.send_signal(signal.SIGTERM)  # psutil checks first that it is still that same process
        except psutil.NoSuchProcess:
            return False
        return True


def run_status(recorded: str | None, runner: RunnerInfo | None) -> str:
    """``running`` or ``interrupted`` for a run whose ``recorded`` status is still ``recording``; else that status
    (``?`` when none was recorded).

    A recording run without a runner (recorded before runners were named) reads as ``interrupted``:
    no gpumon of that age can still be writing it.
    """
    status = recorded if recorded is not None else "?"
    if status != RECORDING:
        return status
    if runner is not None and not runner.here:
        return RECORDING  # another machine's: this one cannot tell
    return RUNNING if runner is not None and runner.alive() else INTERRUPTED
