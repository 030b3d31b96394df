"""How the two jobs share the GPU: the driver's time slicing, or NVIDIA MPS run by gpumon.

For ``--share mps`` gpumon starts its own MPS control daemon (``nvidia-cuda-mps-control -f``)
with private pipe and log directories, under a guardian process (``gpumon.core.jobs.mpsguard``) tied
to gpumon by a pipe: when gpumon ends, however it ends (``q``, Ctrl-C, SSH drop, ``kill -9``),
the pipe closes and the guardian tells the daemon to quit. ``mps:existing`` uses a daemon the
user already runs and never stops it. Details: docs/mps.md.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumon.core.jobs.interpreter import module_argv
from gpumon.core.jobs.lifeline import wait_or_kill
from gpumon.core.records.share import ShareMode
from gpumon.errors import EnvironmentFailure, UsageError

CONTROL = "nvidia-cuda-mps-control"
SERVER = "nvidia-cuda-mps-server"
DEFAULT_PIPE_DIR = Path("/tmp/nvidia-mps")
READY_TIMEOUT_S = 15.0
# A Unix socket path holds at most 107 bytes; the daemon puts "control" and more under the pipe dir.
MAX_PIPE_DIR_LEN = 80


def processes_running(program: str) -> dict[int, list[str]]:
    """PID → argv of every process on this host running ``program`` (``CONTROL``, ``SERVER``)."""
    found: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [
                a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0")
            ]
        except OSError:
            continue
        if program in [
            os.path.basename(a) for a in argv[:2]
        ]:  # argv[1] when a script runs under its interpreter
            found[int(entry.name)] = argv
    return found


def _pipe_dirs_of_running_daemons() -> list[Path]:
    """Pipe directories of the MPS control daemons running on this host (the default when unreadable)."""
    daemons = [
        pid for pid, argv in processes_running(CONTROL).items() if "-d" in argv or "-f" in argv
    ]
    return [_pipe_dir_of(Path(f"/proc/{pid}")) for pid in daemons]


def _pipe_dir_of(proc: Path) -> Path:
    try:
        environ = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return DEFAULT_PIPE_DIR
    for item in environ:
        if item.startswith(b"CUDA_MPS_PIPE_DIRECTORY="):
            return Path(item.split(b"=", 1)[1].decode(errors="replace"))
    return DEFAULT_PIPE_DIR


def existing_daemon() -> Path | None:
    """The pipe directory of an MPS daemon already running here, or None."""
    running = _pipe_dirs_of_running_daemons()
    if running:
        return running[0]
    for pipe in (os.environ.get("CUDA_MPS_PIPE_DIRECTORY"), str(DEFAULT_PIPE_DIR)):
        if pipe and (Path(pipe) / "control").exists():
            return Path(pipe)
    return None


def check_share(share: ShareMode, device: str) -> None:
    """Everything the parent can check before anything starts; UsageError with one line."""
    if not share.mps:
        return
    if device == "cpu":
        raise UsageError(
            "--share mps shares a GPU; --device cpu has none (drop --share or use --device cuda)"
        )
    if shutil.which(CONTROL) is None:
        raise UsageError(
            f"--share mps needs {CONTROL} on PATH (it comes with the NVIDIA driver's CUDA tools)"
        )
    running = existing_daemon()
    if share.existing and running is None:
        raise UsageError("--share mps:existing: no MPS control daemon is running here")
    if not share.existing and running is not None:
        raise UsageError(
            f"an MPS control daemon is already running (pipe directory {running}); use --share mps:existing "
            f"to run the jobs as its clients, or stop it first (echo quit | {CONTROL})"
        )


@dataclass
class MpsControl:
    """The MPS daemon the jobs of one session are clients of (gpumon's own, or the user's)."""

    share: ShareMode
    pipe_dir: Path | None = None
    log_dir: Path | None = None
    _guardian: subprocess.Popen | None = None
    _temp: list[Path] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, home: Path | None) -> None:
        """Start gpumon's own daemon with its directories under ``home`` (a temp dir when None)."""
        if self.share.existing:
            self.pipe_dir = existing_daemon() or DEFAULT_PIPE_DIR
            return
        if home is None:
            home = Path(tempfile.mkdtemp(prefix="gpumon-mps-"))
            self._temp.append(home)
        self.log_dir = home / "mps" / "log"
        self.pipe_dir = home / "mps" / "pipe"
        if len(str(self.pipe_dir)) > MAX_PIPE_DIR_LEN:
            self.pipe_dir = Path(tempfile.mkdtemp(prefix="gpumon-mps-pipe-"))
            self._temp.append(self.pipe_dir)
        for d in (self.log_dir, self.pipe_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._spawn_guardian()

    def _spawn_guardian(self) -> None:
        argv = [*module_argv("gpumon.core.jobs.mpsguard"), str(self.pipe_dir), str(self.log_dir)]
        argv += [
            str(temp) for temp in self._temp
        ]  # removed by the guardian once the daemon is gone
        guardian = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            text=True,
        )
        self._guardian = guardian
        answer = _read_line(guardian, READY_TIMEOUT_S)
        if answer != "ready":
            self.stop()
            reason = answer.removeprefix("error: ") or f"no answer from {CONTROL}"
            raise EnvironmentFailure(f"could not start the MPS daemon: {reason}")

    def client_env(self, index: int) -> dict[str, str]:
        """The environment that makes the job in slot ``index`` (0 or 1) a client of the daemon."""
        env = {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir)}
        if self.log_dir is not None:
            env["CUDA_MPS_LOG_DIRECTORY"] = str(self.log_dir)
        if self.share.threads:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(self.share.threads[index])
        return env

    def stop(self, timeout: float = 15.0) -> None:
        """Tell gpumon's daemon to quit and wait for it (never touches an existing daemon)."""
        with self._lock:
            guardian, self._guardian = self._guardian, None
        if guardian is None:
            return
        try:
            if guardian.stdin is not None:  # started with a pipe: always
                guardian.stdin.close()  # the lifeline: EOF tells the guardian to quit the daemon
        except OSError:
            pass
        wait_or_kill(guardian, timeout, lambda: os.killpg(guardian.pid, signal.SIGKILL))

    def to_json(self) -> dict[str, Any]:
        info = self.share.to_json()
        info["pipe_dir"] = str(self.pipe_dir) if self.pipe_dir else None
        info["log_dir"] = str(self.log_dir) if self.log_dir else None
        return info


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    """The first line ``proc`` prints, or '' if it prints none within ``timeout`` seconds."""
    result: list[str] = []
    stdout = proc.stdout
    if stdout is None:  # not started with a pipe: it cannot say anything
        return ""
    reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return result[0].strip() if result else ""
