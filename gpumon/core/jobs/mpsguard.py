"""Guardian of gpumon's MPS daemon: ``python -m gpumon.core.jobs.mpsguard PIPE_DIR LOG_DIR [TEMP_DIR...]``.

Starts ``nvidia-cuda-mps-control -f`` (foreground, so it stays this process's child) with the
private directories, prints ``ready`` once its control socket exists (or ``error: ...``), then
waits for end-of-file on stdin: gpumon holds the other end, so EOF comes when gpumon closes it
or dies in any way, ``kill -9`` included. Then it sends ``quit`` to the daemon as a client
would, waits for it, kills whatever of its process tree is left, removes the emptied pipe
directory and gpumon's temporary directories, and exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from gpumon.core.jobs.mps import CONTROL, READY_TIMEOUT_S
from gpumon.safewrite import open_append

QUIT_TIMEOUT_S = 10.0
READY_POLL_S = 0.02


def _say(text: str) -> None:
    try:
        print(text, flush=True)
    except OSError:
        pass  # gpumon is gone; carry on cleaning up


def _wait_ready(control: subprocess.Popen, socket: Path, log: Path) -> str:
    """'ready' once the control socket exists, else why not (the daemon's last words)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if socket.exists():
            return "ready"
        if control.poll() is not None:
            last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][
                -1:
            ]
            reason = f": {last[0].strip()}" if last else ""
            return f"error: {CONTROL} exited with status {control.returncode}{reason}"
        time.sleep(READY_POLL_S)  # the daemon offers no readiness event but its socket
    return f"error: {CONTROL} did not create {socket} within {READY_TIMEOUT_S:.0f} s"


def _quit(env: dict[str, str], control: subprocess.Popen) -> None:
    if control.poll() is None:
        try:
            subprocess.run(
                [CONTROL],
                input="quit\n",
                text=True,
                env=env,
                timeout=QUIT_TIMEOUT_S,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            control.wait(QUIT_TIMEOUT_S)
        except (subprocess.TimeoutExpired, OSError):
            pass
    for proc in psutil.Process().children(recursive=True):  # the daemon or an orphaned server
        try:
            proc.kill()
        except psutil.Error:
            pass
    if control.poll() is None:
        control.wait()


def main(argv: list[str]) -> int:
    pipe_dir, log_dir = Path(argv[0]), Path(argv[1])
    env = {
        **os.environ,
        "CUDA_MPS_PIPE_DIRECTORY": str(pipe_dir),
        "CUDA_MPS_LOG_DIRECTORY": str(log_dir),
    }
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # only EOF on stdin ends the guardian, after cleanup
    log_path = log_dir / "gpumon-control.out"
    with open_append(log_path, binary=True) as log:
        try:
            control = subprocess.Popen(
                [CONTROL, "-f"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        except OSError as exc:
            _say(f"error: cannot run {CONTROL}: {exc.strerror or exc}")
            return 1
    gone = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.read()
        gone.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    answer = _wait_ready(control, pipe_dir / "control", log_path)
    _say(answer)
    if answer == "ready":
        gone.wait()
    _quit(env, control)
    _tidy(pipe_dir, [Path(t) for t in argv[2:]])
    return 0 if answer == "ready" else 1


def _tidy(pipe_dir: Path, temps: list[Path]) -> None:
    """Remove the pipe directory once empty (the logs stay with the run) and gpumon's temp dirs."""
    try:
        pipe_dir.rmdir()
    except OSError:
        pass  # not empty or already gone: leave it
    for temp in temps:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
