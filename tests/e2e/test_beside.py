"""``gpumon run A --beside PID``: a real probed script started outside gpumon becomes job B, is measured from its
probe's history and live steps, and is never signalled: quitting gpumon, even ``kill -9``, leaves it running."""

from __future__ import annotations

import json
import os
import pwd
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from gpumon.core.probing import rendezvous
from gpumon.core.store.trace import load_run
from tests.fakenvml import build as fake
from tests.helpers import (
    headless_cpu,
    GPUMON,
    gpumon,
    only_run,
    post_warmup_steps,
    recorded,
    run_until,
    steps_span,
    wait_for,
)

# A training loop of its own (not started by gpumon): ~100 steps/s, and it logs its own clock every 20 steps.
STEPPER = textwrap.dedent(
    """
    import sys, time
    from gpumon import probe
    log = open(sys.argv[1], "a", buffering=1)
    step = 0
    while True:
        sum(range(3000))
        time.sleep(0.01)
        probe.step()
        if step % 20 == 0:
            log.write(f"{step} {time.monotonic_ns()}\\n")
        step += 1
    """
)


def start_stepper(tmp: Path, code: str = STEPPER, **env: str) -> tuple[subprocess.Popen, Path]:
    own_log = tmp / f"stepper-{len(list(tmp.glob('stepper-*')))}.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(own_log)],
        start_new_session=True,
        env={**os.environ, **env},
    )
    wait_for(
        lambda: own_log.exists() and own_log.read_text().count("\n") >= 3,
        what="the stepper's first steps",
    )
    return proc, own_log


def stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def scenario(pid: int) -> str:
    """The attached process and job A on the GPU. A is matched by its command line (the built-in workloads), not as
    any child of gpumon: gpumon's own short-lived children (platform.platform() runs `uname -p` as the capture
    starts) would be listed too, at A's 40 %, and scale B's SM before A ever started."""
    return f"""
        driver 550.54.15
        device name="NVIDIA Fake H100" uuid=GPU-beside mem_total_mib=81559 gpu_util=100 mem_used_mib=9000
        proc args="-m gpumon.workloads" under={os.getpid()} mem_mib=321 sm_util=40
        proc pid={pid} mem_mib=2048 sm_util=30
    """


def _rows_of(runs: Path, table: str, slot: str) -> int:
    return sum(row["process"] == slot for row in recorded(runs, table))


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory):
    """A probed stepper running for a while, then ``gpumon run fcn --beside PID`` (B alone 3 s first), stopped
    with Ctrl-C once A has 20 post-warm-up steps beside B and B 8 sampled rows."""
    if fake.compiler() is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml")
    tmp = tmp_path_factory.mktemp("beside")
    proc, own_log = start_stepper(tmp)
    try:
        lib = fake.build(tmp / "lib")
        env = fake.environment(lib, fake.write_scenario(tmp / "scenario.txt", scenario(proc.pid)))
        runs = tmp / "runs"
        result = run_until(
            [
                "fcn:preset=tiny",
                "--beside",
                str(proc.pid),
                "--stagger",
                "3",
                "--headless",
                "--device",
                "cpu",
            ],
            runs,
            env=env,
            what="A's 20 steps beside B and 8 samples of B",
            enough=lambda: steps_span(runs, "A")[0] >= 20 and _rows_of(runs, "processes", "B") >= 8,
        )
        assert result.returncode == 128 + signal.SIGINT, result.stderr
        alive_after = proc.poll() is None
        yield only_run(tmp / "runs"), proc, own_log, result.stderr, alive_after
    finally:
        stop(proc)


def test_the_process_is_job_b_and_is_left_running(capture) -> None:
    path, proc, _, stderr, alive_after = capture
    assert alive_after  # Ctrl-C ended the run; the attached process was not signalled
    assert (
        f"gpumon: watching pid {proc.pid} as B (reading its probe); gpumon never signals it"
        in stderr
    )
    assert f"gpumon: workload B detached: pid {proc.pid} still running" in stderr
    run = load_run(path)
    b = next(w for w in run.workloads if w.slot == "B")
    assert b.kind == "beside" and b.owned is False and b.attached is True and b.probe is True
    assert b.pid == proc.pid and b.user == pwd.getpwuid(os.getuid()).pw_name
    assert b.argv == psutil.Process(proc.pid).cmdline() and b.command == shlex.join(b.argv)
    assert b.state == "detached"
    assert b.exit_status is None and run.meta.mode == "shared"
    procs = run.processes()
    mine = procs[procs.process == "B"]
    assert len(mine) >= 8 and (mine.pid == proc.pid).all() and (mine.rss_mib > 1).all()
    assert (mine.gpu_mem_mib == 2048).all()  # NVML's per-process figures, as for a launched job
    assert proc.pid not in set(run.others()["pid"])  # job B, not "another process on the GPU"


def test_its_steps_are_its_own_clock(capture) -> None:
    """Every step the script logged itself is in steps.csv at the same instant: the same rate over any window."""
    path, proc, own_log, _, _ = capture
    run = load_run(path)
    steps = run.steps()
    b = steps[steps.process == "B"].set_index("step")
    t0 = run.meta.t0_monotonic_ns
    logged = {
        int(s): int(ns) for s, ns in (line.split() for line in own_log.read_text().splitlines())
    }
    seen = {s: ns for s, ns in logged.items() if s in b.index}
    assert len(seen) >= 20
    for s, ns in seen.items():
        assert (
            abs(b.loc[s, "t"] * 1e9 + t0 - ns) < 2e6
        )  # logged just after probe.step(): within 2 ms
    assert list(b.index) == list(range(b.index[0], b.index[-1] + 1))  # none lost, none twice
    first, last = min(seen), max(seen)
    own_rate = (last - first) / ((seen[last] - seen[first]) / 1e9)
    recorded = (last - first) / (b.loc[last, "t"] - b.loc[first, "t"])
    assert recorded == pytest.approx(own_rate, rel=0.02)
    assert (
        b["t"].min() < 0
    )  # its history from before gpumon started (how long before depends on the box)


def test_its_exclusive_rate_comes_from_before_a_started(capture) -> None:
    path, proc, _, _, _ = capture
    run = load_run(path)
    a_start = next(w for w in run.workloads if w.slot == "A").start_t
    assert a_start >= 2.0  # B was watched alone first
    done = gpumon("compare", "--shared", str(path), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    b = data["workloads"]["B"]
    assert b["baseline"] == "exclusive phase of the shared run"
    (alone,) = b["exclusive"]
    assert (
        alone["role"] == "exclusive phase"
        and alone["start"] < 0
        and alone["end"] == pytest.approx(a_start, abs=0.5)
    )
    assert b["slowdown"]["estimate"] > 0 and b["exclusive_rate"] > 10 and b["shared_rate"] > 10
    assert data["workloads"]["A"]["slowdown"]["estimate"] is None  # A never ran alone


def _watching(pid: int, runs: Path) -> subprocess.Popen:
    """A headless gpumon watching ``pid`` as job B, once it has recorded more than 50 of its steps into ``runs``."""
    monitor = subprocess.Popen(
        [*GPUMON, *headless_cpu(runs, "--beside", str(pid))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: (
                runs.exists()
                and any(runs.glob("*/run.json"))
                and (only_run(runs) / "steps.csv").read_text().count("\n") > 50
            ),
            what=f"B's steps recorded in {runs.name}",
        )
    except AssertionError:
        monitor.kill()
        monitor.wait()
        raise
    return monitor


def test_kill_9_of_gpumon_leaves_it_running(tmp_path: Path) -> None:
    proc, own_log = start_stepper(tmp_path)
    try:
        runs = tmp_path / "runs"
        monitor = _watching(proc.pid, runs)
        monitor.send_signal(signal.SIGINT)  # Ctrl-C
        assert monitor.wait(timeout=60) == 128 + signal.SIGINT
        assert proc.poll() is None
        assert load_run(only_run(runs)).workloads[0].state == "detached"

        again = _watching(proc.pid, tmp_path / "runs2")
        again.kill()  # kill -9: no PDEATHSIG reaches a process gpumon did not start
        again.wait()
        before = own_log.read_text().count("\n")
        wait_for(
            lambda: own_log.read_text().count("\n") > before + 3, what="the stepper still stepping"
        )
        assert proc.poll() is None
        sock = rendezvous.connect(proc.pid)  # and still ready for the next monitor
        assert sock is not None
        sock.close()
    finally:
        stop(proc)


def as_nobody() -> None:
    nobody = pwd.getpwnam("nobody")
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)


def test_bad_pids_are_refused_before_anything_starts(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    runs = tmp_path / "runs"
    cases = [
        (str(gone.pid), f"--beside {gone.pid}: no such process"),
        ("abc", "--beside 'abc' is not a process id"),
    ]
    for pid, message in cases:
        done = gpumon("run", "fcn", "--beside", pid, "--headless", "--out", str(runs))
        assert (done.returncode, done.stderr) == (2, f"gpumon: error: {message}\n")
    itself = subprocess.run(
        ["sh", "-c", f"exec {' '.join(GPUMON)} run --beside $$ --headless --out {runs}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert itself.returncode == 2 and itself.stderr.endswith("is gpumon itself\n"), itself.stderr
    if os.getuid() == 0:
        other = subprocess.Popen(["sleep", "60"], preexec_fn=as_nobody)
        try:
            done = gpumon("run", "--beside", str(other.pid), "--headless", "--out", str(runs))
            assert done.returncode == 2
            assert done.stderr == (
                f"gpumon: error: --beside {other.pid} belongs to nobody, not to you "
                "(gpumon watches only your own processes)\n"
            )
        finally:
            other.kill()
            other.wait()
    assert not runs.exists()


BLIND = "import time\nwhile True:\n    sum(range(3000))\n    time.sleep(0.01)\n"  # a job without gpumon's probe


@pytest.mark.skipif(fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml")
def test_without_a_probe_the_rate_is_unknown_and_what_is_known_is_said(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", BLIND], start_new_session=True)
    try:
        lib = fake.build(tmp_path / "lib")
        text = scenario(proc.pid).replace(
            "sm_util=30", "sm_util=80"
        )  # alone 80 %; beside A (40 %) scaled to 67 %
        env = fake.environment(lib, fake.write_scenario(tmp_path / "scenario.txt", text))
        runs = tmp_path / "runs"
        # until A's steps span 2 s and B was sampled 4 times inside them (compare's shared window)
        done = run_until(
            [
                "fcn:preset=tiny",
                "--beside",
                str(proc.pid),
                "--stagger",
                "2",
                "--headless",
                "--device",
                "cpu",
            ],
            runs,
            env=env,
            what="2 s of A's steps and 4 samples of B beside them",
            enough=lambda: steps_span(runs, "A")[1] >= 2.0 and _sampled_beside_a(runs) >= 4,
        )
        assert done.returncode == 128 + signal.SIGINT, done.stderr
        assert proc.poll() is None
    finally:
        stop(proc)
    assert f"watching pid {proc.pid} as B (no probe: its rate is unknown)" in done.stderr
    live = [line for line in done.stdout.splitlines() if " B pid " in line]
    # a status line before B's first process sample (they come once a second, not in step with the lines) says so
    known = [line for line in live if "no GPU figures for it" not in line]
    assert known and live[-len(known) :] == known, "once known, its figures stay known"
    assert all(
        "no GPU figures for it yet (no process sample so far)" in line
        for line in live[: -len(known)]
    ), "before its first process sample a line says it was not sampled, not that NVML gave nothing"
    assert all("rate unknown (no probe)" in line for line in live)
    assert all("rate unknown (no probe)  SM 80 % alone →" in line for line in known)
    assert "beside fcn" in live[-1] and "GPU memory 2.0 GiB → 2.0 GiB" in live[-1]

    path = only_run(tmp_path / "runs")
    assert load_run(path).workloads[1].probe is False
    text_out = gpumon("compare", "--shared", str(path))
    assert text_out.returncode == 0, text_out.stderr
    assert (
        "B: rate unknown (no probe); what is known: SM 80 % alone → 67 % beside fcn (-17 %), "
        "GPU memory 2.0 GiB → 2.0 GiB" in text_out.stdout
    ), [line for line in text_out.stdout.splitlines() if "B" in line]
    as_json = json.loads(gpumon("compare", "--shared", str(path), "--json").stdout)
    b = as_json["workloads"]["B"]
    assert (
        b["rate"] == "unknown (no probe)"
        and b["slowdown"]["estimate"] is None
        and b["exclusive_rate"] is None
    )
    assert b["known"]["sm_pct_alone"] == pytest.approx(80, abs=1) and b["known"][
        "sm_pct_shared"
    ] == pytest.approx(66.7, abs=1)
    assert b["known"]["gpu_mem_mib_alone"] == b["known"]["gpu_mem_mib_shared"] == 2048
    assert (
        as_json["pair"]["stp"]["estimate"] is None and as_json["pair"]["verdict"] == "cannot tell"
    )
    assert as_json["workloads"]["A"]["shared_rate"] > 0
    assert "rate unknown (no probe)" in as_json["summary"]


def test_a_wrapped_process_that_has_not_stepped_yet_is_said_to_be_so(tmp_path: Path) -> None:
    """Its probe opens at its first step: watched before that, it has no probe for the whole run, and gpumon says
    why (the H100 validation attached to a wrapped job still importing torch)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpumon", "wrap", "--", sys.executable, "-c", BLIND],
        start_new_session=True,
        env={**os.environ, "GPUMON_RUNTIME_DIR": str(tmp_path / "rt")},
    )
    try:
        wait_for(
            lambda: psutil.Process(proc.pid).environ().get("GPUMON_AUTOPROBE") == "1",
            what="the exec of wrap",
        )
        done = gpumon(
            *headless_cpu(
                tmp_path / "runs",
                "gemm:preset=tiny",
                "--beside",
                str(proc.pid),
                "--stagger",
                "1",
                "--duration",
                "2",
            ),
            timeout=180,
            env={**os.environ, "GPUMON_RUNTIME_DIR": str(tmp_path / "rt")},
        )
        assert proc.poll() is None
    finally:
        stop(proc)
    assert done.returncode == 0, done.stderr
    assert (
        f"pid {proc.pid} runs under gpumon wrap, but its probe opens at its first training step and it has taken "
        "none yet: its rate stays unknown in this run (watch it again once it trains)"
    ) in done.stderr


def _sampled_beside_a(runs: Path) -> int:
    """How many process ticks sampled B after A's first post-warm-up step (inside compare's shared window)."""
    a = post_warmup_steps(runs).get("A")
    return (
        sum(
            row["process"] == "B" and float(row["t"]) > min(a)
            for row in recorded(runs, "processes")
        )
        if a
        else 0
    )


def test_a_process_that_ends_while_watched(tmp_path: Path) -> None:
    """It ends by itself: recorded as exited (status unknown: not gpumon's child), and the run ends with it."""
    code = STEPPER.replace(
        "while True:", "for _ in range(300):"
    )  # about 3 s of steps, then it exits
    proc, _ = start_stepper(tmp_path, code)
    try:
        done = gpumon(*headless_cpu(tmp_path / "runs", "--beside", str(proc.pid)))
    finally:
        stop(proc)
    assert done.returncode == 0, done.stderr
    assert (
        f"gpumon: workload B (pid {proc.pid}) exited by itself (status unknown: gpumon did not start it)"
        in done.stderr
    )
    (entry,) = load_run(only_run(tmp_path / "runs")).workloads
    assert entry.state == "exited" and entry.exit_status is None and entry.stop_t > entry.start_t
