"""The one training loop every built-in workload runs in, reporting each step through the probe."""

from __future__ import annotations

import os
import platform
import random
import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gpumon.core.probing import probe
from gpumon.workloads.inputs import BatchSource, DiskSource, HostBatch, SyntheticSource
from gpumon.workloads.models import Task, build_task
from gpumon.workloads.settings import Settings
from gpumon.workloads.sgd import MomentumSGD
from gpumon.workloads.signals import StopRequest
from gpumon.workloads.spec import format_cpus


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def configure_device(settings: Settings) -> torch.device:
    """Select the device, cap its memory if asked, and set the CPU thread count."""
    device = torch.device(settings.device)
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        if settings.memory_fraction is not None:
            torch.cuda.set_per_process_memory_fraction(settings.memory_fraction, device)
        if settings.name == "gemm":
            torch.set_float32_matmul_precision("high")
    return device


def open_source(settings: Settings, task: Task) -> BatchSource | None:
    """The host batch source of the run, or None when the task reads no input (gemm)."""
    if not task.fields:
        return None
    if settings.input == "disk":
        return DiskSource.create(
            settings.name,
            task.fields,
            settings.batch,
            settings.seed,
            settings.workers,
            settings.pin,
            task.sequential,
        )
    return SyntheticSource.create(task.fields, settings.batch, settings.seed, settings.pin)


def copy_bytes_per_step(settings: Settings, task: Task) -> int:
    """Bytes each step copies to the device: the whole batch as trained on (0 for gemm)."""
    return settings.batch * sum(f.tensor_bytes for f in task.fields)


def describe(
    settings: Settings, spec_text: str, task: Task, device: torch.device, copy_bytes: int
) -> dict[str, Any]:
    """The ``meta`` message: what runs, where, with which resolved options."""
    cuda_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    info: dict[str, Any] = {
        "model": settings.name,
        "spec": spec_text,
        "device": settings.device,
        "cuda_device": cuda_name,
        "preset": settings.preset,
        "batch": settings.batch,
        "sizes": settings.sizes,
        "input": settings.input,
        "workers": settings.workers if settings.input == "disk" else 0,
        "pin": settings.pin,
        "seed": settings.seed,
        "steps": settings.steps,
        "duration": settings.duration,
        "warmup": settings.warmup,
        "threads": torch.get_num_threads(),
        "cpus": format_cpus(settings.cpus) if settings.cpus else None,
        "affinity": sorted(os.sched_getaffinity(0)),
        "memory_fraction": settings.memory_fraction,
        "parameters": sum(p.numel() for p in task.model.parameters()),
        "copy_bytes_per_step": copy_bytes,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "ignored": settings.ignored,
    }
    if settings.name == "gemm":
        info["matmul_precision"] = torch.get_float32_matmul_precision()
    return info


def start_line(settings: Settings, task: Task, parameters: int) -> str:
    """The one line printed to stdout when training starts."""
    threads = torch.get_num_threads()
    where = settings.device
    if settings.device == "cpu":
        where += f" with {threads} thread{'s' if threads != 1 else ''}"
    data = f"{settings.input} input" if task.fields else "no input"
    until = [f"{settings.steps} steps"] if settings.steps else []
    until += [f"{settings.duration:g} s"] if settings.duration else []
    return (
        f"gpumon.workloads: training {settings.name} (preset {settings.preset}, batch {settings.batch}, {data}, "
        f"{parameters:,} parameters) on {where}, until {' or '.join(until) or 'stopped'}"
    )


class Trainer:
    """Moves host batches into preallocated device tensors and takes optimizer steps."""

    def __init__(self, task: Task, device: torch.device) -> None:
        self.task = task
        self.device = device
        self.model = task.model.to(device).train()
        self.optimizer = MomentumSGD(self.model.parameters(), lr=task.lr, momentum=task.momentum)
        self.inputs: list[Tensor] = []

    def copy_in(self, batch: HostBatch) -> None:
        """Copy a host batch into the preallocated device tensors, timed by the probe."""
        if not self.inputs:
            self.inputs = [torch.empty_like(t, device=self.device) for t in batch]
        nbytes = sum(t.numel() * t.element_size() for t in batch)
        with probe.copy(nbytes, str(self.device)):
            for target, source in zip(self.inputs, batch):
                target.copy_(source, non_blocking=True)

    def train_step(self) -> None:
        loss = self.task.loss(self.model, self.inputs)
        self.optimizer.zero_grad()
        loss.backward()
        if self.task.clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.task.clip)
        self.optimizer.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def limit_reached(settings: Settings, step: int, started: float) -> bool:
    """True once ``steps`` steps are done or ``duration`` seconds have passed since ``started``."""
    if settings.steps is not None and step >= settings.steps:
        return True
    return settings.duration is not None and time.monotonic() - started >= settings.duration


def timed_step(trainer: "Trainer", source: Any, settings: Settings, step: int) -> None:
    """One step (copy the next batch in, train), timed and reported to the probe."""
    began = time.perf_counter()
    if source is not None:
        trainer.copy_in(source.next_batch())
    trainer.train_step()
    probe.step(settings.batch, iter_s=time.perf_counter() - began, warmup=step < settings.warmup)


def run(settings: Settings, spec_text: str, stop: StopRequest) -> None:
    """Train until ``steps``, ``duration`` or a stop signal (after the current step); report every step."""
    seed_everything(settings.seed)
    device = configure_device(settings)
    task = build_task(settings.name, settings.sizes, settings.seed)
    trainer = Trainer(task, device)
    source = open_source(settings, task)
    try:
        info = describe(settings, spec_text, task, device, copy_bytes_per_step(settings, task))
        probe.meta(**info)
        print(start_line(settings, task, info["parameters"]), flush=True)
        started = time.monotonic()
        step = 0
        while not stop.requested and not limit_reached(settings, step, started):
            timed_step(trainer, source, settings, step)
            step += 1
    finally:
        if source is not None:
            source.close()
        probe.flush()
