"""Turn a workload spec and ``--device`` into the concrete settings of one run (no torch import)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from gpumon.core.probing.probe import DEFAULT_WARMUP_STEPS, ENV_WARMUP
from gpumon.errors import UsageError
from gpumon.workloads.spec import DEVICE_PATTERN, PRESETS, WORKLOADS_WITHOUT_INPUT, WorkloadSpec

ENV_DEFAULT_THREADS = "GPUMON_DEFAULT_THREADS"
DEFAULT_WORKERS = 2


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, defaults filled in; ``ignored`` maps options without effect to why."""

    name: str
    device: str
    preset: str
    sizes: dict[str, int | float]
    batch: int
    threads: int | None
    cpus: tuple[int, ...] | None
    memory_fraction: float | None
    input: str
    workers: int
    pin: bool
    seed: int
    steps: int | None
    duration: float | None
    warmup: int
    ignored: dict[str, str] = field(default_factory=dict)


def resolve_device(requested: str, cuda_available: bool) -> str:
    """``auto`` becomes ``cuda:0`` or ``cpu``; ``cuda`` becomes ``cuda:0``; CUDA must exist if asked for."""
    if not DEVICE_PATTERN.fullmatch(requested):
        raise UsageError(f"unknown device '{requested}' (choose from auto, cpu, cuda, cuda:N)")
    if requested == "auto":
        return "cuda:0" if cuda_available else "cpu"
    if requested == "cpu":
        return "cpu"
    if not cuda_available:
        raise UsageError(
            f"device '{requested}' asked for, but CUDA is not available here (use --device cpu or auto)"
        )
    return requested if ":" in requested else "cuda:0"


def default_threads(env: Mapping[str, str]) -> int | None:
    """Threads the monitor asks CPU workloads to use (``GPUMON_DEFAULT_THREADS``), if any."""
    raw = env.get(ENV_DEFAULT_THREADS)
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) <= 0:
        raise UsageError(f"{ENV_DEFAULT_THREADS}='{raw}' is not an integer > 0")
    return int(raw)


def default_warmup(env: Mapping[str, str]) -> int:
    """``GPUMON_WARMUP`` when it is a valid count (as the probe reads it), else the probe's default."""
    raw = env.get(ENV_WARMUP, "")
    return int(raw) if raw.isdigit() else DEFAULT_WARMUP_STEPS


def option(spec: WorkloadSpec, key: str, default: Any) -> Any:
    """A spec option (already typed by the parser), or ``default`` when not given."""
    return spec.options.get(key, default)


def resolve(
    spec: WorkloadSpec,
    requested_device: str,
    cuda_available: bool,
    env: Mapping[str, str] = os.environ,
) -> Settings:
    """The settings of running ``spec`` on ``requested_device``."""
    options = spec.options
    device = resolve_device(requested_device, cuda_available)
    on_cuda = device.startswith("cuda")
    preset: str = option(spec, "preset", "paper" if on_cuda else "tiny")
    batch = int(option(spec, "batch", PRESETS[preset][spec.name]["batch"]))
    threads: int | None = option(spec, "threads", None)
    if threads is None and not on_cuda:
        threads = default_threads(env)
    ignored: dict[str, str] = {}
    if "memory_fraction" in options and not on_cuda:
        ignored["memory_fraction"] = "only applies to CUDA devices"
    if options.get("pin") and not on_cuda:
        ignored["pin"] = "pinned host memory needs CUDA"
    if "workers" in options and options.get("input", "synthetic") != "disk":
        ignored["workers"] = "only used with input=disk"
    if "pin" in options and spec.name in WORKLOADS_WITHOUT_INPUT:
        ignored["pin"] = f"{spec.name} copies no input"
    return Settings(
        name=spec.name,
        device=device,
        preset=preset,
        sizes={**PRESETS[preset][spec.name], "batch": batch},
        batch=batch,
        threads=threads,
        cpus=option(spec, "cpus", None),
        memory_fraction=option(spec, "memory_fraction", None) if on_cuda else None,
        input=option(spec, "input", "synthetic"),
        workers=option(spec, "workers", DEFAULT_WORKERS),
        pin=option(spec, "pin", True) and on_cuda and spec.name not in WORKLOADS_WITHOUT_INPUT,
        seed=option(spec, "seed", 0),
        steps=option(spec, "steps", None),
        duration=option(spec, "duration", None),
        warmup=option(spec, "warmup", default_warmup(env)),
        ignored=ignored,
    )
