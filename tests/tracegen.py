"""Synthetic run directories with known answers, written through the real ``Recorder`` (so they match docs/trace.md).

The one generator of synthetic runs for every test: a ``Job`` is a list of
steps (warm-up, then phases of fixed step time, optionally with noise); the
run's states, metadata, log lines, steps and samples are handed to
``gpumon.core.store.recorder.Recorder`` in time order, exactly as a live session's
bus would.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from gpumon.core.records.model import (
    DEVICE_COLUMNS,
    DeviceSample,
    GpuOthers,
    HostSample,
    LogLine,
    OtherGpuProcess,
    ProcessSample,
    SourceStatus,
    StepEvent,
    WorkloadMeta,
    WorkloadState,
)
from gpumon.core.store.recorder import Recorder, initial_meta, write_json_atomic
from gpumon.core.store.runmeta import RunMeta, WorkloadRecord

Value = float | Callable[[float], float]
DeviceRow = Callable[[float, int], dict[str, float]]
NAN = math.nan
SIMULATED_GPU = {
    "index": 0,
    "name": "NVIDIA A100-SXM4-40GB (simulated)",
    "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "driver": "550.54.15",
    "pcie_gen": 4,
    "pcie_width": 16,
    "pcie_method": "counters",
}


@dataclass
class Job:
    """A synthetic workload: ``warmup`` steps of ``warmup_s``, then steps of ``step_s`` until each phase's end.

    ``delay`` is the time from its start to its first step; ``stop`` its exit time (default: its last step).
    """

    slot: str = "A"
    spec: str = "fcn:preset=tiny"
    phases: Sequence[tuple[float, float]] = ((20.0, 0.1),)
    start: float = 0.0
    warmup: int = 0
    warmup_s: float = 0.5
    delay: float = 0.0
    stop: float | None = None
    noise: float = 0.0
    seed: int = 0
    exit_status: int | None = 0
    batch: int = 64
    copy_bytes: int = 0
    copy_s: Value | None = None
    cpu: Value = 100.0
    rss_mib: float = 100.0
    gpu_mem_mib: float = NAN
    gpu_sm_util: float = NAN
    pid: int = 0
    log: tuple[str, ...] = ()
    # a process gpumon did not start (--beside): watched from ``start`` (its steps before it are its probe's history,
    # ``delay`` < 0), never "starting", and "detached" at the end (it goes on running)
    attached: bool = False
    affinity: tuple[
        int, ...
    ] = ()  # the cores it reports it may run on (its meta's ``affinity``); () says none
    steps: list[tuple[float, float, bool]] = field(default_factory=list, init=False)

    def attachment(self, pid: int) -> dict[str, Any]:
        """What gpumon --beside says of it (BesideTarget.to_json, with its probe read)."""
        return {
            "pid": pid,
            "user": "alice",
            "command": f"python train_{self.spec.split(':')[0]}.py",
            "owned": False,
            "attached": True,
            "probe": True,
        }

    def build(self) -> list[tuple[float, float, bool]]:
        """(t end, duration, warm-up) of every step; noise is AR(1), multiplicative, mean one."""
        rng = np.random.default_rng(self.seed)
        t = self.start + self.delay
        out = []
        for _ in range(self.warmup):
            t += self.warmup_s
            out.append((t, self.warmup_s, True))
        e = 0.0
        for until, step_s in self.phases:
            while t + step_s <= until + 1e-9:
                e = 0.8 * e + rng.normal(0.0, self.noise) if self.noise else 0.0
                d = (
                    step_s * float(np.exp(e - (self.noise**2) / (2 * (1 - 0.64))))
                    if self.noise
                    else step_s
                )
                t += d
                out.append((t, d, False))
        self.steps = out
        return out

    @property
    def end(self) -> float:
        return (
            self.stop
            if self.stop is not None
            else (self.steps[-1][0] if self.steps else self.start)
        )


def _value(v: Value | None, t: float) -> float:
    value = v(t) if callable(v) else v
    return NAN if value is None else float(value)


def _job_events(job: Job, pid: int) -> list[tuple[float, int, object]]:
    """(t, order, item) of one job: its start, metadata, log, steps and exit."""
    attached = job.attachment(pid) if job.attached else None
    events: list[tuple[float, int, object]] = [
        (job.start, 0, WorkloadState(job.slot, "running", job.start, pid=pid, attached=attached)),
        (
            job.start,
            1,
            WorkloadMeta(
                job.slot,
                pid,
                {
                    "model": job.spec.split(":")[0],
                    "batch": job.batch,
                    **({"affinity": list(job.affinity)} if job.affinity else {}),
                },
            ),
        ),
    ]
    events += [(job.start, 2, LogLine(job.slot, job.start, line)) for line in job.log]
    for n, (t, d, warm) in enumerate(job.steps):
        step = StepEvent(
            job.slot, pid, n, t, d, float(job.batch), warm, job.copy_bytes, _value(job.copy_s, t)
        )
        events.append((t, 3, step))
    stop = (
        WorkloadState(job.slot, "detached", job.end, pid=pid)
        if job.attached
        else WorkloadState(
            job.slot,
            "exited",
            job.end,
            pid=pid,
            exit_status=job.exit_status,
            tail="\n".join(job.log[-5:]),
        )
    )
    events.append((job.end, 9, stop))
    return events


def _record(job: Job, pid: int) -> WorkloadRecord:
    """The job as the capture planned it: a built-in workload, or a process watched with --beside."""
    if not job.attached:
        return WorkloadRecord(job.slot, spec=job.spec, kind="builtin", argv=[])
    found = job.attachment(pid)
    entry = WorkloadRecord(
        job.slot,
        spec=f"pid {pid}: {found['command']}",
        kind="beside",
        argv=found["command"].split(),
    )
    entry.attach(found)
    return entry


def write_run(
    root: Path,
    jobs: Sequence[Job],
    *,
    label: str = "synthetic",
    device: str = "cpu",
    gpu: dict | None = None,
    hostname: str = "testhost",
    gpu_util: Value | None = None,
    device_row: DeviceRow | None = None,
    host_cpu: Value = 50.0,
    per_core: Callable[[float], tuple[float, ...]] | None = None,
    interval_s: float = 0.1,
    stagger_s: float | None = None,
    status: str = "complete",
    others: Sequence[OtherGpuProcess] = (),
) -> Path:
    """Record ``jobs`` into the run directory ``root`` through the Recorder; returns ``root``.

    ``status="recording"`` leaves run.json as a monitor killed mid-capture does (never finalised).

    Device rows come from ``device_row(t, jobs running)`` (DeviceSample fields), else
    ``gpu_util`` alone; processes and host rows every ``interval_s`` (each core's CPU % from ``per_core(t)``).
    """
    (root / "logs").mkdir(parents=True, exist_ok=True)
    pids = {job.slot: job.pid or 1000 + i for i, job in enumerate(jobs)}
    for job in jobs:
        job.build()
    end = max(job.end for job in jobs)
    meta = initial_meta(
        label=label,
        mode="shared" if len(jobs) == 2 else "exclusive",
        clock_t0_ns=1_000_000_000,
        started_at="2026-11-22T11:40:00.000Z",
        interval_ms=round(interval_s * 1000),
        device=device,
        stagger_s=stagger_s
        if stagger_s is not None
        else max(j.start for j in jobs) - min(j.start for j in jobs),
        host={"hostname": hostname, "cpus": 2, "mem_total_mib": 24000},
        gpu=gpu,
        nvml=SourceStatus(
            "nvml", gpu is not None, "" if gpu else "unavailable: libnvidia-ml.so.1 not found"
        ),
        versions={
            "python": "3.11.7",
            "gpumon": "0.1.0",
            "torch": None,
            "driver": (gpu or {}).get("driver"),
        },
        workloads=[_record(j, pids[j.slot]) for j in jobs],
    )
    events = [e for job in jobs for e in _job_events(job, pids[job.slot])]
    for t in (float(x) for x in np.arange(0.0, end + interval_s / 2, interval_s)):
        t = round(t, 6)
        running = [j for j in jobs if j.start <= t <= j.end]
        if device_row is not None or gpu_util is not None:
            fields = (
                device_row(t, len(running))
                if device_row is not None
                else {"gpu_util": _value(gpu_util, t)}
            )
            events.append(
                (
                    t,
                    4,
                    DeviceSample(
                        **{"t": t, **{k: v for k, v in fields.items() if k in DEVICE_COLUMNS}}
                    ),
                )
            )
        for j in running:
            events.append(
                (
                    t,
                    5,
                    ProcessSample(
                        t,
                        j.slot,
                        pids[j.slot],
                        _value(j.cpu, t),
                        j.rss_mib,
                        4,
                        j.gpu_mem_mib,
                        j.gpu_sm_util,
                    ),
                )
            )
        events.append(
            (
                t,
                6,
                HostSample(
                    t, _value(host_cpu, t), 4600.0, 24000.0, per_core(t) if per_core else ()
                ),
            )
        )
        if (
            others
        ):  # someone else's processes on the GPU, at the process cadence (elapsed grows with t)
            events.append(
                (
                    t,
                    7,
                    GpuOthers(
                        t,
                        tuple(
                            dataclasses.replace(o, t=t, elapsed_s=o.elapsed_s + t) for o in others
                        ),
                    ),
                )
            )
    recorder = Recorder(root, meta)
    for _, _, item in sorted(events, key=lambda e: (e[0], e[1])):
        recorder.handle(item)
    recorder.close(end)
    if status != "complete":
        write_json_atomic(
            root / "run.json", {**recorder.meta.to_json(), "status": status, "duration_s": None}
        )
    return root


# --- scenarios shared by the TUI, baseline and headless tests -----------------------------------


def wave(t: float, low: float, high: float, period: float = 7.0) -> float:
    return round(low + (high - low) * (0.5 + 0.5 * math.sin(2 * math.pi * t / period)), 3)


def simulated_device(t: float, busy: int) -> dict[str, Any]:
    """A GPU that gets busier and hotter with each co-resident job."""
    return {
        "gpu_util": wave(t, 35, 60) + 30 * (busy > 1),
        "mem_util": wave(t, 10, 30),
        "mem_used_mib": 6000 + 9000 * busy,
        "mem_total_mib": 40960,
        "pcie_rx_bps": wave(t, 2e9, 6e9) * busy,
        "pcie_tx_bps": wave(t, 1e8, 3e8),
        "power_w": wave(t, 90, 180) + 60 * busy,
        "temp_c": 55 + 5 * busy,
        "sm_clock_mhz": 1410,
        "sm_active_pct": wave(t, 20, 45) * busy,
        "sm_occupancy_pct": wave(t, 5, 15) * busy,
        "dram_bw_pct": wave(t, 10, 30) * busy,
        "tensor_active_pct": wave(t, 0, 20) * busy,
    }


def paced_job(
    slot: str,
    spec: str,
    start: float,
    stop: float,
    alone: float,
    shared: float,
    shared_from: float,
    gpu: bool = False,
    **kw: Any,
) -> Job:
    """A job stepping at ``alone`` it/s until ``shared_from``, ``shared`` it/s after it, five 0.2 s warm-up steps."""
    phases = (
        ((shared_from, 1 / alone), (stop, 1 / shared))
        if shared_from > start
        else ((stop, 1 / shared),)
    )
    return Job(
        slot,
        spec,
        phases,
        start=start,
        stop=stop,
        warmup=5,
        warmup_s=0.2,
        delay=0.6,
        rss_mib=700.0,
        gpu_mem_mib=2100.0 if gpu else NAN,
        gpu_sm_util=45.0 if gpu else NAN,
        **kw,
    )


# A colleague's training job on the same GPU (the shared-box scenario), and one a PID namespace hides.
COLLEAGUE = OtherGpuProcess(
    0.0, 31337, 30720.0, 25.0, "alice", "train_llm.py", 99.0, 5120.0, 7200.0
)
HIDDEN = OtherGpuProcess(0.0, 4242, 512.0, 0.0)


def staggered_pair(
    root: Path, *, gpu: bool = False, crash_b: bool = False, others: bool = False
) -> Path:
    """A alone for 10 s, then A and B together until 60 s (B crashes at 40 s with ``crash_b``)."""
    where = "cuda" if gpu else "cpu"
    a = paced_job(
        "A",
        "fcn:preset=tiny",
        0.0,
        60.0,
        alone=40.0,
        shared=28.0,
        shared_from=10.0,
        gpu=gpu,
        copy_bytes=200_704,
        copy_s=200_704 / 12e9,
        cpu=98.5,
        log=(f"gpumon.workloads: training fcn (preset tiny, batch 64) on {where}",),
    )
    b_log: tuple[str, ...] = (
        f"gpumon.workloads: training gemm (preset tiny, batch 256) on {where}",
    )
    if crash_b:
        b_log += (
            "Traceback (most recent call last):",
            '  File "train.py", line 12, in <module>',
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
        )
    b = paced_job(
        "B",
        "gemm:preset=tiny",
        10.0,
        40.0 if crash_b else 60.0,
        alone=25.0,
        shared=19.0,
        shared_from=0.0,
        gpu=gpu,
        exit_status=1 if crash_b else 0,
        batch=256,
        cpu=98.5,
        log=b_log,
    )
    return write_run(
        root,
        (a, b),
        gpu=SIMULATED_GPU if gpu else None,
        device="cuda" if gpu else "cpu",
        device_row=simulated_device if gpu else None,
        host_cpu=lambda t: wave(t, 40, 95),
        label="fcn-gemm",
        interval_s=0.5,
        stagger_s=10.0,
        others=(COLLEAGUE, HIDDEN) if others else (),
    )


def beside_pair(root: Path) -> Path:
    """``gpumon run fcn --beside PID``: B, a probed lstm gpumon did not start, watched from 0.5 s with 8 s of its
    probe's history, alone at 91.16 it/s; A launched at 10 s (B's lead) runs beside it, and B goes on at 90.99 it/s
    (issue 34's run, as headless and compare read it); at 40 s gpumon lets go of B (detached, still running)."""
    a = paced_job(
        "A",
        "fcn:preset=tiny",
        10.0,
        40.0,
        alone=28.0,
        shared=28.0,
        shared_from=0.0,
        cpu=98.5,
        copy_bytes=200_704,
        copy_s=200_704 / 12e9,
        log=("gpumon.workloads: training fcn (preset tiny, batch 64) on cpu",),
    )
    b = Job(
        "B",
        "lstm:preset=tiny",
        ((10.0, 1 / 91.16), (40.0, 1 / 90.99)),
        start=0.5,
        delay=-8.5,
        stop=40.0,
        batch=8,
        cpu=97.0,
        rss_mib=650.0,
        pid=4242,
        attached=True,
        log=("epoch 3: loss 0.412",),
    )
    return write_run(
        root,
        (a, b),
        label="fcn-beside-lstm",
        host_cpu=lambda t: wave(t, 40, 95),
        interval_s=0.5,
        stagger_s=10.0,
    )


def exclusive(
    root: Path, slot: str = "A", rate: float = 40.0, spec: str = "fcn:preset=tiny"
) -> Path:
    """One job alone for 20 s at ``rate`` steps per second."""
    job = paced_job(slot, spec, 0.0, 20.0, alone=rate, shared=rate, shared_from=0.0, cpu=98.5)
    return write_run(
        root,
        (job,),
        label=f"{spec.split(':')[0]}-alone",
        host_cpu=lambda t: wave(t, 40, 95),
        interval_s=0.5,
    )


def write_pair(root: Path) -> Path:
    """Two jobs alone (``x-A``: fcn, ``x-B``: gemm) and together (``s-AB``) under ``root``, each a run directory."""
    write_run(root / "x-A", [Job("A", "fcn", ((12.0, 0.05),))])
    write_run(root / "x-B", [Job("A", "gemm", ((12.0, 0.1),))])
    write_run(
        root / "s-AB",
        [Job("A", "fcn", ((12.0, 0.08),)), Job("B", "gemm", ((12.0, 0.15),), pid=2000)],
    )
    return root


def fcn_twice(root: Path) -> tuple[Path, Path, Path]:
    """An fcn alone at 10 it/s (slot A), one alone at 5 it/s (slot B) and both together: compared as they are, the
    same workload's two exclusive runs that disagree (``a``, ``b``, ``shared`` under ``root``)."""
    a = write_run(root / "a", [Job(slot="A", phases=((5.0, 0.1),), noise=0.1)])
    b = write_run(root / "b", [Job(slot="B", phases=((5.0, 0.2),), pid=7)])
    shared = write_run(
        root / "s",
        [
            Job(slot="A", phases=((6.0, 0.15),), noise=0.1),
            Job(slot="B", phases=((6.0, 0.3),), noise=0.1),
        ],
    )
    return a, b, shared


def cpu_run_meta(
    label: str, t0_ns: int, workload: WorkloadRecord, nvml_reason: str = "disabled (--no-nvml)"
) -> RunMeta:
    """run.json as the recorder first writes it for an exclusive CPU run of ``workload`` without NVML, its clock
    started at ``t0_ns``."""
    return initial_meta(
        label=label,
        mode="exclusive",
        clock_t0_ns=t0_ns,
        started_at="2026-11-25T00:00:00",
        interval_ms=100,
        device="cpu",
        stagger_s=0.0,
        host={},
        gpu=None,
        nvml=SourceStatus("nvml", False, nvml_reason),
        versions={},
        workloads=[workload],
    )
