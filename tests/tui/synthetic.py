"""Deterministic run directories in the documented trace format (docs/trace.md), for replay tests."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

from gpumon.core.model import DEVICE_COLUMNS, HOST_COLUMNS, PROCESS_COLUMNS, STEP_COLUMNS

TICK_S = 0.5
GPU = {
    "index": 0,
    "name": "NVIDIA A100-SXM4-40GB (simulated)",
    "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "driver": "550.54.15",
    "pcie_gen": 4,
    "pcie_width": 16,
    "pcie_method": "counters",
}


@dataclass(frozen=True)
class Job:
    """A workload: ``alone_s`` steps per second until ``shared_from``, ``shared_s`` after it."""

    slot: str
    spec: str
    start: float
    stop: float
    alone: float
    shared: float
    shared_from: float
    exit_status: int = 0
    warmup: int = 5
    batch: int = 64
    copy_bytes: int = 200_704
    log: tuple[str, ...] = ()

    def steps(self) -> list[list[object]]:
        rows: list[list[object]] = []
        t = self.start + 0.6
        n = 0
        while t < self.stop:
            warm = n < self.warmup
            rate = self.alone if t < self.shared_from else self.shared
            iter_s = 0.2 if warm else 1.0 / rate
            t = round(t + iter_s, 6)
            if t > self.stop:
                break
            copy_s = self.copy_bytes / 12e9 if self.copy_bytes else ""
            rows.append([self.slot, 1000 + ord(self.slot), n, t, iter_s, self.batch, int(warm), self.copy_bytes, copy_s])
            n += 1
        return rows


def _write(path: Path, columns: tuple[str, ...], rows: list[list[object]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)


def _wave(t: float, low: float, high: float, period: float = 7.0) -> float:
    return round(low + (high - low) * (0.5 + 0.5 * math.sin(2 * math.pi * t / period)), 3)


def write_run(
    root: Path,
    jobs: tuple[Job, ...],
    *,
    gpu: bool = False,
    label: str = "synthetic",
    stagger_s: float = 0.0,
    status: str = "complete",
) -> Path:
    """Write run.json, the four tables and the logs of ``jobs``; a GPU run gets device rows too."""
    (root / "logs").mkdir(parents=True, exist_ok=True)
    end = max(job.stop for job in jobs)
    steps = sorted((row for job in jobs for row in job.steps()), key=lambda r: (r[3], r[0]))
    _write(root / "steps.csv", STEP_COLUMNS, steps)
    ticks = [round(i * TICK_S, 3) for i in range(int(end / TICK_S) + 1)]
    device = []
    if gpu:
        for t in ticks:
            busy = sum(1 for job in jobs if job.start <= t <= job.stop)
            device.append(
                [t, _wave(t, 35, 60) + 30 * (busy > 1), _wave(t, 10, 30), 6000 + 9000 * busy, 40960,
                 _wave(t, 2e9, 6e9) * busy, _wave(t, 1e8, 3e8), _wave(t, 90, 180) + 60 * busy, 55 + 5 * busy, 1410,
                 _wave(t, 20, 45) * busy, _wave(t, 5, 15) * busy, _wave(t, 10, 30) * busy, _wave(t, 0, 20) * busy]
            )
    _write(root / "device.csv", DEVICE_COLUMNS, device)
    processes = [
        [t, job.slot, 1000 + ord(job.slot), 98.5, 700.0, 12, 2100.0 if gpu else "", 45.0 if gpu else ""]
        for t in ticks
        for job in jobs
        if job.start <= t <= job.stop
    ]
    _write(root / "processes.csv", PROCESS_COLUMNS, processes)
    host = [[t, _wave(t, 40, 95), 4600.0, 24000.0] for t in ticks]
    _write(root / "host.csv", HOST_COLUMNS, host)
    for job in jobs:
        (root / "logs" / f"{job.slot}.out").write_text("".join(line + "\n" for line in job.log), encoding="utf-8")
    meta = {
        "schema": 1,
        "label": label,
        "mode": "shared" if len(jobs) > 1 else "exclusive",
        "status": status,
        "started_at": "2026-11-22T11:40:00.000Z",
        "t0_monotonic_ns": 1_000_000_000,
        "duration_s": end,
        "interval_ms": int(TICK_S * 1000),
        "device": "cuda" if gpu else "cpu",
        "host": {"hostname": "testhost", "cpus": 2, "mem_total_mib": 24000},
        "gpu": GPU if gpu else None,
        "nvml": {"available": gpu, "reason": "" if gpu else "unavailable: libnvidia-ml.so.1 not found (no NVIDIA driver)"},
        "versions": {"python": "3.11.7", "gpumon": "0.1.0", "torch": "2.4.0", "driver": GPU["driver"] if gpu else None},
        "stagger_s": stagger_s,
        "capture_start_t": 0.0,
        "workloads": [
            {
                "process": job.slot,
                "spec": job.spec,
                "kind": "builtin",
                "argv": [],
                "pid": 1000 + ord(job.slot),
                "start_t": job.start,
                "stop_t": job.stop,
                "exit_status": job.exit_status,
                "state": "exited",
                "tail": "\n".join(job.log[-5:]),
                "meta": {"model": job.spec.split(":")[0], "batch": job.batch},
            }
            for job in jobs
        ],
    }
    (root / "run.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return root


def staggered_pair(root: Path, *, gpu: bool = False, crash_b: bool = False) -> Path:
    """A alone for 10 s, then A and B together until 60 s (B crashes at 40 s with ``crash_b``)."""
    a = Job("A", "fcn:preset=tiny", 0.0, 60.0, alone=40.0, shared=28.0, shared_from=10.0,
            log=("gpumon.workloads: training fcn (preset tiny, batch 64) on " + ("cuda" if gpu else "cpu"),))
    b_log = ("gpumon.workloads: training gemm (preset tiny, batch 256) on " + ("cuda" if gpu else "cpu"),)
    if crash_b:
        b_log += ("Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
                  "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
    b = Job("B", "gemm:preset=tiny", 10.0, 40.0 if crash_b else 60.0, alone=25.0, shared=19.0, shared_from=0.0,
            exit_status=1 if crash_b else 0, batch=256, copy_bytes=0, log=b_log)
    return write_run(root, (a, b), gpu=gpu, label="fcn-gemm", stagger_s=10.0)


def exclusive(root: Path, slot: str = "A", rate: float = 40.0, spec: str = "fcn:preset=tiny") -> Path:
    """One job alone for 20 s at ``rate`` steps per second."""
    job = Job(slot, spec, 0.0, 20.0, alone=rate, shared=rate, shared_from=99.0)
    return write_run(root, (job,), label=f"{spec.split(':')[0]}-alone")
