"""Shared test helpers: run gpumon as a real subprocess, wait for conditions without sleeping blindly."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence, TypeVar

import psutil
import pytest

from gpumon.core.records.model import StepBatch

if TYPE_CHECKING:
    from gpumon.core.store.runner import RunnerInfo

T = TypeVar("T")

GPUMON = [sys.executable, "-m", "gpumon"]
# What a machine without the NVIDIA driver says: pynvml's own failure to load libnvidia-ml.so.1.
NO_DRIVER_SCENARIO = "fail nvmlInit LIBRARY_NOT_FOUND\n"


def unbatched(items: Iterable[object]) -> list[object]:
    """Items a bus carried, in order, each StepBatch as its steps."""
    return [one for item in items for one in (item.steps if type(item) is StepBatch else (item,))]


def gpumon(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None, **kw
) -> subprocess.CompletedProcess:
    """Run the real CLI to completion."""
    return subprocess.run(
        [*GPUMON, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        **kw,
    )


def headless_cpu(runs: Path, *args: str) -> list[str]:
    """``run ARGS`` headless on the CPU without NVML, recording into ``runs``: most end-to-end runs' arguments."""
    return ["run", *args, "--headless", "--device", "cpu", "--no-nvml", "--out", str(runs)]


def one_line_error(done: subprocess.CompletedProcess, status: int = 2) -> str:
    """The error line of a refused command: exit ``status``, one line on stderr, no traceback."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("gpumon: error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def in_private_mount(
    tmp_path: Path, mount_options: str, then: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    """``then`` (a shell command line) run in a private mount namespace (``unshare -rm``) where ``tmp_path/mnt`` is a
    fresh tmpfs mounted with ``mount_options``; skipped where such a namespace cannot be made."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(
            ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {tmp_path}"],
            capture_output=True,
        ).returncode
    ):
        pytest.skip("cannot mount a tmpfs in a private mount namespace here (unshare -rm)")
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    script = f"mount -t tmpfs -o {mount_options} tmpfs {mnt} && {then}"
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=timeout
    )


def _tried(condition: Callable[[], T], deadline: float, timeout: float, what: str) -> T | None:
    """``condition()``'s value when truthy, else None; AssertionError once past ``deadline``."""
    value = condition()
    if value:
        return value
    if time.monotonic() > deadline:
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
    return None


def wait_for(
    condition: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (value := _tried(condition, deadline, timeout, what)) is None:
        time.sleep(interval)
    return value


def interrupt_once(
    proc: subprocess.Popen[str], done: Callable[[], object], timeout: float, what: str, grace: float
) -> str:
    """Ctrl-C ``proc`` once ``done()`` holds (or it has exited); its stderr. Killed if it has not ended ``grace``
    seconds later (the caller's assertions on its exit status then fail)."""
    try:
        wait_for(lambda: done() or proc.poll() is not None, timeout, 0.2, what)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=grace)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return err


async def wait_until(
    pilot, condition: Callable[[], T], timeout: float = 20.0, what: str = "condition"
) -> T:
    """Let a Textual app (under ``pilot``) run until ``condition()`` is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (value := _tried(condition, deadline, timeout, what)) is None:
        await pilot.pause(0.05)
    return value


def tiny_pairs_spec(
    name: str, title: str, question: str, seconds: int, cpus: str | None = None
) -> str:
    """An experiment spec (TOML) of fcn beside gemm, tiny, one thread each (``cpus``: pinned there)."""
    pinned = f', cpus = "{cpus}"' if cpus is not None else ""
    return f"""\
[experiment]
name = "{name}"
title = "{title}"
question = "{question}"
analysis = "pairwise"

[run]
workloads = ["fcn", "gemm"]
options = {{ preset = "tiny", threads = 1{pinned} }}
pairs = "distinct"
seconds = {seconds}
stagger = 1
startup = 40
"""


# A run that a test stops once it has recorded what it needs: long enough never to end first on any machine.
UNTIL_STOPPED_S = 900
# How long a run may take to record what a test needs, on a loaded 2-core box: beyond it the test fails.
RECORDING_DEADLINE_S = 240


def recorded(runs_dir: Path, table: str = "steps") -> list[dict[str, str]]:
    """The complete rows recorded so far in ``table`` of the one run under ``runs_dir`` ([] before it exists)."""
    found = list(runs_dir.glob(f"*/{table}.csv")) if runs_dir.exists() else []
    if len(found) != 1:
        return []
    text = found[0].read_text(encoding="utf-8", errors="replace")
    return list(csv.DictReader(text[: text.rfind("\n") + 1].splitlines()))


def post_warmup_steps(runs_dir: Path) -> dict[str, list[float]]:
    """Each job's post-warm-up step times recorded so far in the one run under ``runs_dir``."""
    steps: dict[str, list[float]] = {}
    for row in recorded(runs_dir):
        if row.get("warmup") == "0" and row.get("t"):
            steps.setdefault(row["process"], []).append(float(row["t"]))
    return steps


def steps_span(runs_dir: Path, slot: str) -> tuple[int, float]:
    """How many post-warm-up steps ``slot`` has recorded, and the seconds from its first to its last."""
    times = post_warmup_steps(runs_dir).get(slot, [])
    return len(times), (max(times) - min(times) if times else 0.0)


def run_until(
    args: Sequence[str],
    runs_dir: Path,
    enough: Callable[[], object],
    what: str,
    timeout: float = RECORDING_DEADLINE_S,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``gpumon run ARGS --out RUNS_DIR`` with a ``--duration`` no machine reaches, stopped with SIGINT (Ctrl-C)
    as soon as ``enough()`` holds: the run lasts as long as this machine needs to record what the test reads.

    Fails the test, with the steps recorded so far and gpumon's stderr, when the run ends by itself first or
    ``timeout`` seconds pass. The result's returncode is gpumon's (128 + SIGINT once stopped).
    """
    cmd = [*GPUMON, "run", *args, "--duration", str(UNTIL_STOPPED_S), "--out", str(runs_dir)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, text=True, env={**os.environ, **(env or {})}
        )
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None and time.monotonic() < deadline and not enough():
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    if not enough():
        counts = {slot: len(times) for slot, times in post_warmup_steps(runs_dir).items()}
        raise AssertionError(
            f"{what}: not recorded (gpumon exited with status {done.returncode}, at most "
            f"{timeout:.0f} s after its start); post-warm-up steps recorded: {counts}; "
            f"stderr:\n{done.stderr[-3000:]}"
        )
    return done


def only_run(runs_dir: Path) -> Path:
    runs = [p for p in runs_dir.iterdir() if (p / "run.json").exists()]
    assert len(runs) == 1, runs
    return runs[0]


def solo_core_share(run_dir: Path, slot: str = "A") -> float:
    """The share of its one pinned core that ``slot``'s job had alone, read from the capture with pandas: mean
    ``cpu_pct`` of its process tree (processes.csv) between its first and last post-warm-up steps, / 100.

    On an idle core it is ~1; on a box where other processes also run on that core it is less, and two such
    jobs on the core then slow each other by r = 1 + the partner's share, not 2 (the scheduler splits the core
    between both jobs and the others): the physics the pinned-core tests check the predictions against.
    """
    import pandas as pd

    steps = pd.read_csv(run_dir / "steps.csv")
    steps = steps[(steps.process == slot) & (steps.warmup == 0)]
    rows = pd.read_csv(run_dir / "processes.csv")
    rows = rows[(rows.process == slot) & rows.t.between(steps.t.min(), steps.t.max())]
    return float(rows.cpu_pct.mean()) / 100


def solo_cores_busy(run_dir: Path, slot: str = "A") -> float:
    """How busy the whole box's cores were (0..1, anything on them) while ``slot``'s job stepped alone, read from
    host.csv's per-core CPU % with pandas: the mean over every core and the rows between its first and last
    post-warm-up steps. Its own share subtracted, what other processes took: on an idle 2-core box an unpinned
    single-threaded job keeps it near 0.5; beside two busy loops it is ~1."""
    import pandas as pd

    steps = pd.read_csv(run_dir / "steps.csv")
    steps = steps[(steps.process == slot) & (steps.warmup == 0)]
    host = pd.read_csv(run_dir / "host.csv")
    host = host[host.t.between(steps.t.min(), steps.t.max())]
    return (
        float(
            host.per_core.map(lambda text: sum(map(float, text.split())) / len(text.split())).mean()
        )
        / 100
    )


@functools.lru_cache(maxsize=1)
def nvml_library_installed() -> bool:
    """Whether the dynamic linker finds a libnvidia-ml.so.1 of its own (without LD_LIBRARY_PATH), as on a GPU box.

    Asked by loading it in a child: ctypes.util.find_library needs the unversioned .so or an ld.so.cache entry,
    which a library dropped into the linker's directories need not have."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    probe = "import ctypes; ctypes.CDLL('libnvidia-ml.so.1')"
    return (
        subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, timeout=60
        ).returncode
        == 0
    )


def no_gpu_environment(work: Path, base: dict[str, str] | None = None) -> dict[str, str] | None:
    """The environment of a box without a GPU, for a subprocess, also on a box that has one.

    The fake libnvidia-ml (tests/fakenvml), built into ``work``, comes first on the library path and fails
    every nvmlInit as a machine without the driver does (LIBRARY_NOT_FOUND), whatever libnvidia-ml the dynamic
    linker would find; CUDA_VISIBLE_DEVICES="" hides any GPU from CUDA and from gpumon's own device count.
    None when there is no C compiler to build the fake and a real libnvidia-ml is installed (nothing can
    hide it then); without either, an empty library directory is a box without a GPU already.
    """
    from tests.fakenvml import build as fake

    work.mkdir(parents=True, exist_ok=True)
    if fake.compiler() is not None:
        env = fake.environment(
            fake.build(work),
            fake.write_scenario(work / "no-driver.txt", NO_DRIVER_SCENARIO),
            base=base,
        )
    elif not nvml_library_installed():
        (work / "empty").mkdir(exist_ok=True)
        env = fake.environment(work / "empty", base=base)
    else:
        return None
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


# A process that holds a run directory as its runner does (the real RunnerLock, then the run.json a capture starts
# with), and waits: gpumon's runner identity without a capture around it.
HOLD_RUN = """
import json, sys, time
from dataclasses import dataclass
from pathlib import Path
from gpumon.core.records.model import STEP_COLUMNS
from gpumon.core.store.runner import RunnerInfo, RunnerLock
run_dir = Path(sys.argv[1])
run_dir.mkdir(parents=True, exist_ok=True)
lock = RunnerLock.take(run_dir)
meta = {"schema": 1, "label": run_dir.name, "mode": "exclusive", "status": "recording", "started_at": "x",
        "workloads": [], "runner": RunnerInfo.current().to_json()}
(run_dir / "steps.csv").write_text(",".join(STEP_COLUMNS) + "\\n")
(run_dir / "run.json").write_text(json.dumps(meta))
print("ready", flush=True)
time.sleep(600)
"""


def hold_run(run_dir: Path) -> "tuple[subprocess.Popen, RunnerInfo]":
    """A child Python that holds ``run_dir`` as its runner (created if need be), and what its run.json says of it."""
    from gpumon.core.store.runner import RunnerInfo

    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_RUN, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    import json

    info = RunnerInfo.from_json(json.loads((run_dir / "run.json").read_text()).get("runner"))
    assert info is not None and info.pid == proc.pid
    return proc, info


class victim:
    """``with victim() as proc``: a process gpumon did not start (``sleep 3007``), killed at the end if it lived."""

    def __enter__(self) -> subprocess.Popen:
        self.proc = subprocess.Popen(["sleep", "3007"])
        return self.proc

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def fork_as_nobody_answering(work: Callable[[int], None]) -> tuple[int, int]:
    """A forked child that became user ``nobody`` and runs ``work(write_fd)`` (its answer goes to that pipe), then
    exits without Python's cleanup; (its PID, the pipe's read end) to the caller, who reads and reaps it."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no Python-level cleanup
        try:
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            work(write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


def fork_as_nobody(work: Callable[[], object]) -> str:
    """``str(work())`` computed in a forked child that became user ``nobody`` (an exception: its type and text)."""

    def answer(out: int) -> None:
        try:
            text = str(work())
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            text = f"{type(exc).__name__}: {exc}"
        os.write(out, text.encode())

    pid, read_end = fork_as_nobody_answering(answer)
    with os.fdopen(read_end, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    return text


def recording_claim(runner: dict) -> dict:
    """A minimal run.json of a run still recording, labelled theirs, whose ``runner`` field is ``runner``."""
    return {
        "schema": 1,
        "label": "theirs",
        "mode": "exclusive",
        "status": "recording",
        "started_at": "x",
        "workloads": [],
        "runner": runner,
    }


@contextlib.contextmanager
def runner_as_nobody(run_dir: Path) -> Iterator["Reaped"]:
    """A forked child that became user ``nobody`` and holds ``run_dir`` (created here, owned by nobody) as its runner,
    once it holds it; killed and reaped on leaving, unless the test reaped it (``Reaped.status``)."""
    child = Reaped(_hold_run_as_nobody(run_dir))
    try:
        yield child
    finally:
        if not child.reaped:
            os.kill(child.pid, signal.SIGKILL)
            child.status()


@dataclass
class Reaped:
    """A child process of the test, and whether the test has reaped it."""

    pid: int
    reaped: bool = False

    def status(self) -> int:
        """Its wait status, once it has ended (it is reaped then)."""
        self.reaped = True
        return os.waitpid(self.pid, 0)[1]


def _hold_run_as_nobody(run_dir: Path) -> int:
    """The PID of a forked child that became user ``nobody`` and holds ``run_dir`` as its runner."""
    import json
    import pwd

    from gpumon.core.records.model import STEP_COLUMNS
    from gpumon.core.store.runner import RunnerInfo, RunnerLock

    nobody = pwd.getpwnam("nobody")
    run_dir.mkdir(parents=True)
    os.chown(run_dir, nobody.pw_uid, nobody.pw_gid)

    def hold(out: int) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        RunnerLock.take(run_dir)
        meta = recording_claim(RunnerInfo.current().to_json())
        (run_dir / "steps.csv").write_text(",".join(STEP_COLUMNS) + "\n")
        (run_dir / "run.json").write_text(json.dumps(meta))
        os.write(out, b"ready")
        os.close(out)
        signal.pause()

    pid, read_end = fork_as_nobody_answering(hold)
    with os.fdopen(read_end, "rb") as f:
        assert f.read() == b"ready"
    return pid


@contextlib.contextmanager
def reachable_by_others() -> Iterator[Path]:
    """A fresh directory under /tmp that other users (``nobody``) may enter (pytest's own are 0700), removed after."""
    path = Path(tempfile.mkdtemp(prefix="gpumon-test-shared-", dir="/tmp"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def new_tmux(
    socket: str,
    cols: int,
    rows: int,
    command: list[str],
    env: dict[str, str],
    cwd: Path | None = None,
) -> None:
    """Start a tmux server on ``socket`` whose one session, ``cols`` x ``rows``, runs ``command`` detached."""
    subprocess.run(
        ["tmux", "-S", socket, "new-session", "-d", "-x", str(cols), "-y", str(rows), *command],
        env=env,
        cwd=cwd,
        check=True,
    )


class Terminal:
    """A real terminal: tmux running one command detached, ``cols`` x ``rows``; its screen as text, keys typed in.

    The command's exit status is kept (``status``): tmux ends the session when the command exits.
    """

    def __init__(
        self,
        work: Path,
        argv: list[str],
        env: dict[str, str],
        cols: int = 120,
        rows: int = 40,
        cwd: Path | None = None,
    ) -> None:
        import shlex

        self.socket = str(work / "tmux.sock")
        self.status_file = work / "terminal.status"
        self.status_file.unlink(missing_ok=True)
        command = f"{shlex.join(argv)}; echo $? > {shlex.quote(str(self.status_file))}"
        new_tmux(self.socket, cols, rows, ["sh", "-c", command], env, cwd)

    def screen(self, joined: bool = False) -> str:
        """The screen's text; ``joined``: a line the terminal wrapped comes back as one."""
        done = subprocess.run(
            ["tmux", "-S", self.socket, "capture-pane", "-p", *(["-J"] if joined else [])],
            capture_output=True,
            text=True,
        )
        return done.stdout if done.returncode == 0 else ""

    def wait_for_text(self, text: str, timeout: float = 60.0) -> str:
        """The screen once ``text`` is on it."""
        return wait_for(
            lambda: text in (screen := self.screen()) and screen,
            timeout,
            0.1,
            f"{text!r} on the screen",
        )

    def cursor_line(self) -> str:
        """The screen line the terminal's cursor is on (a focused input puts it there, even while Textual hides it)."""
        done = subprocess.run(
            ["tmux", "-S", self.socket, "display", "-p", "#{cursor_y}"],
            capture_output=True,
            text=True,
        )
        lines = self.screen().splitlines()
        row = int(done.stdout) if done.stdout.strip().isdigit() else -1
        return lines[row] if 0 <= row < len(lines) else ""

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names: ``Enter``, ``Escape``, or text)."""
        subprocess.run(["tmux", "-S", self.socket, "send-keys", *keys], check=True)

    def alive(self) -> bool:
        """Whether the terminal is still there (tmux ends it when its command, or the shell around it, ends)."""
        return (
            subprocess.run(
                ["tmux", "-S", self.socket, "has-session"], capture_output=True
            ).returncode
            == 0
        )

    def status(self, timeout: float = 60.0) -> int:
        """The command's exit status, once it has exited."""
        done = lambda: self.status_file.exists() and self.status_file.read_text().strip()  # noqa: E731
        wait_for(
            lambda: done() or not self.alive(), timeout, 0.1, "the command in the terminal to exit"
        )
        if not done():
            raise AssertionError(
                "the terminal ended without its command's exit status (a signal ended the shell)"
            )
        return int(self.status_file.read_text())

    def processes(self) -> list[psutil.Process]:
        """Every process under the terminal's shell (the command and what it started)."""
        panes = subprocess.run(
            ["tmux", "-S", self.socket, "list-panes", "-F", "#{pane_pid}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return psutil.Process(int(panes.stdout.split()[0])).children(recursive=True)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


# A Python script that opens the live monitor (nothing launched, no NVML) and waits for its first frame, then runs
# ``{then}`` (statements indented for the app's ``run_test`` block); used by the import contract and
# benchmarks/startup.py.
FIRST_FRAME = """
import asyncio, json, sys, tempfile
from dataclasses import dataclass
from pathlib import Path
from gpumon.frontends.plan import make_plan
from gpumon.core.capture.session import SessionConfig
from gpumon.tui.app import LiveApp
from gpumon.tui.controller import Controller

async def main():
    config = SessionConfig(device="cpu", runs_dir=Path(tempfile.mkdtemp()), nvml=False)
    app = LiveApp(Controller(make_plan([], [], session=config, label=None, duration_s=None, stagger_s=0.0)))
    async with app.run_test() as pilot:
        while app.monitor is None or not app.monitor.is_mounted:
            await pilot.pause(0.05)
{then}

asyncio.run(main())
"""


def remove_tree(folder: Path) -> None:
    """Remove a run directory its recorder is writing (a file it renames away while rmtree lists it is tried
    again: rmtree alone failed with 'Directory not empty')."""
    while folder.exists():
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def box_lock(name: str) -> Iterator[None]:
    """Hold this box's lock ``name`` (every pytest worker and session of this user): for what only one test at a time
    may run, whatever else runs side by side (an MPS control daemon: gpumon finds any that runs here)."""
    path = Path(tempfile.gettempdir()) / f"gpumon-tests-{name}-{os.getuid()}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # the lock goes with the descriptor
