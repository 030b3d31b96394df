"""The calibration probe: ``python -m gpumon.workloads.sliceprobe --device DEVICE``, one of the two small processes
``gpumon calibrate`` runs side by side (gpumon.checks.calibrate).

It runs kernels of a known length and says when each ended, timed where it ran (CUDA events on a GPU), so the
parent can see the device's time slices from the gaps in one probe's kernels while the other runs. It answers
JSON lines on stdout to JSON lines on stdin:

  (start)                                      -> {"ready": true, "device": ..., "kernel_s": d}
  {"do": "spin", "kernels": N, "fill": false}  -> {"ends": [...]}: N kernels queued back to back, never letting the
                                                  device run out of this probe's work; each one's end, in seconds
                                                  on this probe's own clock ("fill": kernels that fill the SMs)
  {"do": "duty", "seconds": S, "gap_s": g}     -> {"busy_s": ..., "wall_s": ...}: one kernel, wait for it, g on the
                                                  host, again, for S seconds; the kernels' own time against the wall
  {"do": "quit"}                               -> exits

Devices: ``cuda`` / ``cuda:N`` (torch: ``torch.cuda._sleep`` spins one block for a number of clock cycles, a
matrix product fills the SMs, CUDA events time them); ``sliced:SOCKET``, a time-sliced device served on a Unix
socket (tests/fakegpu: the test suite's stand-in for a GPU, as tests/fakenvml is for NVML). A probe whose
environment leads to a running MPS daemon (``mps_client``) is that daemon's client: on CUDA the driver sees to
it; the sliced device is told.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Protocol

KERNEL_S = {
    "cuda": 100e-6,
    "sliced": 1e-3,
}  # the spin kernel: short against a time slice, long against a launch
SOLO_CALIBRATION_CYCLES = 10_000_000


class Device(Protocol):
    """Where the probe's kernels run."""

    kernel_s: float

    def spin(self, kernels: int, fill: bool) -> list[float]: ...

    def one(self) -> float: ...


class Cuda:
    """A CUDA GPU through torch: the spin kernel is ``torch.cuda._sleep`` of one block, the fill kernel a matrix
    product sized to take about as long as the spin kernel takes ten times."""

    def __init__(self, index: int) -> None:
        # deferred: the sliced stand-in (calibrate's test) runs without torch (+1.8 s CPU)
        import torch

        self.torch = torch
        torch.cuda.set_device(index)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)  # the context and the kernel loaded before anything is timed
        start.record()
        torch.cuda._sleep(SOLO_CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
        cycles_per_s = SOLO_CALIBRATION_CYCLES / (start.elapsed_time(end) / 1e3)
        self.kernel_s = KERNEL_S["cuda"]
        self.cycles = max(1, int(self.kernel_s * cycles_per_s))
        self.matrix = torch.randn(2048, 2048, device="cuda")
        torch.mm(self.matrix, self.matrix)

    def _launch(self, fill: bool) -> None:
        if fill:
            self.torch.mm(self.matrix, self.matrix)
        else:
            self.torch.cuda._sleep(self.cycles)

    def spin(self, kernels: int, fill: bool) -> list[float]:
        origin = self.torch.cuda.Event(enable_timing=True)
        origin.record()
        events = []
        for _ in range(kernels):
            self._launch(fill)
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            events.append(event)
        events[-1].synchronize()
        return [origin.elapsed_time(e) / 1e3 for e in events]

    def one(self) -> float:
        start, end = (
            self.torch.cuda.Event(enable_timing=True),
            self.torch.cuda.Event(enable_timing=True),
        )
        start.record()
        self._launch(False)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


class Sliced:
    """The time-sliced device of tests/fakegpu, a server on a Unix socket: ``hello ts|mps``, ``spin N D`` (queue N
    kernels of D seconds; answers their end times once they have all run), ``run D`` (one kernel; answers its start
    and end)."""

    def __init__(self, path: str, mps: bool) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rw", encoding="utf-8")
        self.kernel_s = KERNEL_S["sliced"]
        self._ask(f"hello {'mps' if mps else 'ts'}")

    def _ask(self, line: str) -> str:
        self.file.write(line + "\n")
        self.file.flush()
        answer = self.file.readline()
        if not answer:
            raise RuntimeError("the sliced device closed the connection")
        return answer.strip()

    def spin(self, kernels: int, fill: bool) -> list[float]:
        return [float(x) for x in self._ask(f"spin {kernels} {self.kernel_s!r}").split()]

    def one(self) -> float:
        start, end = (float(x) for x in self._ask(f"run {self.kernel_s!r}").split())
        return end - start


def mps_client() -> bool:
    """Whether CUDA would make this process an MPS client: a daemon's control pipe in the pipe directory its
    environment names (``CUDA_MPS_PIPE_DIRECTORY``, else the default ``/tmp/nvidia-mps``)."""
    return (
        Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps") / "control"
    ).exists()


def open_device(text: str) -> Device:
    """``cuda``, ``cuda:N`` or ``sliced:SOCKET`` as a Device (ValueError otherwise)."""
    kind, _, rest = text.partition(":")
    if kind == "cuda":
        return Cuda(int(rest) if rest else 0)
    if kind == "sliced" and rest:
        return Sliced(rest, mps_client())
    raise ValueError(f"unknown device {text!r} (cuda, cuda:N or sliced:SOCKET)")


def duty(device: Device, seconds: float, gap_s: float) -> dict[str, float]:
    """One kernel at a time, each followed by ``gap_s`` on the host (spun, not slept: a sleep overshoots)."""
    busy, began = 0.0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        busy += device.one()
        until = time.perf_counter() + gap_s
        while time.perf_counter() < until:
            pass
    return {"busy_s": busy, "wall_s": time.perf_counter() - began}


def serve(device: Device, commands: Any, out: Any) -> None:
    """Answer ``commands`` (JSON lines) until ``quit`` or end of input."""
    for line in commands:
        request = json.loads(line)
        if request["do"] == "quit":
            return
        if request["do"] == "spin":
            answer: dict[str, Any] = {
                "ends": device.spin(int(request["kernels"]), bool(request.get("fill")))
            }
        elif request["do"] == "duty":
            answer = duty(device, float(request["seconds"]), float(request["gap_s"]))
        else:
            answer = {"error": f"unknown request {request['do']!r}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpumon.workloads.sliceprobe", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--device", required=True, help="cuda, cuda:N or sliced:SOCKET")
    args = parser.parse_args(argv)
    try:
        device = open_device(args.device)
    except (ValueError, OSError, RuntimeError) as exc:
        print(json.dumps({"ready": False, "error": str(exc)}), flush=True)
        return 1
    print(
        json.dumps({"ready": True, "device": args.device, "kernel_s": device.kernel_s}), flush=True
    )
    serve(device, sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
