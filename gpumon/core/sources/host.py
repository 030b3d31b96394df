"""Host source (psutil): whole-host CPU and memory, and each workload's process tree."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Mapping

import psutil

from gpumon.core.model import GpuProcessMetrics, HostSample, OtherGpuProcess, ProcessSample, SourceStatus

MIB = 1024 * 1024
PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcStat:
    """What ``/proc/PID/stat`` says of a process: the figures psutil's memory_info, status, cpu_times and num_threads
    give, from one small read (a fifth of their CPU, which counts at every process tick)."""

    zombie: bool
    cpu_s: float  # user + system
    threads: int
    rss_bytes: int


def proc_stat(pid: int) -> ProcStat | None:
    """None when the process is gone (or /proc does not show it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()  # after the command, which may hold spaces and parentheses
    try:
        return ProcStat(fields[0] == b"Z", (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, int(fields[17]),
                        int(fields[21]) * PAGE_BYTES)
    except (IndexError, ValueError):
        return None


def core_times() -> list[list[int]]:
    """Each CPU's times in clock ticks from /proc/stat (user, nice, system, idle, iowait, irq, softirq, steal, guest,
    guest_nice: what psutil.cpu_times(percpu=True) reads)."""
    with open("/proc/stat", "rb") as f:
        f.readline()  # all CPUs together
        return [[int(v) for v in line.split()[1:11]] for line in f if line.startswith(b"cpu")]


def busy_pct(before: list[int], after: list[int]) -> float:
    """One CPU's busy % between two readings, as psutil.cpu_percent counts it: each time's growth (never negative:
    iowait can step back), guest time already inside user time, idle and iowait not busy; rounded to 0.1."""
    delta = [max(0, b - a) for a, b in zip(before, after)]
    total = sum(delta) - sum(delta[8:10])
    busy = total - delta[3] - (delta[4] if len(delta) > 4 else 0)
    return round(100 * busy / total, 1) if total > 0 else 0.0


def memory_mib() -> tuple[float, float]:
    """(used, total) MiB: total less MemAvailable, as psutil.virtual_memory's total - available."""
    found: dict[bytes, int] = {}
    with open("/proc/meminfo", "rb") as f:
        for line in f:
            key, _, rest = line.partition(b":")
            if key in (b"MemTotal", b"MemAvailable"):
                found[key] = int(rest.split()[0]) * 1024
                if len(found) == 2:
                    return (found[b"MemTotal"] - found[b"MemAvailable"]) / MIB, found[b"MemTotal"] / MIB
    mem = psutil.virtual_memory()  # a kernel without MemAvailable (before 3.14): psutil estimates it
    return (mem.total - mem.available) / MIB, mem.total / MIB


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` from procfs (psutil's scan of all processes as a fallback)."""
    if not PROC_CHILDREN:
        return _children_by_scan(pid)
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return found


def _children_by_scan(pid: int) -> list[int]:
    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


class HostSource:
    """Samples the host (psutil) and each job's tree (``/proc/PID/stat``); keeps each PID's last CPU time so its
    CPU % is over the time since (psutil's ``cpu_percent``)."""

    name = "host"

    def __init__(self) -> None:
        self._cpu: dict[int, tuple[float, float]] = {}  # PID -> (CPU seconds, monotonic time) at its last sample
        self._others: dict[int, psutil.Process | None] = {}
        self._cores = core_times()  # each CPU's busy % is over the time since the last host sample

    def open(self) -> SourceStatus:
        return SourceStatus(self.name, True)

    def sample_host(self, t: float) -> HostSample:
        """Every CPU's busy % since the last sample (from /proc, as psutil counts it: a third of its CPU) and memory."""
        cores = core_times()
        per_core = tuple(busy_pct(before, after) for before, after in zip(self._cores, cores))
        self._cores = cores
        used, total = memory_mib()
        cpu = sum(per_core) / len(per_core) if per_core else math.nan
        return HostSample(t, cpu, used, total, per_core)

    def tree_pids(self, root_pid: int) -> list[int]:
        """The PID and all its live descendants (empty when the root is gone).

        Reads ``/proc/PID/task/TID/children`` (a few small files) instead of
        scanning every process on the host, which costs milliseconds per tick.
        """
        if not os.path.exists(f"/proc/{root_pid}"):
            return []
        tree, frontier = [root_pid], [root_pid]
        while frontier:
            children = [c for pid in frontier for c in _children(pid)]
            tree.extend(children)
            frontier = children
        return tree

    def sample_processes(
        self,
        t: float,
        trees: Mapping[str, list[int]],
        gpu: Mapping[int, GpuProcessMetrics],
    ) -> list[ProcessSample]:
        """One sample per workload: CPU% (100 = one core), RSS and threads summed over its tree."""
        samples = []
        live: set[int] = set()
        now = time.monotonic()
        for process, pids in trees.items():
            if not pids:
                continue
            cpu = rss = 0.0
            threads = 0
            for pid in pids:
                stat = proc_stat(pid)
                if stat is None or stat.rss_bytes == 0 or stat.zombie:
                    continue
                cpu += self._cpu_pct(pid, stat.cpu_s, now)
                rss += stat.rss_bytes
                threads += stat.threads
                live.add(pid)
            if not live.intersection(pids):
                continue
            gpu_mem = [gpu[p].gpu_mem_mib for p in pids if p in gpu and not math.isnan(gpu[p].gpu_mem_mib)]
            gpu_sm = [gpu[p].gpu_sm_util for p in pids if p in gpu and not math.isnan(gpu[p].gpu_sm_util)]
            samples.append(
                ProcessSample(
                    t,
                    process,
                    pids[0],
                    cpu,
                    rss / MIB,
                    threads,
                    sum(gpu_mem) if gpu_mem else math.nan,
                    min(100.0, sum(gpu_sm)) if gpu_sm else math.nan,
                )
            )
        for pid in set(self._cpu) - live - {p for pids in trees.values() for p in pids}:
            del self._cpu[pid]
        return samples

    def _cpu_pct(self, pid: int, cpu_s: float, now: float) -> float:
        """CPU % (100 = one core) since the PID's last sample, rounded as psutil does; 0 at its first."""
        last = self._cpu.get(pid)
        self._cpu[pid] = (cpu_s, now)
        if last is None or now <= last[1]:
            return 0.0
        return round(100 * (cpu_s - last[0]) / (now - last[1]), 1)

    def sample_others(self, t: float, gpu: Mapping[int, GpuProcessMetrics]) -> tuple[OtherGpuProcess, ...]:
        """The GPU processes in ``gpu`` (not our jobs) with what /proc shows of them, most GPU memory first.

        A PID /proc cannot see (another PID namespace) keeps its NVML figures and unknown host fields.
        """
        known = {pid: self._others.get(pid) for pid in gpu}
        for pid in gpu.keys() - self._others.keys():
            try:
                known[pid] = psutil.Process(pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                known[pid] = None
        self._others = known
        found = [_other(t, metrics, known[pid]) for pid, metrics in gpu.items()]
        return tuple(sorted(found, key=lambda o: (-_or_zero(o.gpu_mem_mib), o.pid)))


def _or_zero(value: float) -> float:
    return 0.0 if math.isnan(value) else value


def _other(t: float, gpu: GpuProcessMetrics, proc: psutil.Process | None) -> OtherGpuProcess:
    """One other GPU process; host fields only where /proc shows the PID."""
    bare = OtherGpuProcess(t, gpu.pid, gpu.gpu_mem_mib, gpu.gpu_sm_util)
    if proc is None:
        return bare
    try:
        with proc.oneshot():
            command = proc.name()
            cpu = proc.cpu_percent()
            rss = proc.memory_info().rss / MIB
            started = proc.create_time()
            try:
                user = proc.username()
            except (KeyError, psutil.AccessDenied):  # a UID with no passwd entry (a container's)
                user = str(proc.uids().real)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return bare
    return OtherGpuProcess(
        t, gpu.pid, gpu.gpu_mem_mib, gpu.gpu_sm_util, user, command, cpu, rss, max(0.0, time.time() - started)
    )
