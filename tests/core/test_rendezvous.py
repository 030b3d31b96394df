"""The probe rendezvous with real processes: a probed script no monitor launched publishes its steps in the
private runtime directory, keeps a history ring for a monitor that attaches later, and leaves nothing stale."""

from __future__ import annotations

import json
import os
import socket
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from gpumon.core.probing import rendezvous
from gpumon.core.probing.probe import RING_ROWS
from tests.helpers import fork_as_nobody_answering, wait_for

# Steps about 200 times a second until killed; says "ready" once its probe exists.
STEPPER = textwrap.dedent(
    """
    import time
    from gpumon import probe
    probe.meta(model="toy")
    probe.step()
    print("ready", flush=True)
    while True:
        time.sleep(0.005)
        probe.step(samples=4)
    """
)


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch):
    """A runtime directory whose parent any user may enter (pytest's own tmp directories are private), so that
    only the runtime directory's own mode keeps another user out."""
    parent = Path(tempfile.mkdtemp(prefix="gpumon-rt-"))
    os.chmod(parent, 0o755)
    path = parent / "gpumon"
    monkeypatch.setenv("GPUMON_RUNTIME_DIR", str(path))
    yield path
    shutil.rmtree(parent, ignore_errors=True)


def start(code: str = STEPPER, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def stepper(runtime: Path):
    proc = start()
    yield proc
    proc.kill()
    proc.wait()


class Reader:
    """Reads a probe's JSON lines from a rendezvous connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.messages: list[dict] = []

    def rows(self, history: bool | None = None) -> list[list]:
        return [
            row
            for m in self.messages
            if m["type"] == "steps" and (history is None or bool(m.get("history")) == history)
            for row in m["rows"]
        ]

    def read_until(self, condition, timeout: float = 30.0) -> None:
        def more() -> bool:
            self.sock.settimeout(0.2)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                chunk = None
            if chunk == b"":
                return True
            if chunk:
                *lines, self.buffer = (self.buffer + chunk).split(b"\n")
                self.messages += [json.loads(line) for line in lines]
            return condition(self)

        wait_for(more, timeout=timeout, interval=0, what="probe messages")


def test_a_probed_script_publishes_its_steps_privately(
    stepper: subprocess.Popen, runtime: Path
) -> None:
    entry = runtime / "probes" / f"{stepper.pid}.sock"
    assert entry.is_socket() and stat.S_IMODE(entry.stat().st_mode) == 0o600
    for directory in (runtime, runtime / "probes"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stepper.pid in rendezvous.probed_pids()

    sock = rendezvous.connect(stepper.pid)
    assert sock is not None
    reader = Reader(sock)
    reader.read_until(lambda r: len(r.rows(history=False)) >= 20)
    hello = reader.messages[0]
    assert hello["type"] == "hello" and hello["rendezvous"] is True and hello["pid"] == stepper.pid
    assert hello["argv"] == ["-c"]
    assert reader.messages[1] == {
        "v": 1,
        "pid": stepper.pid,
        "type": "meta",
        "info": {"model": "toy"},
    }
    rows = reader.rows()
    assert [r[0] for r in rows] == list(
        range(len(rows))
    )  # the history from step 0, then live, none lost
    assert reader.rows(history=True)[0][0] == 0 and [r[1] for r in rows] == sorted(
        r[1] for r in rows
    )
    sock.close()


def test_a_monitor_that_leaves_and_one_that_comes_later(stepper: subprocess.Popen) -> None:
    first = rendezvous.connect(stepper.pid)
    assert first is not None
    reader = Reader(first)
    reader.read_until(lambda r: len(r.rows(history=False)) >= 5)
    seen = reader.rows()[-1][0]
    first.close()  # the probe keeps running and waits for the next monitor
    second = Reader(rendezvous.connect(stepper.pid))
    second.read_until(lambda r: len(r.rows(history=False)) >= 5)
    assert (
        second.rows(history=True)[-1][0] >= seen
    )  # its history holds the steps of the first monitor's time too
    assert stepper.poll() is None


def test_the_ring_keeps_the_last_steps(runtime: Path) -> None:
    code = (
        STEPPER.replace("    time.sleep(0.005)\n", "")
        .replace('print("ready", flush=True)\n', "")
        .replace("while True:", f"for _ in range({RING_ROWS + 100}):")
        + "print('ready', flush=True)\nimport time\ntime.sleep(600)\n"
    )
    proc = start(code)
    try:
        reader = Reader(rendezvous.connect(proc.pid))
        reader.read_until(lambda r: len(r.rows(history=True)) >= RING_ROWS)
        steps = [r[0] for r in reader.rows(history=True)]
        assert steps == list(range(101, RING_ROWS + 101))  # bounded: the newest RING_ROWS steps
    finally:
        proc.kill()
        proc.wait()


def test_the_probe_removes_its_entry_at_exit(runtime: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from gpumon import probe\nprobe.step()\nprobe.step()"],
        env=os.environ,
        timeout=60,
    )
    assert proc.returncode == 0
    assert list((runtime / "probes").iterdir()) == []


def test_a_stale_entry_is_ignored_and_cleaned(runtime: Path) -> None:
    dead = start()
    dead.kill()  # kill -9: no exit handler removes its entry
    dead.wait()
    stale = runtime / "probes" / f"{dead.pid}.sock"
    assert stale.exists()
    assert dead.pid not in rendezvous.probed_pids()
    assert not stale.exists()

    # a live PID whose entry nobody listens on (the PID was reused by another process)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        leftover.bind(str(runtime / "probes" / f"{other.pid}.sock"))
        leftover.close()
        assert rendezvous.connect(other.pid) is None
        assert not (runtime / "probes" / f"{other.pid}.sock").exists()
    finally:
        other.kill()
        other.wait()


def test_no_rendezvous_when_switched_off_or_impossible(runtime: Path, tmp_path: Path) -> None:
    """A failed rendezvous turns the probe off quietly: the trainer runs on, nothing printed."""
    code = "from gpumon import probe\nfor _ in range(50): probe.step()\nprint(probe.enabled())\n"
    off = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GPUMON_RENDEZVOUS": "off"},
    )
    assert off.stdout.strip() == "False" and not (runtime / "probes").exists()
    (tmp_path / "open").mkdir(mode=0o777)
    os.chmod(tmp_path / "open", 0o777)
    for bad in (tmp_path / "open", tmp_path / "afile"):
        (tmp_path / "afile").write_text("")
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "GPUMON_RUNTIME_DIR": str(bad)},
        )
        assert (done.returncode, done.stdout.strip(), done.stderr) == (
            0,
            "False",
            "",
        )  # quietly off


def attempts_as_nobody(paths: list[tuple[str, Path]]) -> list[str]:
    """In a forked child that became user ``nobody``: "readable" or "denied" for each (what, path)."""

    def attempt(out: int) -> None:  # in the child: no Python-level cleanup, only these system calls
        found = []
        for what, path in paths:
            try:
                os.listdir(path) if what == "list" else socket.socket(socket.AF_UNIX).connect(
                    str(path)
                )
                found.append("readable")
            except PermissionError:
                found.append("denied")
        os.write(out, " ".join(found).encode())

    pid, read_end = fork_as_nobody_answering(attempt)
    with os.fdopen(read_end, "rb") as f:
        answer = f.read().decode()
    os.waitpid(pid, 0)
    return answer.split()


@pytest.mark.skipif(
    os.getuid() != 0, reason="needs root to become a second user (test_userdir checks the modes)"
)
def test_another_user_cannot_read_or_attach(stepper: subprocess.Popen, runtime: Path) -> None:
    probes = runtime / "probes"
    found = attempts_as_nobody(
        [("list", runtime.parent), ("list", probes), ("connect", probes / f"{stepper.pid}.sock")]
    )
    assert found == [
        "readable",
        "denied",
        "denied",
    ]  # its parent is open to all, the runtime directory is not


FORK_WHILE_SCANNING = """
import os
from gpumon.core.records.clock import RunClock
from gpumon.core.capture.probescan import ProbeScanner
scanner = ProbeScanner(RunClock.start())
scanner.start()  # returns once the thread runs: the fork's after-fork hook sees it
assert scanner.is_alive()
pid = os.fork()  # what launching a job from the monitor does while the scanner runs
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
scanner.stop()
"""


def test_forking_while_the_probe_scanner_runs_is_quiet() -> None:
    """The scanner's stop event must not shadow Thread._stop, which Python calls in a forked child."""
    done = subprocess.run(
        [sys.executable, "-c", FORK_WHILE_SCANNING], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
