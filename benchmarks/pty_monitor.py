"""Run a terminal program in a real pseudo-terminal and measure its own CPU and RSS.

The program gets a pty of a fixed size (as in a terminal window); everything it writes is
read and counted (a terminal that is not read would block it). CPU is the program's own
user + system time from ``/proc/PID/stat`` (its children are not counted), over a window
that starts after a warm-up. Used by ``observer_cost.py``; adapted from the ptycost script
used on the H100.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
QUIT_WAIT_S = 30.0


@dataclass(frozen=True)
class PtyCost:
    """What one program cost over the measured window."""

    cpu_pct: float
    rss_mib: float
    seconds: float
    bytes_per_s: float
    exit_status: int | str
    last_output: str


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` itself (children excluded)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


class PtyProgram:
    """``argv`` started under a new pty of ``cols`` x ``rows``; ``drain`` reads what it writes."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int = 120, rows: int = 40) -> None:
        env = {**env, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec the program with the pty as its terminal
            try:
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
            ready, _, _ = select.select([self.fd], [], [], min(0.05, max(0.0, until - time.monotonic())))
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

    def measure(self, warmup_s: float, seconds: float) -> tuple[float, float, float, int]:
        """(CPU %, RSS MiB, seconds measured, bytes written) over ``seconds`` after ``warmup_s``."""
        self.drain(time.monotonic() + warmup_s)
        cpu0, wall0, bytes0 = cpu_seconds(self.pid), time.monotonic(), self.received
        self.drain(wall0 + seconds)
        cpu1, wall1 = cpu_seconds(self.pid), time.monotonic()
        return 100 * (cpu1 - cpu0) / (wall1 - wall0), rss_mib(self.pid), wall1 - wall0, self.received - bytes0

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
    argv: list[str], env: dict[str, str], warmup_s: float, seconds: float, quit_keys: bytes, cols: int = 120, rows: int = 40
) -> PtyCost:
    """Start ``argv`` in a pty, measure it for ``seconds`` after ``warmup_s``, then quit it."""
    program = PtyProgram(argv, env, cols, rows)
    try:
        cpu, rss, measured, written = program.measure(warmup_s, seconds)
    except FileNotFoundError:  # it exited during the warm-up
        cpu = rss = measured = float("nan")
        written = 0
    status = program.quit(quit_keys)
    tail = program.tail.decode("utf-8", "replace")
    return PtyCost(cpu, rss, measured, written / measured if measured == measured else 0.0, status, tail)
