"""run.json's runner: which process writes a run, whether it still runs, and stopping it (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace

import psutil
import pytest

from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store.runner import INTERRUPTED, RUNNING, RunnerInfo, run_status


def _meta(**fields: object) -> RunMeta:
    """A run.json with these fields, read as every reader reads it."""
    return RunMeta.from_json({"schema": 1, "workloads": [], **fields})


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _info(pid: int) -> RunnerInfo:
    process = psutil.Process(pid)
    return RunnerInfo(pid, process.create_time(), os.getuid(), "me", RunnerInfo.current().host)


def test_this_process_is_alive_and_ours() -> None:
    me = RunnerInfo.current(detached=True)
    assert me.pid == os.getpid() and me.alive() and me.uid == os.getuid() and me.detached
    assert RunnerInfo.from_json(me.to_json()) == me
    assert RunMeta.from_json({"schema": 1, "workloads": [], "runner": me.to_json()}).runner == me


def test_a_recycled_pid_is_not_the_runner(child) -> None:
    info = _info(child.pid)
    assert info.alive()
    assert not replace(info, started=info.started - 5).alive()  # same PID, another process's start time


def test_an_ended_runner_is_not_alive_and_a_recording_run_reads_interrupted(child) -> None:
    info = _info(child.pid)
    meta = _meta(status="recording", runner=info.to_json())
    assert meta.live_status() == RUNNING
    child.kill()
    child.wait()
    assert not info.alive()
    assert meta.live_status() == INTERRUPTED


def test_a_zombie_runner_is_not_alive(child) -> None:
    info = _info(child.pid)
    child.kill()
    psutil.Process(child.pid)  # still there, unreaped
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # it has exited; not reaped yet
    assert not info.alive()


def test_status_of_finished_old_and_foreign_runs() -> None:
    assert _meta(status="complete").live_status() == "complete"
    assert _meta(status="recording").live_status() == INTERRUPTED  # recorded before runners were named
    assert _meta(status="recording", runner={"pid": 1}).live_status() == INTERRUPTED  # garbled entry
    elsewhere = {"pid": 1, "started": 0.0, "uid": 0, "user": "x", "host": "another-host.invalid"}
    assert _meta(status="recording", runner=elsewhere).live_status() == "recording"  # this machine cannot tell
    assert run_status(None, None) == "?"  # no status recorded


def test_stop_sends_sigterm_to_that_process_only(child) -> None:
    info = _info(child.pid)
    assert not replace(info, started=info.started - 5).stop()  # not the same process: nothing sent
    assert child.poll() is None
    assert info.stop()
    assert child.wait(10) == -signal.SIGTERM
    assert not info.stop()
