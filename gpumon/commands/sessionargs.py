"""The options of a live session that ``gpumon run`` and ``gpumon`` alone (the monitor) share, and the
``SessionConfig`` they make: one definition, so the monitor takes what a user gives ``run`` (``--python``,
``--device``...)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpumon.commands import argtypes
from gpumon.commands.argtypes import count, whole_number
from gpumon.core.jobs.devices import check_gpu_present

if TYPE_CHECKING:
    from gpumon.core.capture.session import SessionConfig

MONITOR = "monitor_"  # the dest prefix of the monitor's own options in the main parser (a command has its own)
# (flag, add_argument keywords); the dest is the flag's name, after a prefix where one parser holds two sets
OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--device",
        dict(
            default="auto",
            metavar="DEVICE",
            help="auto (CUDA if present, else CPU), cpu, cuda or cuda:N; "
            "a GPU this machine lacks (NVML, /proc/driver/nvidia, CUDA_VISIBLE_DEVICES) is refused before anything starts",
        ),
    ),
    (
        "--python",
        dict(
            default=None,
            metavar="PATH",
            help="the Python that runs the built-in workloads, e.g. your "
            "training environment's (it needs torch, not gpumon), and a bare 'python' or 'python3' in "
            "--cmd; default: $GPUMON_PYTHON, else gpumon's own",
        ),
    ),
    (
        "--out",
        dict(
            type=Path,
            default=None,
            metavar="RUNS_DIR",
            help="where captures go (default: see below)",
        ),
    ),
    (
        "--interval",
        dict(
            type=whole_number,
            default=None,
            metavar="MS",
            help="sampling interval in ms (default: 100 where NVML's byte counters give PCIe each tick, 200 where "
            "GPM gives it once a second, 1000 without NVML: docs/nvml.md)",
        ),
    ),
    (
        "--gpu",
        dict(
            default=None,
            metavar="INDEX|UUID",
            help="GPU to sample with NVML: an index or a GPU-... UUID "
            "(default: the first of CUDA_VISIBLE_DEVICES, else 0); one NVML does not list is refused before "
            "anything starts",
        ),
    ),
    (
        "--warmup",
        dict(
            type=count, default=None, metavar="N", help="steps marked warm-up (default 5; 0: none)"
        ),
    ),
    ("--no-nvml", dict(action="store_true", help="do not load NVML")),
    (
        "--share",
        dict(
            default="timeslice",
            metavar="MODE",
            help="how the jobs share the GPU: timeslice (the driver's "
            "default: each context runs alone for a time slice), mps (gpumon starts its own NVIDIA MPS "
            "daemon; kernels of both jobs run at once), mps:threads=PCT_A,PCT_B (MPS, each job capped at "
            "that %% of the SMs), mps:existing (clients of an MPS daemon you already run)",
        ),
    ),
)


def dest(flag: str, prefix: str = "") -> str:
    return prefix + flag.lstrip("-").replace("-", "_")


def add_session_options(
    parser: "argparse.ArgumentParser | argparse._ArgumentGroup", prefix: str = ""
) -> None:
    """Add every session option to ``parser``, each stored as ``prefix`` + its name."""
    for flag, keywords in OPTIONS:
        parser.add_argument(flag, dest=dest(flag, prefix), **keywords)


def given(args: argparse.Namespace, prefix: str) -> list[str]:
    """The session options given on the command line (those that differ from their defaults)."""
    found = []
    for flag, keywords in OPTIONS:
        default = keywords.get("default", False if keywords.get("action") == "store_true" else None)
        if getattr(args, dest(flag, prefix), default) != default:
            found.append(flag)
    return found


def session_config(args: argparse.Namespace, prefix: str = "", **more: Any) -> "SessionConfig":
    """The SessionConfig of the options (GPU index checked against NVML before anything starts); ``more``: the
    fields only ``run`` has."""
    # deferred: +0.13 s CPU (psutil) on gpumon --help
    from gpumon.core.capture.session import SessionConfig
    from gpumon.core.store.runsfolder import runs_dir_or_default

    value = lambda flag: getattr(args, dest(flag, prefix))  # noqa: E731
    gpu = argtypes.gpu(value("--gpu")) if value("--gpu") is not None else None
    if gpu is not None and not value("--no-nvml"):
        check_gpu_present(gpu)
    return SessionConfig(
        share=argtypes.share(value("--share")),
        device=value("--device"),
        interval_ms=value("--interval"),
        gpu_index=gpu,
        runs_dir=runs_dir_or_default(value("--out")),
        warmup=value("--warmup"),
        nvml=not value("--no-nvml"),
        python=value("--python"),
        **more,
    )
