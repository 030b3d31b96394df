"""Run a terminal program in a real pseudo-terminal and measure its own CPU and RSS.

The program gets a pty of a fixed size (as in a terminal window); everything it writes is
read and counted (a terminal that is not read would block it). CPU is the program's own
user + system time from ``/proc/PID/stat`` (its children are not counted), over a window
that starts after a warm-up. Each thread's share comes from ``/proc/PID/task/TID/schedstat``
(nanoseconds on the CPU) with its voluntary context switches (wake-ups), named by ``py-spy
dump`` where py-spy can attach. Used by ``observer_cost.py``; adapted from the ptycost script
used on the H100.
"""

from __future__ import annotations

import fcntl
import math
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field, replace

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
QUIT_WAIT_S = 30.0


@dataclass(frozen=True)
class ThreadCost:
    """One thread over the measured window: % of one core, wake-ups a second, CPU per wake-up."""

    name: str
    cpu_pct: float
    wakeups_per_s: float

    @property
    def us_per_wakeup(self) -> float:
        return 1e4 * self.cpu_pct / self.wakeups_per_s if self.wakeups_per_s > 0 else float("nan")


@dataclass(frozen=True)
class PtyCost:
    """What one program cost over the measured window."""

    cpu_pct: float
    rss_mib: float
    seconds: float
    bytes_per_s: float
    exit_status: int | str
    last_output: str
    threads: tuple[ThreadCost, ...] = field(default=())
    window: tuple[float, float] = (
        math.nan,
        math.nan,
    )  # monotonic start and end of what was measured


def thread_times(pid: int) -> dict[int, tuple[float, int]]:
    """TID -> (seconds on the CPU, voluntary context switches) for every thread of ``pid``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                switches = int(
                    re.search(r"^voluntary_ctxt_switches:\s+(\d+)", f.read(), re.M).group(1)
                )
        except (OSError, AttributeError):
            continue  # the thread ended meanwhile
        out[int(tid)] = (ns / 1e9, switches)
    return out


def thread_names(pid: int) -> dict[int, str]:
    """TID -> Python thread name, from ``py-spy dump`` (empty where py-spy is missing or cannot attach)."""
    spy = shutil.which("py-spy")
    if spy is None:
        return {}
    dump = subprocess.run(
        [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
    ).stdout
    return {int(tid, 0): name for tid, name in re.findall(r'Thread (\S+) \(\w+\): "([^"]+)"', dump)}


def thread_costs(
    before: dict[int, tuple[float, int]],
    after: dict[int, tuple[float, int]],
    names: dict[int, str],
    seconds: float,
) -> tuple[ThreadCost, ...]:
    costs = []
    for tid, (cpu, switches) in after.items():
        cpu0, switches0 = before.get(tid, (0.0, 0))
        costs.append(
            ThreadCost(
                names.get(tid, f"thread {tid}"),
                100 * (cpu - cpu0) / seconds,
                (switches - switches0) / seconds,
            )
        )
    return tuple(sorted(costs, key=lambda c: -c.cpu_pct))


@dataclass(frozen=True)
class Snapshot:
    """A process's CPU so far, whole and per thread, at a monotonic time."""

    pid: int
    cpu_s: float
    threads: dict[int, tuple[float, int]]
    wall: float


def snapshot(pid: int) -> Snapshot:
    return Snapshot(pid, cpu_seconds(pid), thread_times(pid), time.monotonic())


def cost_between(
    before: Snapshot, after: Snapshot, names: dict[int, str]
) -> tuple[float, float, tuple[ThreadCost, ...]]:
    """(CPU % of one core, seconds, per thread) of one process between two snapshots."""
    seconds = after.wall - before.wall
    return (
        100 * (after.cpu_s - before.cpu_s) / seconds,
        seconds,
        thread_costs(before.threads, after.threads, names, seconds),
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` itself (children excluded)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A memory field of /proc/PID/status in MiB: ``VmRSS`` (all resident pages) or ``RssAnon`` (the heap's)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


class PtyProgram:
    """``argv`` started under a new pty of ``cols`` x ``rows``; ``drain`` reads what it writes."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cols: int = 120,
        rows: int = 40,
        cwd: str | None = None,
    ) -> None:
        env = {**env, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec the program with the pty as its terminal
            try:
                if cwd is not None:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.received = 0
        self.tail = b""
        self.open = True

    def drain(self, until: float) -> None:
        """Read the program's output until the monotonic time ``until`` (or until the pty closes)."""
        while self.open and time.monotonic() < until:
            ready, _, _ = select.select(
                [self.fd], [], [], min(0.05, max(0.0, until - time.monotonic()))
            )
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                self.open = False
                return
            self.received += len(data)
            self.tail = (self.tail + data)[-4096:]

    def measure(
        self, warmup_s: float, seconds: float, also: int | None = None
    ) -> tuple[PtyCost, tuple[Snapshot, ...]]:
        """What it cost over ``seconds`` after ``warmup_s`` (still running), and the snapshots of process ``also``
        taken at the window's two ends (none without it)."""
        self.drain(time.monotonic() + warmup_s)
        names = thread_names(self.pid)
        self.drain(time.monotonic() + 1.0)  # let the dump's pause pass before measuring
        other0 = snapshot(also) if also is not None else None
        before, bytes0 = snapshot(self.pid), self.received
        self.drain(before.wall + seconds)
        after = snapshot(self.pid)
        others = (other0, snapshot(also)) if other0 is not None else ()
        cpu, measured, threads = cost_between(before, after, names)
        cost = PtyCost(
            cpu,
            rss_mib(self.pid),
            measured,
            (self.received - bytes0) / measured,
            "running",
            "",
            threads,
            (before.wall, after.wall),
        )
        return cost, others

    def quit(self, keys: bytes) -> int | str:
        """Type ``keys`` (``q``, or ``\\x03`` for Ctrl-C) and wait for the exit; SIGKILL after 30 s."""
        try:
            os.write(self.fd, keys)
        except OSError:
            pass
        end = time.monotonic() + QUIT_WAIT_S
        while time.monotonic() < end:
            self.drain(time.monotonic() + 0.2)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return "killed"


def run_in_pty(
    argv: list[str],
    env: dict[str, str],
    warmup_s: float,
    seconds: float,
    quit_keys: bytes,
    cols: int = 120,
    rows: int = 40,
    cwd: str | None = None,
) -> PtyCost:
    """Start ``argv`` in a pty, measure it for ``seconds`` after ``warmup_s``, then quit it."""
    program = PtyProgram(argv, env, cols, rows, cwd)
    try:
        cost = program.measure(warmup_s, seconds)[0]
    except FileNotFoundError:  # it exited during the warm-up
        cost = PtyCost(math.nan, math.nan, math.nan, 0.0, "", "")
    status = program.quit(quit_keys)
    return replace(cost, exit_status=status, last_output=program.tail.decode("utf-8", "replace"))
