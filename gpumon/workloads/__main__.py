"""Child program: ``python -m gpumon.workloads NAME --device auto|cpu|cuda[:N] [--opt key=value ...]``."""

from __future__ import annotations

import argparse
import os
import sys

from gpumon.core.probing.probe import ENV_WARMUP
from gpumon.errors import UsageError
from gpumon.workloads.signals import StopRequest
from gpumon.workloads.spec import (
    OPTIONS,
    WORKLOADS,
    WorkloadSpec,
    format_cpus,
    spec_from_options,
    split_option,
)
from gpumon.workloads.settings import resolve


def parse_args(argv: list[str]) -> tuple[WorkloadSpec, str]:
    parser = argparse.ArgumentParser(
        prog="python -m gpumon.workloads",
        description="Run one built-in training workload, reporting every step to gpumon's probe.",
        epilog="workloads: " + ", ".join(WORKLOADS) + "; options: " + ", ".join(OPTIONS),
    )
    parser.add_argument("name", help="the workload")
    parser.add_argument(
        "--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N"
    )
    parser.add_argument(
        "--opt", action="append", default=[], metavar="KEY=VALUE", help="a workload option"
    )
    args = parser.parse_args(argv)
    return spec_from_options(args.name, [split_option(item) for item in args.opt]), args.device


def pin_cpus(cpus: tuple[int, ...]) -> None:
    """Restrict this process (and the threads and workers it starts later) to ``cpus``."""
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        available = format_cpus(os.sched_getaffinity(0))
        raise UsageError(
            f"cannot run on cpus={format_cpus(cpus)}: {exc.strerror} (available: {available})"
        ) from None


def main(argv: list[str]) -> int:
    stop = StopRequest()
    stop.install()
    try:
        spec, device = parse_args(argv)
        cpus = spec.options.get("cpus")
        if isinstance(cpus, tuple):
            pin_cpus(cpus)
        # after pin_cpus (torch's threads inherit the affinity); a bad spec is said without torch's 1.8 s CPU
        import torch

        settings = resolve(spec, device, torch.cuda.is_available())
    except UsageError as exc:
        print(f"gpumon.workloads: error: {exc}", file=sys.stderr)
        return 2
    os.environ[ENV_WARMUP] = str(settings.warmup)
    # the harness imports torch: after pin_cpus too
    from gpumon.workloads.harness import run

    run(settings, spec.text, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
