"""The Launcher with real child processes: slots, lifecycle events, exit statuses, output tail, stop."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.jobs.launcher import LaunchRequest, Launcher, exit_text
from gpumon.core.probing.listener import Listener
from gpumon.core.records.model import StepBatch, WorkloadState
from gpumon.errors import EnvironmentFailure, UsageError
from tests.core.test_pipeline_sampler import Collect
from tests.helpers import wait_for


@pytest.fixture
def launcher():
    bus = Bus()
    clock = RunClock.start()
    listener = Listener(bus, clock)
    listener.start()
    items = Collect(bus)
    launcher = Launcher(bus, clock, listener)
    launcher.items = items
    yield launcher
    launcher.stop_all(timeout=2.0)
    listener.stop()
    listener.join(2.0)


def _python(code: str) -> LaunchRequest:
    return LaunchRequest.command(shlex.join([sys.executable, "-c", code]))


def _states(launcher, slot: str) -> list[str]:
    return [s.state for s in launcher.items.of(WorkloadState) if s.slot == slot]


def test_a_failing_child_is_recorded_in_its_slot_with_its_status_and_output(launcher):
    launcher.start(slot="B", request=_python("import sys; print('boom'); sys.exit(3)"))
    wait_for(lambda: "exited" in _states(launcher, "B"), what="B to exit")
    assert _states(launcher, "B") == ["starting", "running", "exited"]
    final = launcher.items.of(WorkloadState)[-1]
    assert (final.slot, final.exit_status, final.tail) == ("B", 3, "boom")
    assert "A" not in launcher.snapshot()
    (failed,) = launcher.failed()
    assert (
        failed.slot == "B"
        and failed.failed
        and exit_text(failed.exit_status) == "exited with status 3"
    )


def test_stop_sends_sigterm_to_the_group_and_is_not_a_failure(launcher):
    workload = launcher.start(slot="A", request=LaunchRequest.command("sleep 60"))
    assert launcher.pids() == {"A": workload.pid}
    launcher.stop("A", timeout=5.0)
    wait_for(lambda: "stopped" in _states(launcher, "A"), what="A to be stopped")
    assert workload.exit_status is None and workload.running, (
        "start() returned a copy, taken while A ran"
    )
    workload = launcher.get("A")
    assert workload.exit_status == -signal.SIGTERM and not workload.failed
    assert launcher.failed() == [] and launcher.pids() == {}
    assert (
        not psutil.pid_exists(workload.pid)
        or psutil.Process(workload.pid).status() == psutil.STATUS_ZOMBIE
    )


def test_a_child_ignoring_sigterm_is_killed_after_the_timeout(launcher):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    launcher.start(slot="A", request=_python(code))
    wait_for(lambda: "up" in launcher.get("A").tail, what="the child to ignore SIGTERM")
    launcher.stop_all(timeout=0.5)
    workload = launcher.get("A")
    assert workload.exit_status == -signal.SIGKILL
    assert exit_text(workload.exit_status) == "was killed by SIGKILL"


def test_probe_steps_arrive_tagged_with_the_slot(launcher):
    launcher.start(
        slot="B",
        request=_python("from gpumon import probe\nfor _ in range(7): probe.step(samples=4)"),
    )
    wait_for(lambda: "exited" in _states(launcher, "B"), what="B to finish")
    launcher.join_reapers()
    steps = [s for b in launcher.items.of(StepBatch) for s in b.steps]
    assert [s.step for s in steps] == list(range(7)) and {s.slot for s in steps} == {"B"}


def test_a_busy_slot_and_an_unknown_slot_are_usage_errors(launcher):
    launcher.start(slot="A", request=LaunchRequest.command("sleep 60"))
    with pytest.raises(UsageError, match="slot A is busy"):
        launcher.start(slot="A", request=LaunchRequest.command("sleep 60"))
    with pytest.raises(UsageError, match="unknown slot"):
        launcher.start(slot="C", request=LaunchRequest.command("sleep 60"))


def test_a_child_that_cannot_be_started_stays_in_its_slot_as_failed(launcher, tmp_path):
    not_a_program = tmp_path / "train"
    not_a_program.write_bytes(b"\x00\x01 not an executable format\n")
    not_a_program.chmod(0o755)
    with pytest.raises(EnvironmentFailure, match="cannot start .*train: Exec format error"):
        launcher.start(slot="A", request=LaunchRequest.command(str(not_a_program)))
    (failed,) = launcher.failed()
    assert (
        failed.slot == "A"
        and not failed.running
        and failed.start_error is not None
        and failed.pid == 0
    )
    assert failed.ending().startswith("could not start: cannot start") and launcher.pids() == {}
    assert _states(launcher, "A") == ["starting", "failed"]
    launcher.start(slot="A", request=LaunchRequest.command("true"))  # the slot is free again


def test_a_stop_while_the_child_is_being_forked_stops_it_too(launcher, monkeypatch):
    """The slot is reserved before Popen: stop_all() meanwhile (a signal on another thread) reaches the new child."""
    forking, release = threading.Event(), threading.Event()
    real_popen = subprocess.Popen

    def slow_popen(*args, **kwargs):
        forking.set()
        release.wait(30)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", slow_popen)
    starter = threading.Thread(
        target=launcher.start, kwargs={"slot": "A", "request": LaunchRequest.command("sleep 60")}
    )
    starter.start()
    assert forking.wait(30)
    assert launcher.get("A").pid == 0 and launcher.pids() == {}, "reserved, not forked yet"
    with pytest.raises(UsageError, match="slot A is busy"):
        launcher.start(slot="A", request=LaunchRequest.command("sleep 60"))
    launcher.stop_all(timeout=2.0)
    release.set()
    starter.join(30)
    wait_for(
        lambda: "stopped" in _states(launcher, "A"),
        what="the child forked after the stop to be stopped",
    )
    workload = launcher.get("A")
    assert workload.exit_status == -signal.SIGTERM and not workload.failed
    assert (
        not psutil.pid_exists(workload.pid)
        or psutil.Process(workload.pid).status() == psutil.STATUS_ZOMBIE
    )
