"""Which device an experiment runs on, decided without importing torch in this process."""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path


NVIDIA_NODES = (Path("/dev/nvidiactl"), Path("/proc/driver/nvidia"))
PROBE_TIMEOUT_S = 120
PROBE = "import torch; print(int(torch.cuda.is_available()), torch.cuda.device_count())"


@dataclass(frozen=True)
class CudaStatus:
    """Whether torch sees a CUDA device here, and why not when it does not."""

    available: bool
    reason: str


@functools.cache
def cuda_status(python: str) -> CudaStatus:
    """Ask the workloads' Python, ``python`` (torch would cost this process 2 s and 600 MB); skipped when no NVIDIA
    driver."""
    if not any(p.exists() for p in NVIDIA_NODES):
        return CudaStatus(False, "no NVIDIA driver on this machine")
    try:
        done = subprocess.run(
            [python, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return CudaStatus(False, f"torch did not answer within {PROBE_TIMEOUT_S} s")
    fields = done.stdout.split()
    if done.returncode != 0 or len(fields) != 2:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return CudaStatus(False, f"torch could not be asked ({last})")
    if fields[0] != "1":
        return CudaStatus(
            False, "torch.cuda.is_available() is False (CPU-only torch build or no usable GPU)"
        )
    return CudaStatus(True, f"{fields[1]} CUDA device(s)")


def resolve_device(requested: str, python: str) -> str:
    """``auto`` becomes ``cuda:0`` or ``cpu`` (as the workloads' Python, ``python``, sees CUDA); ``cuda`` becomes
    ``cuda:0``; others stay."""
    if requested == "auto":
        return "cuda:0" if cuda_status(python).available else "cpu"
    if requested == "cuda":
        return "cuda:0"
    return requested
