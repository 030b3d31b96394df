"""The process that writes a run (its runner): who it claims to be in run.json, and the proof that it is.

Every capture names its runner in ``run.json`` (``runner``: PID, the process's start time, user, host,
whether it was started with ``--detach``). That entry is data: a copied or edited run.json can name any
process. What proves the writer is ``RUN/runner.lock``: the runner creates it (``O_EXCL``, mode 0600)
before run.json is first written, takes an exclusive ``flock`` on it and keeps it open, non-inheritable,
until the capture is final; then it removes it. ``runner_process`` accepts the PID of run.json only if
that very process (same PID *and* start time, not a zombie) holds that very file open and locked: the
same inode, so a copy of the directory (another inode) or a hard link to the file from elsewhere proves
nothing, looked up in ``/proc/PID/fd`` and ``/proc/PID/fdinfo``, which only the process's own user (and
root) may read. A run still marked ``recording`` is ``running`` while such a process exists, else
``interrupted`` (killed, crashed, rebooted, or never the runner at all). ``gpumon runs``, ``attach`` and
``stop`` all ask here; ``core/jobs/runnerstop.py`` signals only a proven runner of the caller's own (nothing under
``core/store`` sends a signal).
"""

from __future__ import annotations

import fcntl
import math
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpumon.core.records.enums import RunStatus
from gpumon.safewrite import create_new_fd

# psutil and socket are imported by the functions that look at processes, which gpumon runs calls only for a run
# still recording: at the top they were 86 M instructions of its start (callgrind; benchmarks/scale.py)
if TYPE_CHECKING:
    import psutil

RECORDING = RunStatus.RECORDING
RUNNING = RunStatus.RUNNING
INTERRUPTED = RunStatus.INTERRUPTED
LOCK_FILE = "runner.lock"
PID_MAX = (
    1 << 22
)  # Linux's PID_MAX_LIMIT: every PID is below it (pid_max is at most this, and PIDs are < pid_max)
START_TIME_SLACK_S = (
    0.05  # psutil's create_time is boot time + jiffies: the same process reads the same value
)


def user_name(uid: int) -> str:
    """The login name of ``uid``, else the number as text."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@dataclass(frozen=True)
class RunnerInfo:
    """Who run.json says writes a run: what to look for on this host, never proof by itself (``runner_process``)."""

    pid: int
    started: float  # the process's start time, seconds since the epoch (psutil create_time)
    uid: int
    user: str
    host: str
    detached: bool = False

    @classmethod
    def current(cls, detached: bool = False) -> "RunnerInfo":
        """This process."""
        import psutil
        import socket

        pid = os.getpid()
        uid = os.getuid()
        return cls(
            pid,
            psutil.Process(pid).create_time(),
            uid,
            user_name(uid),
            socket.gethostname(),
            detached,
        )

    @classmethod
    def from_json(cls, entry: object) -> "RunnerInfo | None":
        """run.json's ``runner``; None for runs recorded before it (no entry), or a garbled entry (a PID that is not one)."""
        if not isinstance(entry, dict):
            return None
        try:
            info = cls(
                int(entry["pid"]),
                float(entry["started"]),
                int(entry["uid"]),
                str(entry["user"]),
                str(entry["host"]),
                bool(entry.get("detached", False)),
            )
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        return (
            info
            if 0 < info.pid < PID_MAX and info.uid >= 0 and math.isfinite(info.started)
            else None
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "started": self.started,
            "uid": self.uid,
            "user": self.user,
            "host": self.host,
            "detached": self.detached,
        }

    @property
    def here(self) -> bool:
        """The run is written on this machine (a runs directory on a shared file system may hold others')."""
        import socket

        return self.host == socket.gethostname()

    def claimed(self) -> psutil.Process | None:
        """The process run.json names, if it still runs here: this PID with the recorded start time (not a recycled
        PID), not a zombie. Whether it is the runner is ``runner_process``'s question."""
        if not self.here:
            return None
        import psutil

        try:
            process = psutil.Process(self.pid)
            same = abs(process.create_time() - self.started) <= START_TIME_SLACK_S
            return process if same and process.status() != psutil.STATUS_ZOMBIE else None
        except psutil.Error:
            return None


class RunnerLock:
    """The runner's side of its identity: ``RUN/runner.lock``, created, locked and held open while it records."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, run_dir: Path) -> "RunnerLock":
        """Create the lock file in ``run_dir`` (a new file, never one that is there already) and lock it; OSError if not.

        The descriptor is not inherited (``O_CLOEXEC``): the jobs this process starts never hold it.
        """
        path = run_dir / LOCK_FILE
        fd = create_new_fd(path, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        return cls(path, fd)

    def release(self) -> None:
        """Remove the file and let it go (once run.json is final): the run no longer has a runner."""
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None


def _lock_descriptor(pid: int, lock: Path, lock_stat: os.stat_result) -> int | None:
    """The descriptor through which ``pid`` holds ``lock`` open (that very file: same device and inode), else None.

    A second name of the same inode (a hard link made elsewhere) is not this directory's: with more than one link,
    the name the process opened must be ``lock``'s. PermissionError when this user may not look (another user's).
    """
    fds = f"/proc/{pid}/fd"
    for entry in os.scandir(fds):
        try:
            held = os.stat(entry.path)  # follows the descriptor to the file itself, renamed or not
        except OSError:
            continue  # closed meanwhile
        if (held.st_dev, held.st_ino) != (lock_stat.st_dev, lock_stat.st_ino):
            continue
        if lock_stat.st_nlink == 1 or os.readlink(entry.path) == os.path.realpath(lock):
            return int(entry.name)
    return None


def _holds_flock(pid: int, fd: int) -> bool:
    """``pid``'s descriptor ``fd`` holds an exclusive flock (``/proc/PID/fdinfo/FD``'s ``lock:`` lines, Linux 3.15+)."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return False
    return any(
        line.startswith("lock:") and "FLOCK" in line.split() and "WRITE" in line.split()
        for line in lines
    )


def runner_process(run_dir: Path, info: RunnerInfo | None) -> psutil.Process | None:
    """The process that writes ``run_dir``, proven; None when no process is its runner now.

    Proof: the process run.json names (``info``: PID and start time) holds ``RUN/runner.lock`` (a regular file, not
    a link) open with an exclusive lock through one of its descriptors, and runs as the user who owns that file.
    PermissionError when this user may not look at that process's descriptors (another user's; root may).
    """
    if info is None or not info.here:
        return None
    lock = Path(run_dir) / LOCK_FILE
    try:
        lock_stat = os.lstat(lock)
    except OSError:
        return None
    if not stat.S_ISREG(lock_stat.st_mode):
        return None
    process = info.claimed()
    if process is None:
        return None
    import psutil

    try:
        fd = _lock_descriptor(process.pid, lock, lock_stat)
        if fd is None or not _holds_flock(process.pid, fd):
            return None
        if (
            process.uids().real != lock_stat.st_uid or not process.is_running()
        ):  # is_running: still that process
            return None
    except (FileNotFoundError, ProcessLookupError, psutil.NoSuchProcess):
        return None  # it ended while looked at
    except psutil.AccessDenied:
        raise PermissionError(f"cannot inspect process {process.pid}") from None
    return process


def run_status(recorded: str | None, runner: RunnerInfo | None, run_dir: Path) -> str:
    """``running`` or ``interrupted`` for the run in ``run_dir`` whose ``recorded`` status is still ``recording``;
    else that status (``?`` when none was recorded).

    A recording run is ``running`` only while its runner is proven (``runner_process``): a run recorded before
    runners were named or locked, a copy of a run, and a run.json naming some other process read ``interrupted``.
    One written on another host, or whose runner this user may not inspect (another user's), stays ``recording``:
    this machine, or this user, cannot tell.
    """
    status = recorded if recorded is not None else "?"
    if status != RECORDING:
        return status
    if runner is not None and not runner.here:
        return RECORDING
    try:
        return RUNNING if runner_process(run_dir, runner) is not None else INTERRUPTED
    except PermissionError:
        return RECORDING


def run_owner(run_dir: Path, info: RunnerInfo | None) -> int:
    """Whose run ``run_dir`` is: its proven runner's user while it runs, else the directory's owner.

    Never run.json's ``runner.uid``: that is data anyone who can write a file can set.
    """
    try:
        process = runner_process(run_dir, info)
    except PermissionError:
        process = None
    if process is not None:
        import psutil

        try:
            return process.uids().real
        except psutil.Error:
            pass
    return Path(run_dir).stat().st_uid
