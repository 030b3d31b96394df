"""Whether a requested CUDA device exists here, decided before anything starts and without torch.

The parent counts the NVIDIA GPUs through NVML (pynvml), else the entries of
``/proc/driver/nvidia/gpus/``, then applies ``CUDA_VISIBLE_DEVICES`` the way CUDA does: the
listed devices are renumbered from 0, and the list ends at its first invalid entry. ``cuda:N``
is accepted when N is below the number of visible devices. When the GPUs cannot be counted (a
driver is there but neither NVML nor ``/proc`` answers) nothing is refused: the job itself
will say.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from gpumon.errors import UsageError

PROC_DRIVER = Path("/proc/driver/nvidia")
UUID_PREFIXES = ("GPU-", "MIG-")
NO_DRIVER = "no NVIDIA driver: NVML does not load and there is no /proc/driver/nvidia"


@dataclass(frozen=True)
class GpuCount:
    """How many NVIDIA GPUs this machine has (None: cannot tell), and how that was found out."""

    count: int | None
    source: str


def count_gpus(use_nvml: bool = True, proc_driver: Path = PROC_DRIVER) -> GpuCount:
    """NVML's device count, else the GPUs listed under ``/proc/driver/nvidia/gpus``."""
    if use_nvml:
        try:
            # deferred: +0.01 s CPU on gpumon --help, which must not load pynvml (test_import_contract)
            import pynvml

            pynvml.nvmlInit()
            try:
                return GpuCount(int(pynvml.nvmlDeviceGetCount()), "NVML")
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - any NVML failure (no library, no driver): ask /proc instead
            pass
    gpus = proc_driver / "gpus"
    if gpus.is_dir():
        return GpuCount(sum(1 for _ in gpus.iterdir()), str(gpus))
    if proc_driver.exists():
        return GpuCount(None, f"{proc_driver} without gpus/")
    return GpuCount(0, NO_DRIVER)


def visible_gpus(physical: int, env: Mapping[str, str]) -> int:
    """How many devices CUDA numbers from 0 under ``CUDA_VISIBLE_DEVICES`` (all when unset).

    Entries are indices or ``GPU-``/``MIG-`` UUIDs (counted as valid: NVML is not asked to match
    prefixes); the list ends at the first entry that is not a valid, unrepeated index.
    """
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return physical
    visible = 0
    seen: set[str] = set()
    for entry in (e.strip() for e in raw.split(",")):
        valid = entry.startswith(UUID_PREFIXES) or (entry.isdigit() and int(entry) < physical)
        if not valid or entry in seen:
            break
        seen.add(entry)
        visible += 1
    return visible


def check_device_present(
    device: str, use_nvml: bool = True, env: Mapping[str, str] | None = None
) -> None:
    """Raise UsageError (one line) when ``device`` names a CUDA device this machine does not have."""
    if not device.startswith("cuda"):
        return
    env = os.environ if env is None else env
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    found = count_gpus(use_nvml)
    if found.count is None:
        return
    visible = visible_gpus(found.count, env)
    if index < visible:
        return
    masked = "CUDA_VISIBLE_DEVICES" in env and visible < found.count
    mask = f", CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}" if masked else ""
    if visible == 0:
        why = (
            NO_DRIVER
            if found.source == NO_DRIVER
            else f"{found.count} GPU(s) found by {found.source}{mask}"
        )
        raise UsageError(
            f"device {device} is not here: no CUDA GPU visible ({why}); use --device cpu or auto"
        )
    raise UsageError(
        f"device {device} is not here: {visible} GPU(s) visible, cuda:0 to cuda:{visible - 1} "
        f"(found by {found.source}{mask})"
    )


def check_gpu_present(gpu: int | str) -> None:
    """Raise UsageError (one line) when NVML answers and has no GPU ``gpu``; nothing when NVML does not load."""
    try:
        # deferred: +0.01 s CPU on gpumon --help, which must not load pynvml (test_import_contract)
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver: the sampler says "NVML unavailable"
        return
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        listing = f"{count} GPU(s) found by NVML" + (f": 0 to {count - 1}" if count else "")
        if isinstance(gpu, int):
            if gpu < count:
                return
            raise UsageError(f"--gpu {gpu}: this machine has no GPU {gpu} ({listing})")
        try:
            pynvml.nvmlDeviceGetHandleByUUID(gpu)
        except pynvml.NVMLError:
            raise UsageError(
                f"--gpu {gpu}: no GPU with that UUID here ({listing}; nvidia-smi -L lists them)"
            ) from None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down a library that answered: nothing to report
            pass
