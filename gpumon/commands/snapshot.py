"""``gpumon snapshot``: the device(s), gpumon's runs that record now and every GPU process, printed once and
exit (like ``nvitop -1``); ``--json`` for scripts, with a ``processes`` list. Without a GPU or a driver it says
why, and lists the host's top CPU consumers instead."""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from gpumon.errors import UsageError
from gpumon.core.records.printable import printable

CPU_WINDOW_S = (
    0.5  # the host's CPU use is measured over this long (a first psutil reading is always 0)
)
TOP = 10


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "snapshot",
        help="print the GPUs, gpumon's runs and every GPU process once, then exit (like nvitop -1)",
        description="Print the device(s), the gpumon runs recording now and every process on the GPUs, once. "
        "On a box without a GPU (or without its driver) it says why and lists the host's top CPU consumers.",
    )
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    p.add_argument(
        "--top",
        type=int,
        default=TOP,
        metavar="N",
        help=f"host processes listed without a GPU (default {TOP})",
    )
    p.add_argument("--runs-dir", type=Path, default=None, help="where gpumon's runs are")
    p.add_argument(
        "--no-nvml", action="store_true", help="do not read the GPU (as on a box without one)"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError(f"--top {args.top}: give a number of processes, 1 or more")
    devices, processes, nvml = _gpus(args.no_nvml)
    snap: dict[str, Any] = {
        "nvml": nvml,
        "devices": devices,
        "runs": _runs(args.runs_dir),
        "processes": processes if devices else _top_cpu(args.top),
        "processes_are": "gpu" if devices else "host top cpu",
    }
    if args.json:
        print(json.dumps(snap, indent=2, allow_nan=False))
    else:  # each line escaped: a process's command, its user or a run's label is anyone's text (exec -a $'\e]0;')
        print("\n".join(printable(line) for line in _text(snap)))
    return 0


def _number(value: float) -> float | None:
    return (
        None
        if value is None or (isinstance(value, float) and math.isnan(value))
        else round(value, 1)
    )


def _gpus(skip: bool) -> tuple[list[dict], list[dict], dict]:
    """Every GPU NVML sees, with its processes (what /proc shows of each); none, and why, without NVML."""
    # deferred: +0.03 s CPU (psutil) on gpumon --help (the NVML source: never while parsing)
    from gpumon.core.sources.host import HostSource
    from gpumon.core.sources.nvml import NvmlSource

    if skip:
        return [], [], {"available": False, "reason": "disabled (--no-nvml)"}
    first = NvmlSource(0)
    status = first.open()
    if not status.available:
        return [], [], {"available": False, "reason": status.reason}
    sources = [first, *(NvmlSource(i) for i in range(1, first.device_count))]
    host = HostSource()
    devices, processes = [], []
    try:
        for source in sources:
            if source is not first and not source.open().available:
                continue
            info, sample = source.device_info(), source.sample(0.0)
            devices.append(_device(info, sample))
            for other in host.sample_others(0.0, source.gpu_process_metrics()):
                processes.append({"gpu": info.get("index"), **_process(other)})
    finally:
        for source in sources:
            source.close()
    return devices, processes, {"available": True, "reason": ""}


def _device(info: dict, sample: Any) -> dict:
    fields = ("gpu_util", "mem_used_mib", "mem_total_mib", "power_w", "temp_c")
    return {
        "index": info.get("index"),
        "name": info.get("name"),
        "uuid": info.get("uuid"),
        **{f: _number(getattr(sample, f)) if sample is not None else None for f in fields},
    }


def _command_line(pid: int, name: str | None) -> str | None:
    """The process's whole command line (nvitop's), else the name /proc gave, else None (another PID namespace)."""
    # deferred: +0.01 s CPU on gpumon --help
    import psutil

    try:
        return " ".join(psutil.Process(pid).cmdline()) or name
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return name


def _process(other: Any) -> dict:
    return {
        "pid": other.pid,
        "user": other.user,
        "command": _command_line(other.pid, other.command),
        "gpu_mem_mib": _number(other.gpu_mem_mib),
        "sm_pct": _number(other.sm_pct),
        "cpu_pct": _number(other.cpu_pct),
        "rss_mib": _number(other.rss_mib),
    }


def _top_cpu(top: int) -> list[dict]:
    """The host's processes using the most CPU over CPU_WINDOW_S (this one left out)."""
    # deferred: +0.01 s CPU on gpumon --help
    import psutil

    procs = []
    for proc in psutil.process_iter(["pid", "username", "name", "cmdline"]):
        try:
            proc.cpu_percent()
            procs.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    time.sleep(CPU_WINDOW_S)
    found = []
    for proc in procs:
        if proc.pid == os.getpid():
            continue
        try:
            cpu, rss = proc.cpu_percent(), proc.memory_info().rss / 2**20
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        command = " ".join(proc.info["cmdline"] or []) or proc.info["name"] or ""
        found.append(
            {
                "pid": proc.pid,
                "user": proc.info["username"],
                "command": command,
                "cpu_pct": round(cpu, 1),
                "rss_mib": round(rss, 1),
            }
        )
    return sorted(found, key=lambda p: (-p["cpu_pct"], p["pid"]))[:top]


def _runs(runs_dir: Path | None) -> list[dict]:
    """gpumon's runs that record now (a proven runner holds them), by name."""
    # deferred: +0.04 s CPU (psutil) on gpumon --help
    from gpumon.core.store.runner import RUNNING, run_status
    from gpumon.core.store.runsfolder import runs_dir_or_default
    from gpumon.core.store.trace import scan_runs

    folder = runs_dir_or_default(runs_dir)
    if not folder.is_dir():  # nothing captured yet: no run records
        return []
    runs, _ = scan_runs(folder)
    live = [r for r in runs if run_status(r.meta.status, r.meta.runner, r.path) == RUNNING]
    return [
        {"run": r.path.name, "label": r.label, "jobs": {w.slot: w.spec for w in r.meta.workloads}}
        for r in sorted(live, key=lambda r: r.path.name)
    ]


def _text(snap: dict) -> list[str]:
    lines = []
    for d in snap["devices"]:
        lines.append(
            f"GPU {d['index']}  {d['name']}  util {_pct(d['gpu_util'])}  mem {_mib(d['mem_used_mib'])}/"
            f"{_mib(d['mem_total_mib'])}  {_or_dash(d['power_w'], ' W')}  {_or_dash(d['temp_c'], ' C')}"
        )
    if not snap["devices"]:
        lines.append(f"no GPU: NVML {snap['nvml']['reason']}")
    lines.append(
        "gpumon runs recording now: "
        + (
            ", ".join(
                f"{r['run']} ({' '.join(f'{k}={v}' for k, v in sorted(r['jobs'].items()))})"
                for r in snap["runs"]
            )
            or "none"
        )
    )
    gpu = snap["processes_are"] == "gpu"
    lines.append("GPU processes:" if gpu else "host processes, most CPU first:")
    head = f"{'GPU':>3} " if gpu else ""
    lines.append(
        f"{head}{'PID':>7}  {'USER':<10} {'GPU MEM':>8} {'SM':>4} {'CPU':>6} {'RSS':>9}  COMMAND"
        if gpu
        else f"{'PID':>7}  {'USER':<10} {'CPU':>6} {'RSS':>9}  COMMAND"
    )
    for p in snap["processes"]:
        user = str(p["user"] or "?")[:10]
        if gpu:
            lines.append(
                f"{p['gpu']:>3} {p['pid']:>7}  {user:<10} {_mib(p['gpu_mem_mib']):>8} {_pct(p['sm_pct']):>4} "
                f"{_pct(p['cpu_pct']):>6} {_mib(p['rss_mib']):>9}  {p['command'] or '?'}"
            )
        else:
            lines.append(
                f"{p['pid']:>7}  {user:<10} {_pct(p['cpu_pct']):>6} {_mib(p['rss_mib']):>9}  {p['command']}"
            )
    if not snap["processes"]:
        lines.append("  (none)")
    return lines


def _or_dash(value: float | None, unit: str = "") -> str:
    return "–" if value is None else f"{value:g}{unit}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}%"


def _mib(value: float | None) -> str:
    return (
        "–" if value is None else f"{value:.0f} MiB" if value < 1024 else f"{value / 1024:.1f} GiB"
    )
