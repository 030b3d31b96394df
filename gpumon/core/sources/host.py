"""Host source (psutil): whole-host CPU and memory, and each workload's process tree."""

from __future__ import annotations

import math
import os
import time
from typing import Mapping

import psutil

from gpumon.core.records.model import (
    GpuProcessMetrics,
    HostSample,
    OtherGpuProcess,
    ProcessSample,
    SourceStatus,
)
from gpumon.core.records.slots import Slot

MIB = 1024 * 1024
PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _children(pid: int, every_thread: bool = True) -> list[int]:
    """Direct children of ``pid`` from procfs (psutil's scan of all processes as a fallback): those each of its
    threads forked, or (``every_thread`` False) those its main thread forked."""
    if not PROC_CHILDREN:
        return _children_by_scan(pid)
    try:
        tasks = os.listdir(f"/proc/{pid}/task") if every_thread else [str(pid)]
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
    """Samples psutil; keeps one ``psutil.Process`` per PID so ``cpu_percent`` has a baseline."""

    name = "host"

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}
        self._others: dict[int, psutil.Process | None] = {}
        self._children: dict[int, list[int]] = {}  # each tree PID's children at the last look
        psutil.cpu_percent(percpu=True)

    def open(self) -> SourceStatus:
        return SourceStatus(self.name, True)

    def sample_host(self, t: float) -> HostSample:
        per_core = tuple(psutil.cpu_percent(percpu=True))
        mem = psutil.virtual_memory()
        cpu = sum(per_core) / len(per_core) if per_core else math.nan
        return HostSample(t, cpu, (mem.total - mem.available) / MIB, mem.total / MIB, per_core)

    def tree_pids(self, root_pid: int, every_thread: bool = True) -> list[int]:
        """The PID and all its live descendants (empty when the root is gone).

        Reads ``/proc/PID/task/TID/children``, one small file per thread, instead of scanning every process on
        the host (milliseconds a tick). A GPU training job has ~34 threads (the H100 captures): with
        ``every_thread`` False only each process's main thread is read (where DataLoader workers and
        subprocesses are forked from), and the children an earlier look found are kept while they are still
        their parent's; a PID seen for the first time is read in full. (Children a non-main thread forks since
        the last full look are found at the next one.)
        """
        if self._process(root_pid) is None:
            return []
        tree, frontier = [root_pid], [root_pid]
        while frontier:
            children = [c for pid in frontier for c in self._children_of(pid, every_thread)]
            tree.extend(children)
            frontier = children
        return tree

    def _children_of(self, pid: int, every_thread: bool) -> list[int]:
        known = self._children.get(pid)
        if every_thread or known is None:
            found = _children(pid)
        else:
            found = _children(pid, every_thread=False)
            found += [c for c in known if c not in found and self._parent(c) == pid]
        self._children[pid] = found
        return found

    def _parent(self, pid: int) -> int | None:
        proc = self._process(pid)
        try:
            return proc.ppid() if proc is not None else None
        except psutil.Error:
            return None

    def sample_processes(
        self,
        t: float,
        trees: Mapping[Slot, list[int]],
        gpu: Mapping[int, GpuProcessMetrics],
    ) -> list[ProcessSample]:
        """One sample per workload: CPU% (100 = one core), RSS and threads summed over its tree."""
        samples = []
        live: set[int] = set()
        for slot, pids in trees.items():
            if not pids:
                continue
            cpu = rss = 0.0
            threads = 0
            for pid in pids:
                proc = self._process(pid)
                if proc is None:
                    continue
                try:
                    with proc.oneshot():
                        memory = proc.memory_info()
                        if memory.rss == 0 or proc.status() == psutil.STATUS_ZOMBIE:
                            continue
                        cpu += proc.cpu_percent()
                        rss += memory.rss
                        threads += proc.num_threads()
                except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                    continue
                live.add(pid)
            if not live.intersection(pids):
                continue
            gpu_mem = [
                gpu[p].gpu_mem_mib for p in pids if p in gpu and not math.isnan(gpu[p].gpu_mem_mib)
            ]
            gpu_sm = [
                gpu[p].gpu_sm_util for p in pids if p in gpu and not math.isnan(gpu[p].gpu_sm_util)
            ]
            samples.append(
                ProcessSample(
                    t,
                    slot,
                    pids[0],
                    cpu,
                    rss / MIB,
                    threads,
                    sum(gpu_mem) if gpu_mem else math.nan,
                    min(100.0, sum(gpu_sm)) if gpu_sm else math.nan,
                )
            )
        in_trees = {p for pids in trees.values() for p in pids}
        for pid in set(self._procs) - live - in_trees:
            del self._procs[pid]
        for pid in set(self._children) - in_trees:
            del self._children[pid]
        return samples

    def sample_others(
        self, t: float, gpu: Mapping[int, GpuProcessMetrics]
    ) -> tuple[OtherGpuProcess, ...]:
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

    def _process(self, pid: int) -> psutil.Process | None:
        proc = self._procs.get(pid)
        if proc is None:
            try:
                proc = psutil.Process(pid)
            except psutil.NoSuchProcess:
                return None
            self._procs[pid] = proc
        return proc


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
        t,
        gpu.pid,
        gpu.gpu_mem_mib,
        gpu.gpu_sm_util,
        user,
        command,
        cpu,
        rss,
        max(0.0, time.time() - started),
    )
