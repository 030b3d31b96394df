"""The ``gpumon doctor`` subcommand's arguments; its checks (gpumon/checks/doctor.py, NVML and all) load when it runs."""

from __future__ import annotations

import argparse
import os

from gpumon.core.jobs.interpreter import ENV_PYTHON, choose


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `doctor` subcommand."""
    parser = subparsers.add_parser(
        "doctor",
        help="check NVML/driver, torch and CUDA, py-spy, ptrace and the runs directory",
        description=(
            "Check whether gpumon can do its job here: NVML and the driver (which GPU metrics "
            "are supported), torch and whether CUDA is usable (checked in a child process), "
            "py-spy and ptrace permission, and the runs directory. Exit status 0 when gpumon "
            "can run (a CPU-only machine can, with a warning), 1 with the reason otherwise. "
            "--verify also runs the built-in `h2d` job for a few seconds and checks NVML's numbers "
            "against it (docs/verify.md)."
        ),
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="run `h2d` for a few seconds and check PCIe RX, the job's PID and memory, utilisation "
        "and the monitor's own CPU against it (on a CPU-only machine: says what it cannot check)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        metavar="DEVICE",
        help="with --verify: where the job runs (auto, cuda, cuda:N; cpu runs it on the CPU and tests gpumon's "
        "pipeline only: that its steps reach the capture, the PID lookup with NVML, the monitor's cost)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument(
        "--gpu",
        type=int,
        metavar="INDEX",
        default=None,
        help="NVML index of the GPU to check (default: the first of CUDA_VISIBLE_DEVICES, else 0)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        default=None,
        help="the Python the built-in workloads would use (default: $GPUMON_PYTHON, else gpumon's own)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The handler: imports the checks only now, so other subcommands start without them; ``--verify`` is
    gpumon/checks/verify.py, which builds on the doctor's checks."""
    if args.verify:
        # deferred: +0.16 s CPU (psutil) on gpumon --help
        from gpumon.checks.verify import run_verify

        if args.python:  # the verify workloads and its torch check use it
            os.environ[ENV_PYTHON] = choose(args.python).path
        return run_verify(args)
    # deferred: +0.07 s CPU (psutil) on gpumon --help
    from gpumon.checks.doctor import run_doctor

    return run_doctor(args)
