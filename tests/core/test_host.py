"""Host source on real processes: process trees (children and grandchildren), CPU and memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import psutil
import pytest

from gpumon.core.sources import host
from gpumon.core.sources.host import HostSource
from tests.helpers import wait_for

PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(64 << 20); print('ready', flush=True); time.sleep(60)"])
    print(child.pid, flush=True)
    end = time.time() + 60
    while time.time() < end:
        sum(range(10000))
    """
)


@pytest.fixture
def family():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    grandchild = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "ready"
    yield parent.pid, grandchild
    for proc in psutil.Process(parent.pid).children(recursive=True) + [psutil.Process(parent.pid)]:
        proc.kill()
    parent.wait()


@pytest.mark.parametrize("procfs", [True, False])
def test_tree_includes_grandchildren_and_sums_resources(family, monkeypatch, procfs):
    monkeypatch.setattr(host, "PROC_CHILDREN", procfs and host.PROC_CHILDREN)
    root, grandchild = family
    source = HostSource()
    assert source.tree_pids(root) == [root, grandchild]
    source.sample_processes(0.0, {"A": [root, grandchild]}, {})

    def busy_sample():
        (sample,) = source.sample_processes(0.1, {"A": source.tree_pids(root)}, {})
        return sample if sample.cpu_pct > 20 else None

    sample = wait_for(busy_sample, timeout=20, interval=0.2, what="CPU use of the busy parent")
    assert sample.slot == "A" and sample.pid == root
    assert sample.rss_mib > 64 and sample.threads >= 2
    assert sample.gpu_mem_mib != sample.gpu_mem_mib


def test_gone_process_gives_no_sample():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    source = HostSource()
    assert source.tree_pids(proc.pid) == []
    assert source.sample_processes(0.0, {"A": []}, {}) == []


def test_host_sample_has_every_core():
    sample = HostSource().sample_host(0.0)
    assert len(sample.per_core) == psutil.cpu_count()
    assert 0 < sample.mem_used_mib < sample.mem_total_mib


SPAWNER = textwrap.dedent(
    """
    import queue, subprocess, sys, threading
    asks = queue.Queue()
    def worker():  # a thread that stays alive: its children are listed under its own task, not the main thread's
        while True:
            asks.get()
            print(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid, flush=True)
    threading.Thread(target=worker, daemon=True).start()
    for line in sys.stdin:
        if line.strip() == "thread":
            asks.put(1)
        else:
            print(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid, flush=True)
    """
)


@pytest.fixture
def spawner():
    """A process whose main thread or a second thread forks a child on request ("main" / "thread"): its PID."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )

    def spawn(where: str) -> int:
        proc.stdin.write(where + "\n")
        proc.stdin.flush()
        return int(proc.stdout.readline())

    yield proc.pid, spawn
    for child in psutil.Process(proc.pid).children(recursive=True):
        child.kill()
    proc.kill()
    proc.wait()


@pytest.mark.skipif(not host.PROC_CHILDREN, reason="needs /proc/PID/task/TID/children")
def test_between_full_looks_a_tree_reads_each_main_thread_and_keeps_the_children_it_knows(
    spawner, monkeypatch
):
    root, spawn = spawner
    source = HostSource()
    by_thread = spawn("thread")
    assert source.tree_pids(root, every_thread=False) == [
        root,
        by_thread,
    ]  # a PID seen for the first time: in full

    listed: list[str] = []
    listdir = host.os.listdir
    monkeypatch.setattr(host.os, "listdir", lambda path: listed.append(path) or listdir(path))
    later_by_thread, by_main = spawn("thread"), spawn("main")
    assert sorted(source.tree_pids(root, every_thread=False)) == sorted([root, by_thread, by_main])
    # the known processes' main threads only (the new by_main is read in full once)
    assert listed == [f"/proc/{by_main}/task"], listed
    assert sorted(source.tree_pids(root)) == sorted([root, by_thread, later_by_thread, by_main])
    assert f"/proc/{root}/task" in listed
