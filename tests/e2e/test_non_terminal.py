"""Output that is not a terminal, and a terminal that stopped reading.

Without a terminal on stdout, ``gpumon run`` says so in one line on stderr and runs headless (a
redirect still captures the status lines); whatever the output does, SIGTERM ends gpumon within
a bound with the capture finalised: stdout to a file, to a pipe whose reader went away, and the
live monitor in a real pty whose reader stopped reading (Textual's writer blocked on it).
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import pty
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import GPUMON, only_run, wait_for

F_SETPIPE_SZ = 1031
EXIT_BOUND_S = 40  # front end 5 s, then the children up to 5 s and the front end 5 s more; slack for a loaded box
SYSCALLS = {"x86_64": {"write": 1, "futex": 202}, "aarch64": {"write": 64, "futex": 98}}.get(
    platform.machine()
)

LIGHT_JOB = """\
import time
from gpumon import probe
while True:
    probe.step(samples=1)
    time.sleep(0.01)
"""


@pytest.fixture
def job(tmp_path: Path) -> str:
    script = tmp_path / "light_job.py"
    script.write_text(LIGHT_JOB)
    return f"{sys.executable} {script}"


def run_args(runs: Path, job: str, *extra: str) -> list[str]:
    return [*GPUMON, "run", "--cmd", job, "--cmd", job, "--out", str(runs), "--no-nvml", *extra]


def final_meta(runs: Path) -> dict:
    return json.loads((only_run(runs) / "run.json").read_text())


def stop_within_bound(proc: subprocess.Popen) -> float:
    """SIGTERM, and how long gpumon took to exit (fails the test past EXIT_BOUND_S)."""
    children = psutil.Process(proc.pid).children(recursive=True)
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(EXIT_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"gpumon still running {EXIT_BOUND_S} s after SIGTERM")
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"children outlived gpumon: {alive}"
    return time.monotonic() - began


def test_stdout_to_a_file_runs_headless_with_a_one_line_notice(tmp_path, job):
    runs = tmp_path / "runs"
    log = tmp_path / "log.txt"
    with open(log, "w") as out:
        done = subprocess.run(
            run_args(runs, job, "--duration", "4"),
            stdout=out,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "gpumon: stdout and stderr are not terminals: running headless "
        "(status lines instead of the live monitor)"
    )
    text = log.read_text()
    assert "\x1b" not in text, "escape codes in a file"
    lines = text.splitlines()
    # status lines only: each names its slot and its script (a --cmd spec shows the script first)
    assert lines and all(
        " A light_job.py " in line or " B light_job.py " in line for line in lines
    ), lines[:3]
    meta = final_meta(runs)
    assert meta["status"] == "complete"
    assert [w["state"] for w in meta["workloads"]] == ["stopped", "stopped"]


def test_stdout_to_a_pipe_whose_reader_exits_then_sigterm(tmp_path, job):
    runs = tmp_path / "runs"
    # block-buffered stdout, as a user's shell gives it (this machine's environment sets PYTHONUNBUFFERED)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        run_args(runs, job),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        first = proc.stdout.readline()  # like `| head -1`: one line, then the reader is gone
        proc.stdout.close()
        assert b"\x1b" not in first and b" light_job.py " in first, first
        run_dir = wait_for(lambda: next(runs.glob("*/run.json"), None), what="the capture").parent
        wait_for(
            lambda: (run_dir / "steps.csv").stat().st_size > 200, timeout=60, what="steps recorded"
        )
        stop_within_bound(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    meta = final_meta(runs)
    assert meta["status"] == "complete"
    assert [w["state"] for w in meta["workloads"]] == ["stopped", "stopped"]


@pytest.mark.skipif(SYSCALLS is None, reason=f"system call numbers unknown on {platform.machine()}")
def test_headless_on_a_pipe_that_stopped_reading_still_ends_on_sigterm(tmp_path, job):
    runs = tmp_path / "runs"
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)  # the smallest pipe: status lines fill it in seconds
    proc = subprocess.Popen(
        run_args(runs, job, "--headless"),
        stdout=write_end,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:

        def main_thread_writing() -> bool:
            call = syscalls(proc.pid).get(proc.pid, [])
            return len(call) > 1 and call[0] == str(SYSCALLS["write"]) and int(call[1], 16) == 1

        wait_for(
            main_thread_writing,
            timeout=120,
            interval=0.2,
            what="a status line blocked on the full pipe",
        )
        stop_within_bound(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(read_end)
    assert proc.returncode == 128 + signal.SIGTERM
    meta = final_meta(runs)
    assert meta["status"] == "complete"
    assert [w["state"] for w in meta["workloads"]] == ["stopped", "stopped"]


def syscalls(pid: int) -> dict[int, list[str]]:
    """The system call each thread of ``pid`` is blocked in: thread id -> [number, first argument, ...]."""
    calls = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            calls[int(task.name)] = (task / "syscall").read_text().split()
        except OSError:
            continue
    return calls


class Stuck:
    """Textual's writer thread blocked in write() to the pty (Textual draws on stderr), and then the
    event loop's thread blocked in a futex (a put on the writer's full queue) on consecutive looks."""

    def __init__(self, pid: int, looks: int = 5) -> None:
        self.pid = pid
        self.looks = looks
        self.streak = 0

    def __call__(self) -> bool:
        calls = syscalls(self.pid)
        writing = any(
            len(c) > 1 and c[0] == str(SYSCALLS["write"]) and int(c[1], 16) in (1, 2)
            for c in calls.values()
        )
        main = calls.get(self.pid, [])
        main_waits = bool(main) and main[0] == str(SYSCALLS["futex"])
        self.streak = self.streak + 1 if writing and main_waits else 0
        return self.streak >= self.looks


def set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def own_terminal() -> None:
    """In the child: a new session whose controlling terminal is stdin (the pty), so it gets SIGWINCH."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyMonitor:
    """``gpumon run`` with two light jobs on a real pty of its own (its controlling terminal), drawing and capturing."""

    def __init__(self, runs: Path, job: str) -> None:
        self.runs = runs
        self.master, slave = pty.openpty()
        set_size(self.master, 50, 160)
        env = {**os.environ, "GPUMON_REFRESH_HZ": "30", "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            run_args(runs, job),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            preexec_fn=own_terminal,
            close_fds=True,
        )
        os.close(slave)
        os.set_blocking(self.master, False)
        self.seen = bytearray()

    def read_some(self) -> bool:
        """Read what it drew; whether it has drawn and started a capture."""
        try:
            self.seen.extend(os.read(self.master, 65536))
        except OSError:  # nothing yet (EAGAIN), or nobody on the other side any more (EIO)
            pass
        return b"\x1b[" in self.seen and next(self.runs.glob("*/run.json"), None) is not None

    def wait_capturing(self) -> None:
        wait_for(self.read_some, timeout=90, what="the live monitor drawing and capturing")
        run_dir = only_run(self.runs)
        wait_for(
            lambda: self.read_some() and (run_dir / "steps.csv").stat().st_size > 200,
            timeout=60,
            what="steps recorded",
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1

    def ends_within_bound(self, children: list[psutil.Process]) -> None:
        """gpumon exits within EXIT_BOUND_S (reading its terminal meanwhile) and leaves none of ``children``."""

        def exited() -> bool:
            if self.master >= 0:
                self.read_some()  # drained meanwhile: a full pty would block its writer
            return self.proc.poll() is not None

        wait_for(exited, timeout=EXIT_BOUND_S, what="gpumon's exit")
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, f"children outlived gpumon: {alive}"


def test_a_sigcont_while_the_monitor_runs_leaves_it_one_input_that_quits(tmp_path, job):
    """Textual starts its terminal mode again on SIGCONT (meant for ``fg`` after Ctrl+Z): a second input thread,
    the first never ended, and gpumon's process outlived its quit (gpumon/tui/driver.py)."""
    monitor = PtyMonitor(tmp_path / "runs", job)
    try:
        monitor.wait_capturing()
        children = psutil.Process(monitor.proc.pid).children(recursive=True)
        monitor.proc.send_signal(signal.SIGCONT)  # what `kill -CONT` and a hung-up terminal send
        os.write(monitor.master, b"q")
        monitor.ends_within_bound(children)
    finally:
        monitor.close()
    assert monitor.proc.returncode == 0
    assert final_meta(tmp_path / "runs")["status"] == "complete"


def test_the_monitor_ends_with_its_capture_final_when_its_terminal_hangs_up(tmp_path, job):
    """The terminal goes away (an SSH session drops): the kernel sends SIGHUP and SIGCONT, reads end."""
    monitor = PtyMonitor(tmp_path / "runs", job)
    try:
        monitor.wait_capturing()
        children = psutil.Process(monitor.proc.pid).children(recursive=True)
        os.close(monitor.master)  # the hang-up
        monitor.master = -1
        monitor.ends_within_bound(children)
    finally:
        monitor.close()
    meta = final_meta(tmp_path / "runs")
    assert meta["status"] == "complete"
    assert [w["state"] for w in meta["workloads"]] == ["stopped", "stopped"]


@pytest.mark.skipif(SYSCALLS is None, reason=f"system call numbers unknown on {platform.machine()}")
def test_tui_on_a_pty_that_stopped_reading_still_ends_on_sigterm(tmp_path, job):
    runs = tmp_path / "runs"
    monitor = PtyMonitor(runs, job)
    proc, master = monitor.proc, monitor.master
    try:
        monitor.wait_capturing()
        # The reader stops here. Resizes make Textual repaint the whole screen until its writer blocks
        # on the full pty, and then the event loop on the writer's full queue.
        sizes = iter([(60, 200), (50, 160)] * 1000)
        stuck = Stuck(proc.pid)

        def ui_stuck() -> bool:
            if stuck():
                return True
            if not stuck.streak:  # a resize wakes the event loop: only while it is not (yet) stuck
                set_size(master, *next(sizes))
            return False

        wait_for(
            ui_stuck,
            timeout=90,
            interval=0.2,
            what="the TUI's writer and event loop blocked on the full pty",
        )
        took = stop_within_bound(proc)
    finally:
        monitor.close()
    assert took < EXIT_BOUND_S
    meta = final_meta(runs)
    assert meta["status"] == "complete"
    assert [w["state"] for w in meta["workloads"]] == ["stopped", "stopped"]
