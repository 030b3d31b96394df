"""A time-sliced stand-in for a GPU's scheduler (server.py), for ``gpumon calibrate``'s probes on a box without one.

``serve(path, ...)`` starts it in its own process and yields its socket; it ends when the block does (its stdin
closes), and with the test process in any case.
"""

from __future__ import annotations

import socket as sockets
import statistics
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def serve(
    socket: Path, slice_ms: float = 30.0, switch_ms: float = 3.0, mps_fill: float = 0.6
) -> Iterator[Path]:
    """The fake time-sliced device listening on ``socket`` while the block runs."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakegpu.server",
            str(socket),
            "--slice-ms",
            str(slice_ms),
            "--switch-ms",
            str(switch_ms),
            "--mps-fill",
            str(mps_fill),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield socket
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def median_switch_s(socket: Path) -> float:
    """The median wall time of the device's switches so far, on its own clock (server.py: the scripted cost plus
    what the machine's load added): what a measured switch cost must match."""
    return _median(socket, "switches")


def median_slice_s(socket: Path) -> float:
    """The median slice the device's contexts held while the other waited, on its own clock (the scripted slice
    plus how late a loaded machine woke its scheduler): what a measured slice must match."""
    return _median(socket, "slices")


def _median(socket: Path, what: str) -> float:
    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as conn:
        conn.connect(str(socket))
        stream = conn.makefile("rw", encoding="utf-8")
        stream.write(what + "\n")
        stream.flush()
        return statistics.median(float(x) for x in stream.readline().split())
