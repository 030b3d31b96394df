"""Synthetic run directories in the documented trace format (docs/trace.md), with known answers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from gpumon.core.model import DEVICE_COLUMNS, HOST_COLUMNS, PROCESS_COLUMNS, STEP_COLUMNS

Value = float | Callable[[float], float]


@dataclass
class Job:
    """A synthetic workload: warm-up steps, then steps of ``step_s`` seconds until each phase's end time."""

    slot: str = "A"
    spec: str = "fcn:preset=tiny"
    phases: Sequence[tuple[float, float]] = ((20.0, 0.1),)
    start: float = 0.0
    warmup: int = 0
    warmup_s: float = 0.5
    noise: float = 0.0
    seed: int = 0
    exit_status: int | None = 0
    copy_bytes: int = 0
    copy_s: Value | None = None
    cpu: Value = 100.0
    pid: int = 0
    steps: list[tuple[float, float, bool]] = field(default_factory=list, init=False)

    def build(self) -> list[tuple[float, float, bool]]:
        """(t end, duration, warm-up) of every step; noise is AR(1), multiplicative, mean one."""
        rng = np.random.default_rng(self.seed)
        t = self.start
        out = []
        for _ in range(self.warmup):
            t += self.warmup_s
            out.append((t, self.warmup_s, True))
        e = 0.0
        for until, step_s in self.phases:
            while t + step_s <= until + 1e-9:
                e = 0.8 * e + rng.normal(0.0, self.noise) if self.noise else 0.0
                d = step_s * float(np.exp(e - (self.noise**2) / (2 * (1 - 0.64)))) if self.noise else step_s
                t += d
                out.append((t, d, False))
        self.steps = out
        return out


def _value(v: Value | None, t: float) -> float | None:
    return v(t) if callable(v) else v


def write_run(
    root: Path,
    jobs: Sequence[Job],
    *,
    label: str = "synthetic",
    status: str = "complete",
    device: str = "cpu",
    gpu: dict | None = None,
    hostname: str = "testhost",
    gpu_util: Value | None = None,
    interval_s: float = 0.1,
) -> Path:
    """Write run.json, steps.csv, device.csv, processes.csv and host.csv for ``jobs`` under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    step_rows = []
    workloads = []
    end = 0.0
    for i, job in enumerate(jobs):
        pid = job.pid or 1000 + i
        steps = job.build()
        stop = steps[-1][0] if steps else job.start
        end = max(end, stop)
        for n, (t, d, warm) in enumerate(steps):
            copy_s = _value(job.copy_s, t)
            step_rows.append((t, [job.slot, pid, n, repr(t), repr(d), 64, int(warm), job.copy_bytes,
                                  "" if copy_s is None else repr(copy_s)]))
        workloads.append({
            "process": job.slot, "spec": job.spec, "kind": "builtin", "argv": [], "pid": pid,
            "start_t": job.start, "stop_t": stop, "exit_status": job.exit_status, "tail": "",
            "meta": {},
        })
        (root / "logs" / f"{job.slot}.out").write_text("")
    step_rows.sort(key=lambda r: float(r[0]))
    _csv(root / "steps.csv", STEP_COLUMNS, [r for _, r in step_rows])

    ticks = np.arange(0.0, end + interval_s, interval_s)
    device_rows = []
    if gpu_util is not None:
        device_rows = [[repr(float(t)), _value(gpu_util, t)] + [""] * (len(DEVICE_COLUMNS) - 2) for t in ticks]
    _csv(root / "device.csv", DEVICE_COLUMNS, device_rows)
    process_rows = []
    for t in ticks:
        for i, job in enumerate(jobs):
            if job.steps and job.start <= t <= job.steps[-1][0]:
                process_rows.append([repr(float(t)), job.slot, job.pid or 1000 + i, _value(job.cpu, t), 100.0, 4, "", ""])
    _csv(root / "processes.csv", PROCESS_COLUMNS, process_rows)
    _csv(root / "host.csv", HOST_COLUMNS, [[repr(float(t)), 50.0, 1000.0, 8000.0] for t in ticks])

    meta = {
        "schema": 1, "label": label, "mode": "shared" if len(jobs) == 2 else "exclusive", "status": status,
        "started_at": "2026-01-01T00:00:00Z", "t0_monotonic_ns": 1, "duration_s": end, "interval_ms": 100,
        "device": device, "host": {"hostname": hostname, "cpus": 2, "mem_total_mib": 8000},
        "gpu": gpu, "nvml": {"available": gpu is not None, "reason": ""},
        "versions": {"python": "3.11", "gpumon": "0.1.0", "torch": None, "driver": None},
        "stagger_s": max(j.start for j in jobs) - min(j.start for j in jobs),
        "workloads": workloads,
    }
    (root / "run.json").write_text(json.dumps(meta, indent=2))
    return root


def _csv(path: Path, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    lines = [",".join(columns)] + [",".join("" if v is None else str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
