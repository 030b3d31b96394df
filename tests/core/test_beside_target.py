"""``--beside PID`` on its own (gpumon/core/jobs/beside.py): the target's checks and names, when job A may start,
what is said of a job without a probe, and the sampler counting the process as job B from the first tick."""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys

import psutil
import pytest

from gpumon.core.capture.sampler import Sampler
from gpumon.core.records.rates import MIN_EXCLUSIVE_S, MIN_EXCLUSIVE_STEPS
from gpumon.core.jobs import beside
from gpumon.core.jobs.beside import BesideTarget, KnownUse, LiveKnownUse, SoloHistory, check_target
from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.records.model import (
    GpuOthers,
    GpuProcessMetrics,
    OtherGpuProcess,
    ProcessSample,
    StepBatch,
    StepEvent,
    WorkloadState,
)
from tests.core.test_pipeline_sampler import Collect, FakeHost, FakeNvml
from tests.helpers import wait_for

NAN = math.nan


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "--lr", "0.1"])
    # until it has exec'd: before that its /proc command line and environment are still this process's
    wait_for(lambda: psutil.Process(proc.pid).cmdline()[-1:] == ["0.1"], what="the sleeper's exec")
    yield proc
    proc.kill()
    proc.wait()


def test_a_running_process_of_this_user_is_the_target(sleeper: subprocess.Popen) -> None:
    target = check_target(str(sleeper.pid))
    me = psutil.Process(sleeper.pid)
    assert (target.pid, target.create_time, target.name) == (
        sleeper.pid,
        me.create_time(),
        me.name(),
    )
    assert target.argv == tuple(me.cmdline()) and target.user == me.username()
    assert target.command == shlex.join(me.cmdline())
    assert target.alive()
    assert target.to_json() == {
        "pid": sleeper.pid,
        "user": me.username(),
        "command": target.command,
        "owned": False,
        "attached": True,
    }
    assert target.to_json(probe=False) == {**target.to_json(), "probe": False}
    assert check_target(sleeper.pid) == target  # an int is a PID too
    sleeper.kill()
    sleeper.wait()
    assert not target.alive()


def test_a_process_started_by_gpumon_wrap_is_known_as_one(sleeper: subprocess.Popen) -> None:
    wrapped = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={**os.environ, "GPUMON_AUTOPROBE": "1"},
    )
    try:
        # until the child has exec'd: before that its /proc environment is still this process's
        wait_for(
            lambda: psutil.Process(wrapped.pid).environ().get("GPUMON_AUTOPROBE") == "1",
            what="the exec",
        )
        assert check_target(wrapped.pid).wrapped and not check_target(sleeper.pid).wrapped
    finally:
        wrapped.kill()
        wrapped.wait()


def test_a_recycled_pid_is_not_the_same_process(sleeper: subprocess.Popen) -> None:
    target = check_target(sleeper.pid)
    other = BesideTarget(target.pid, target.argv, target.name, target.user, target.create_time - 1)
    assert target.alive() and not other.alive()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", "--beside 'abc' is not a process id"),
        (None, "--beside None is not a process id"),
        ("0", "--beside 0 is not a process id"),
        ("-5", "--beside -5 is not a process id"),
    ],
)
def test_what_is_not_a_process_id(text, message: str) -> None:
    with pytest.raises(ValueError) as err:
        check_target(text)
    assert str(err.value) == message


def test_pid_1_is_a_process_id() -> None:
    """init: a process id like any other, refused for what it is: another user's process, or (one's own, as root
    here) an ancestor of gpumon, as every process of its PID namespace is."""
    init = psutil.Process(1)
    assert init in psutil.Process().parents()
    with pytest.raises(ValueError) as err:
        check_target("1")
    if init.uids().real == os.getuid():
        assert str(err.value) == (
            f"--beside 1 ({init.name()}) is an ancestor of gpumon: its process tree holds "
            "gpumon and its jobs, whose use would be counted as its own; name the training "
            "process itself"
        )
    else:
        assert str(err.value) == (
            f"--beside 1 belongs to {init.username()}, not to you (gpumon watches only your "
            "own processes)"
        )


def test_gpumon_itself_and_a_gone_process_are_refused() -> None:
    with pytest.raises(ValueError) as err:
        check_target(os.getpid())
    assert str(err.value) == f"--beside {os.getpid()} is gpumon itself"
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(ValueError) as err:
        check_target(gone.pid)
    assert str(err.value) == f"--beside {gone.pid}: no such process"


def test_a_zombie_is_no_process() -> None:
    zombie = subprocess.Popen(["true"])  # not reaped: a zombie once it has exited, until wait()
    try:
        wait_for(
            lambda: psutil.Process(zombie.pid).status() == psutil.STATUS_ZOMBIE,
            what="the child's exit",
        )
        with pytest.raises(ValueError) as err:
            check_target(zombie.pid)
        assert str(err.value) == f"--beside {zombie.pid}: no such process"
    finally:
        zombie.wait()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to start a process as another user")
def test_another_users_process_is_refused() -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")

    def become_nobody() -> None:
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    def become_unnamed() -> None:  # a uid without a name in /etc/passwd
        os.setgid(54321)
        os.setuid(54321)

    other = subprocess.Popen(["sleep", "60"], preexec_fn=become_nobody)
    unnamed = subprocess.Popen(["sleep", "60"], preexec_fn=become_unnamed)
    try:
        with pytest.raises(ValueError) as err:
            check_target(other.pid)
        assert str(err.value) == (
            f"--beside {other.pid} belongs to nobody, not to you "
            "(gpumon watches only your own processes)"
        )
        with pytest.raises(ValueError) as err:
            check_target(unnamed.pid)
        assert str(err.value) == (
            f"--beside {unnamed.pid} belongs to 54321, not to you "
            "(gpumon watches only your own processes)"
        )
    finally:
        for proc in (other, unnamed):
            proc.kill()
            proc.wait()


def test_the_spec_is_the_program_without_its_directory_on_one_line() -> None:
    target = BesideTarget(
        42, ("/usr/bin/python3", "train.py", "--name", "two words"), "python3", "me", 1.0
    )
    assert target.spec == "pid 42: python3 train.py --name 'two words'"
    assert BesideTarget(42, (), "kworker", "me", 1.0).spec == "pid 42: kworker"
    assert BesideTarget(42, (), "kworker", "me", 1.0).command == "kworker"
    multiline = BesideTarget(42, ("python", "-c", "import x\nx.run()"), "python", "me", 1.0)
    assert "\n" not in multiline.spec and multiline.spec == "pid 42: python -c 'import x x.run()'"
    long = BesideTarget(42, ("python", "a" * 100), "python", "me", 1.0)
    assert long.spec == "pid 42: " + ("python " + "a" * 100)[: beside.SPEC_CHARS - 1] + "…"
    exact = BesideTarget(42, ("p" * beside.SPEC_CHARS,), "p", "me", 1.0)
    assert exact.spec == "pid 42: " + "p" * beside.SPEC_CHARS  # exactly the limit: not cut


def _step(t: float, process: str = "B", warmup: bool = False) -> StepBatch:
    return StepBatch.of(StepEvent(process, 7, 0, t, 0.01, warmup=warmup))


def test_solo_history_counts_post_warmup_steps_of_its_process_only() -> None:
    history = SoloHistory()
    assert history.slot == "B" and history.span() == 0.0 and history.steps == 0
    assert history.first is None and history.last is None
    for item in (
        _step(-5.0, warmup=True),
        _step(-4.0),
        _step(-3.0, "A"),
        WorkloadState("B", "running", 0.0),
        _step(-2.5),
        _step(1.0),
    ):
        history.handle(item)
    assert (history.first, history.last, history.steps) == (-4.0, 1.0, 3)
    assert history.span() == 5.0


def test_a_may_start_after_the_lead_of_solo_steps_once_b_was_watched_alone_two_seconds() -> None:
    history = SoloHistory()
    for i in range(beside.MIN_SOLO_STEPS):
        history.handle(
            _step(-10.0 + i * 10.0 / (beside.MIN_SOLO_STEPS - 1))
        )  # 20 steps over exactly 10 s
    assert history.span() == pytest.approx(10.0)
    assert not history.enough(
        1.99, 10.0
    )  # its history is long enough, but it was not watched alone 2 s yet
    assert history.enough(2.0, 10.0)
    assert not history.enough(
        2.0, 10.5
    )  # a longer lead than its steps span: wait for it (or the lead alone)
    assert history.enough(10.5, 10.5)
    assert not history.enough(0.9, 1.0) and history.enough(
        1.0, 1.0
    )  # a lead under 2 s: alone that long


def test_too_few_solo_steps_wait_for_the_lead_watched_alone() -> None:
    history = SoloHistory()
    for i in range(beside.MIN_SOLO_STEPS - 1):
        history.handle(_step(-20.0 + i))
    assert history.span() == 18.0
    assert not history.enough(5.0, 10.0) and not history.enough(9.99, 10.0)
    assert history.enough(10.0, 10.0)
    history.handle(_step(0.0))
    assert history.enough(5.0, 10.0)


def test_known_use_phrases_what_nvml_gave() -> None:
    use = KnownUse(80.0, 60.0, 2048.0, 3072.0)
    assert (
        use.phrase("fcn") == "SM 80 % alone → 60 % beside fcn (-25 %), GPU memory 2.0 GiB → 3.0 GiB"
    )
    assert (
        KnownUse(40.0, 50.0, NAN, NAN).phrase("gemm") == "SM 40 % alone → 50 % beside gemm (+25 %)"
    )
    assert KnownUse(NAN, 50.0, NAN, NAN).phrase("gemm") == "SM n/a alone → 50 % beside gemm"
    assert KnownUse(0.0, 50.0, NAN, NAN).phrase("gemm") == "SM 0 % alone → 50 % beside gemm"
    assert (
        KnownUse(0.5, 1.0, NAN, NAN).phrase("x") == "SM 0 % alone → 1 % beside x (+100 %)"
    )  # under 1 %: a change
    assert KnownUse(10.0, 19.0, NAN, NAN).phrase("x") == "SM 10 % alone → 19 % beside x (+90 %)"
    assert KnownUse(NAN, NAN, 102400.0, 51200.0).phrase("x") == "GPU memory 100.0 GiB → 50.0 GiB"
    assert KnownUse(40.0, NAN, NAN, NAN).phrase("gemm") == "SM 40 % alone → n/a beside gemm"
    assert KnownUse(NAN, NAN, 1536.0, NAN).phrase("x") == "GPU memory 1.5 GiB → n/a"
    assert KnownUse(NAN, NAN, NAN, NAN).phrase("x") == "no GPU figures for it (NVML gave none)"
    assert (
        KnownUse(NAN, NAN, NAN, NAN, sampled=False).phrase("x")
        == "no GPU figures for it yet (no process sample so far)"
    )
    assert (
        KnownUse(NAN, NAN, NAN, NAN, "unavailable: disabled (--no-nvml)", sampled=False).phrase("x")
        == "no GPU figures for it (NVML unavailable: disabled (--no-nvml))"
    ), "NVML off: it never will have any, sampled or not"
    assert use.to_dict() == {
        "sm_pct_alone": 80.0,
        "sm_pct_shared": 60.0,
        "gpu_mem_mib_alone": 2048.0,
        "gpu_mem_mib_shared": 3072.0,
    }
    assert KnownUse(NAN, 1.0, NAN, 2.0).to_dict() == {
        "sm_pct_alone": None,
        "sm_pct_shared": 1.0,
        "gpu_mem_mib_alone": None,
        "gpu_mem_mib_shared": 2.0,
    }


def _sample(t: float, sm: float, mem: float, process: str = "B") -> ProcessSample:
    return ProcessSample(t, process, 7, 10.0, 100.0, 3, gpu_mem_mib=mem, gpu_sm_util=sm)


def test_live_known_use_means_before_the_other_job_and_the_last_sample_now() -> None:
    live = LiveKnownUse()
    assert live.slot == "B" and live.other_started is False
    known = live.known()
    assert all(
        math.isnan(v)
        for v in (known.sm_alone, known.sm_shared, known.mem_alone_mib, known.mem_shared_mib)
    )
    assert known.phrase("A") == "no GPU figures for it yet (no process sample so far)"
    live.handle(_sample(0.2, 80.0, 2000.0, process="A"))
    assert not live.known().sampled, "the other job's sample is not this one's"
    for item in (
        _sample(0.5, 80.0, 2000.0),
        _sample(1.0, NAN, 2100.0),
        _sample(1.5, 70.0, NAN),
        _sample(1.7, 5.0, 5.0, process="A"),
        WorkloadState("B", "running", 1.8),
    ):
        live.handle(item)
    assert live.other_started is False  # A's sample and B's own state do not end B's time alone
    live.handle(
        WorkloadState("A", "starting", 1.9)
    )  # before A's process exists: what follows is beside it
    assert live.other_started is True
    live.handle(
        _sample(1.95, 60.0, 2500.0)
    )  # sampled while A was being launched: beside A, not alone
    live.handle(WorkloadState("A", "running", 2.0))
    live.handle(_sample(2.5, 40.0, 3000.0))
    live.handle(_sample(3.0, 30.0, 3500.0))
    assert live.known() == KnownUse(75.0, 30.0, 2050.0, 3500.0)
    late = LiveKnownUse()
    late.handle(_sample(0.5, NAN, NAN))
    assert late.known().phrase("A") == "no GPU figures for it (NVML gave none)", (
        "sampled, without GPU figures: NVML gave none"
    )


def test_the_attached_pid_is_never_another_gpu_process() -> None:
    """Claimed before its slot knows it (the probe's history is still being read), it is not listed as another."""

    class Listing(FakeNvml):
        def gpu_process_metrics(self, t=None):
            return {
                4242: GpuProcessMetrics(4242, 100.0, 10.0),
                5151: GpuProcessMetrics(5151, 200.0, 20.0),
            }

    class Host(FakeHost):
        def sample_others(self, t, gpu):
            return tuple(
                OtherGpuProcess(t, pid, m.gpu_mem_mib, m.gpu_sm_util)
                for pid, m in sorted(gpu.items())
            )

    bus = Bus()
    items = Collect(bus)
    sampler = Sampler(bus, RunClock.start(), Host(), Listing(), 0.5, dict)
    sampler.tick()
    sampler.claim(4242)
    sampler.tick()
    first, second = items.of(GpuOthers)
    assert [p.pid for p in first.processes] == [
        4242,
        5151,
    ]  # before: another process, as the monitor shows it
    assert [p.pid for p in second.processes] == [5151]


def test_a_slow_probed_job_holds_a_until_its_exclusive_rate_has_the_steps_it_needs() -> None:
    """Watched alone the whole lead is not enough for a job whose probe steps slowly: A waits for the steps the live
    line's (and compare's) rate alone needs, else the run could never say r for it (seen on a loaded box: 9.6 steps
    in --stagger 3, 'STP needs the exclusive rate of B' for two minutes). A job with no step at all (no probe) does
    not hold A."""
    history = SoloHistory()
    assert history.enough(3.0, 3.0)  # nothing seen: no probe, the lead alone
    history.handle(_step(-1.0, warmup=True))
    assert not history.enough(30.0, 3.0)  # a probe, still in its warm-up
    for i in range(MIN_EXCLUSIVE_STEPS):
        history.handle(_step(i * 0.4))
    assert history.steps == MIN_EXCLUSIVE_STEPS and not history.enough(30.0, 3.0)
    history.handle(_step(MIN_EXCLUSIVE_STEPS * 0.4))
    assert history.enough(30.0, 3.0) and not history.enough(2.9, 3.0)


def test_the_fewest_solo_steps_may_span_exactly_the_shortest_phase() -> None:
    history = SoloHistory()
    for i in range(MIN_EXCLUSIVE_STEPS + 1):
        history.handle(_step(i * MIN_EXCLUSIVE_S / MIN_EXCLUSIVE_STEPS))
    assert history.span() == MIN_EXCLUSIVE_S and history.enough(30.0, 3.0)
