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
    assert sample.process == "A" and sample.pid == root
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


def test_proc_stat_reads_what_psutil_reads_from_one_file(family, tmp_path):
    """Memory, threads and CPU time as psutil gives them; a command with spaces and parentheses; a zombie; a gone PID."""
    root, grandchild = family
    stat, proc = host.proc_stat(grandchild), psutil.Process(grandchild)
    assert stat.rss_bytes == pytest.approx(proc.memory_info().rss, abs=2 << 20) and stat.rss_bytes > 64 << 20
    assert stat.threads == proc.num_threads() and not stat.zombie
    assert abs(stat.cpu_s - (proc.cpu_times().user + proc.cpu_times().system)) < 0.02

    odd = tmp_path / "a) b (c"
    odd.symlink_to("/bin/sleep")
    sleeper = subprocess.Popen([str(odd), "30"])
    try:
        wait_for(lambda: psutil.Process(sleeper.pid).name() == odd.name, what="the renamed sleeper")
        stat = host.proc_stat(sleeper.pid)
        assert stat is not None and stat.threads == 1
        assert stat.rss_bytes == pytest.approx(psutil.Process(sleeper.pid).memory_info().rss, abs=2 << 20)
    finally:
        sleeper.kill()
    wait_for(lambda: psutil.Process(sleeper.pid).status() == psutil.STATUS_ZOMBIE, what="a zombie (not yet reaped)")
    assert host.proc_stat(sleeper.pid).zombie
    sleeper.wait()
    assert host.proc_stat(sleeper.pid) is None


def test_host_cpu_and_memory_read_from_proc_as_psutil_counts_them():
    """Each core's busy % over the same half second, and memory, agree with psutil's (one clock tick apart at most)."""
    import time

    source = HostSource()
    psutil.cpu_percent(percpu=True)
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # one core busy here
        sum(range(1000))
    ours = source.sample_host(0.5)
    theirs = psutil.cpu_percent(percpu=True)
    assert len(ours.per_core) == len(theirs) == psutil.cpu_count()
    assert all(abs(a - b) <= 5.0 for a, b in zip(ours.per_core, theirs)), (ours.per_core, theirs)
    assert max(ours.per_core) > 50
    mem = psutil.virtual_memory()
    assert ours.mem_total_mib == mem.total / 2**20
    assert abs(ours.mem_used_mib - (mem.total - mem.available) / 2**20) < 64


def test_busy_pct_counts_as_psutil_does():
    before = [100, 0, 50, 800, 10, 0, 0, 0, 20, 0]
    after = [160, 0, 70, 900, 5, 0, 0, 0, 40, 0]  # iowait stepped back: not negative time
    # busy: user 60 (guest 20 inside it) + system 20 = 80; all: 60 + 20 + idle 100 + iowait 0 = 180 (guest not twice)
    assert host.busy_pct(before, after) == round(100 * 80 / 180, 1)
    assert host.busy_pct(before, before) == 0.0
