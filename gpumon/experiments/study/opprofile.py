"""Child program: a built-in workload trained under torch.profiler for a window of steps.

``python -m gpumon.experiments.study.opprofile SPEC --device D --out FILE --start-when GO [--steps N] [--window S]``

Builds and trains the workload with gpumon's own harness. Once the file GO exists (the experiment's
CellRun creates it when every job of the cell is past its warm-up, so both jobs of a shared cell are
profiled while they run together), it profiles N steps, at most S seconds, writes each operator's
call count and self CPU and device time as JSON (atomically), then keeps training until stopped so
a co-resident job keeps its contention. Run under ``gpumon run --cmd "python -I -m ..."``: ``-I``
keeps the auto-probe off the path, and every step and copy reaches gpumon through the probe API,
as in the built-in harness.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumon.core.probing.probe import ENV_WARMUP
from gpumon.core.store.recorder import write_json_atomic
from gpumon.errors import UsageError
from gpumon.workloads.signals import StopRequest
from gpumon.workloads.spec import WorkloadSpec, parse_workload_spec
from gpumon.core.probing import probe
from gpumon.workloads.settings import resolve
from gpumon.workloads.__main__ import pin_cpus

FORMAT = 1
DEVICE_TIME_NOTE = (
    "device times need CUDA (torch.profiler's CUDA activity); this run was on the CPU"
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gpumon.experiments.study.opprofile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("spec", help="built-in workload spec, e.g. fcn:preset=tiny")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument(
        "--start-when", type=Path, required=True, metavar="FILE", help="profile once FILE exists"
    )
    parser.add_argument("--steps", type=int, default=50, help="steps to profile (default 50)")
    parser.add_argument(
        "--window", type=float, default=10.0, help="profile at most this many seconds"
    )
    return parser.parse_args(argv)


def operator_rows(key_averages: Any) -> list[dict[str, Any]]:
    """Per operator: calls, self CPU µs and self device µs (summed over the profiled steps)."""
    rows = []
    for event in key_averages:
        device_us = getattr(event, "self_device_time_total", None)
        if device_us is None:
            device_us = getattr(event, "self_cuda_time_total", 0.0)
        rows.append(
            {
                "name": event.key,
                "calls": int(event.count),
                "self_cpu_us": float(event.self_cpu_time_total),
                "self_device_us": float(device_us or 0.0),
            }
        )
    return sorted(rows, key=lambda r: r["self_cpu_us"], reverse=True)


@dataclass
class ProfileWindow:
    """The one window of steps profiled: it opens once ``--start-when``'s file exists and closes after
    ``--steps`` steps or ``--window`` seconds (or at the stop, truncated), writing its result then."""

    args: argparse.Namespace
    spec: WorkloadSpec
    device: str
    activities: list[Any]
    profiler: Any = None
    steps: int = 0
    began_ns: int = 0
    written: bool = False

    def before_step(self) -> None:
        if self.profiler is None and not self.written and self.args.start_when.exists():
            # torch only in train(), after main's pin_cpus (its threads inherit the affinity)
            from torch.profiler import profile

            self.profiler = profile(activities=self.activities)
            self.profiler.start()
            self.began_ns = time.monotonic_ns()

    def after_step(self) -> None:
        if self.profiler is None:
            return
        self.steps += 1
        if (
            self.steps >= self.args.steps
            or time.monotonic_ns() - self.began_ns >= self.args.window * 1e9
        ):
            self.close(truncated=False)

    def close(self, truncated: bool) -> None:
        """Stop profiling and write what the window holds (nothing when none is open)."""
        if self.profiler is None:
            return
        self.profiler.stop()
        write_result(
            self.args,
            self.spec,
            self.device,
            self.profiler,
            self.steps,
            self.began_ns,
            truncated=truncated,
        )
        self.profiler, self.written = None, True


def train(spec: WorkloadSpec, args: argparse.Namespace, stop: StopRequest) -> int:
    # after main's pin_cpus: torch's threads inherit the affinity
    import torch
    from torch.profiler import ProfilerActivity

    from gpumon.workloads.harness import (
        Trainer,
        configure_device,
        copy_bytes_per_step,
        describe,
        open_source,
        seed_everything,
        timed_step,
    )
    from gpumon.workloads.models import build_task

    settings = resolve(spec, args.device, torch.cuda.is_available())
    os.environ[ENV_WARMUP] = str(settings.warmup)
    seed_everything(settings.seed)
    device = configure_device(settings)
    task = build_task(settings.name, settings.sizes, settings.seed)
    trainer = Trainer(task, device)
    source = open_source(settings, task)
    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    copy_bytes = copy_bytes_per_step(settings, task)
    probe.meta(**describe(settings, spec.text, task, device, copy_bytes), profiler="torch.profiler")
    print(
        f"gpumon.experiments.study.opprofile: training {spec.text} on {settings.device}; profiling when {args.start_when} exists",
        flush=True,
    )
    window = ProfileWindow(args, spec, settings.device, activities)
    step = 0
    try:
        while not stop.requested:
            window.before_step()
            timed_step(trainer, source, settings, step)
            step += 1
            window.after_step()
        window.close(truncated=True)
    finally:
        if source is not None:
            source.close()
        probe.flush()
    return 0


def write_result(
    args: argparse.Namespace,
    spec: WorkloadSpec,
    device: str,
    profiler: Any,
    steps: int,
    began_ns: int,
    truncated: bool,
) -> None:
    # torch only in train(), after main's pin_cpus (its threads inherit the affinity)
    import torch

    ended_ns = time.monotonic_ns()
    on_cuda = device.startswith("cuda")
    write_json_atomic(
        args.out,
        {
            "format": FORMAT,
            "spec": spec.text,
            "model": spec.name,
            "device": device,
            "torch": torch.__version__,
            "steps": steps,
            "started_ns": began_ns,
            "ended_ns": ended_ns,
            "seconds": (ended_ns - began_ns) / 1e9,
            "truncated": truncated,
            "device_times": on_cuda,
            "device_note": None if on_cuda else DEVICE_TIME_NOTE,
            "ops": operator_rows(profiler.key_averages()),
        },
    )
    print(
        f"gpumon.experiments.study.opprofile: profiled {steps} steps, wrote {args.out}", flush=True
    )


def main(argv: list[str]) -> int:
    stop = StopRequest()
    stop.install()
    args = parse_args(argv)
    try:
        if args.steps <= 0 or args.window <= 0:
            raise UsageError("--steps and --window must be positive")
        spec = parse_workload_spec(args.spec)
        cpus = spec.options.get("cpus")
        if isinstance(cpus, tuple):
            pin_cpus(cpus)
        return train(spec, args, stop)
    except UsageError as exc:
        print(f"gpumon.experiments.study.opprofile: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
