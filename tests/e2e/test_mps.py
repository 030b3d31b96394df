"""``--share mps``: gpumon's own MPS daemon, its clients, and its end at every kind of end.

The daemon is a fake ``nvidia-cuda-mps-control`` (tests/mps/), a script at the hardware boundary
that records its argv, environment and commands; everything else is real: gpumon, its guardian
process, the child jobs and their environments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpumon.commands import argtypes
from gpumon.core.records.share import ShareMode, parse_share
from gpumon.errors import UsageError
from tests.helpers import GPUMON, gpumon, only_run, wait_for

# One module at a time runs MPS daemons on this box (tests/e2e/conftest.py); waiting for another's (the validation
# script's, a few minutes loaded) counts in this module's first test.
pytestmark = [pytest.mark.usefixtures("one_mps_daemon"), pytest.mark.timeout(900)]

FAKE_BIN = Path(__file__).resolve().parents[1] / "mps"
JOB = """
import json, os, sys, time
from gpumon import probe
print("MPSENV " + json.dumps({k: v for k, v in os.environ.items() if k.startswith("CUDA_MPS")}), flush=True)
for _ in range(int(sys.argv[1])):
    time.sleep(0.02)
    probe.step()
"""


@pytest.fixture
def fake_mps(tmp_path: Path) -> dict[str, str]:
    """An environment with the fake daemon first on PATH, logging to tmp_path/mps.log."""
    (tmp_path / "job.py").write_text(JOB)
    return {
        "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
        "FAKE_MPS_LOG": str(tmp_path / "mps.log"),
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "no-default-daemon"),
    }


def log_lines(env: dict[str, str]) -> list[str]:
    path = Path(env["FAKE_MPS_LOG"])
    return path.read_text().splitlines() if path.exists() else []


def job(tmp_path: Path, steps: int) -> str:
    return f"{sys.executable} {tmp_path / 'job.py'} {steps}"


def client_env(run: Path, slot: str) -> dict[str, str]:
    line = next(
        line
        for line in (run / "logs" / f"{slot}.out").read_text().splitlines()
        if line.startswith("MPSENV ")
    )
    return json.loads(line.removeprefix("MPSENV "))


def daemon_pid(env: dict[str, str]) -> int:
    first = next(line for line in log_lines(env) if line.startswith("argv=[-f]"))
    return int(first.split("pid=")[1].split()[0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def mps_run(tmp_path: Path, runs: Path, share: str, *steps: int) -> list[str]:
    """``gpumon run`` of one job of each of ``steps`` probed steps, under ``--share share``, without NVML."""
    jobs = [arg for n in steps for arg in ("--cmd", job(tmp_path, n))]
    return ["run", *jobs, "--share", share, "--no-nvml", "--out", str(runs)]


def serving_daemon(runs: Path, env: dict[str, str]) -> int:
    """The daemon's PID once job B runs as its client, checked alive."""
    wait_for(
        lambda: any(
            line.startswith("MPSENV")
            for p in runs.glob("*/logs/B.out")
            for line in p.read_text().splitlines()
        ),
        timeout=60,
        what="job B running as an MPS client",
    )
    pid = daemon_pid(env)
    assert alive(pid)
    return pid


def daemon_ended(env: dict[str, str], pid: int) -> None:
    """Wait until the daemon says it exited and its process is gone."""
    wait_for(lambda: "daemon exited" in log_lines(env), timeout=30, what="the daemon to quit")
    wait_for(lambda: not alive(pid), timeout=10, what="the daemon process to end")


def doctor_mps(env: dict[str, str]) -> dict:
    result = gpumon("doctor", "--json", env=env)
    return next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "mps")


def test_doctor_says_whether_mps_is_usable(tmp_path: Path, fake_mps: dict[str, str]) -> None:
    usable = doctor_mps(fake_mps)
    assert usable["level"] == "ok" and usable["detail"]["control"] == str(
        FAKE_BIN / "nvidia-cuda-mps-control"
    )
    empty = tmp_path / "bin"
    empty.mkdir()
    missing = doctor_mps({"PATH": f"{empty}{os.pathsep}{Path(sys.executable).parent}"})
    assert (
        missing["level"] == "warn"
        and missing["summary"] == "MPS unavailable: nvidia-cuda-mps-control not found"
    )


def test_share_modes_parse_and_describe() -> None:
    assert parse_share("timeslice") == ShareMode()
    assert parse_share("mps") == ShareMode("mps")
    assert parse_share("mps:threads=30,70") == ShareMode("mps", threads=(30, 70))
    assert parse_share("mps:existing") == ShareMode("mps", existing=True)
    assert parse_share("mps:threads=30,70").describe() == "mps 30/70"
    for bad in (
        "mig",
        "mps:threads=0,50",
        "mps:threads=30",
        "mps:threads=30,101",
        "timeslice:x",
        "mps:bogus",
    ):
        with pytest.raises(ValueError):
            parse_share(bad)
        with pytest.raises(UsageError, match="^bad --share"):
            argtypes.share(bad)
    assert ShareMode.from_json(None) == ShareMode() and ShareMode.from_json("mps") == ShareMode()
    assert (
        ShareMode.from_json(
            {"mode": "mps", "threads": [30, 70], "existing_daemon": False}
        ).describe()
        == "mps 30/70"
    )
    assert ShareMode.from_json(ShareMode("mps", existing=True).to_json()) == ShareMode(
        "mps", existing=True
    )


def test_mps_daemon_private_dirs_client_env_and_quit(
    tmp_path: Path, fake_mps: dict[str, str]
) -> None:
    runs = tmp_path / "runs"
    result = gpumon(
        *mps_run(tmp_path, runs, "mps:threads=30,70", 20, 20), "--headless", env=fake_mps
    )
    assert result.returncode == 0, result.stderr
    run = only_run(runs)
    pipe = client_env(run, "A")["CUDA_MPS_PIPE_DIRECTORY"]
    # private: in the run directory, or a private temp dir where that path is too long for a socket
    assert pipe == str(run / "mps" / "pipe") or Path(pipe).name.startswith("gpumon-mps-pipe-"), pipe
    assert not Path(pipe).exists(), "the pipe directory is removed with the daemon"
    lines = log_lines(fake_mps)
    assert (
        lines[0] == f"argv=[-f] pid={daemon_pid(fake_mps)} pipe={pipe} logdir={run / 'mps' / 'log'}"
    )
    assert lines[-2:] == ["command quit", "daemon exited"], (
        lines
    )  # told to quit before gpumon returned
    for slot, threads in (("A", "30"), ("B", "70")):
        assert client_env(run, slot) == {
            "CUDA_MPS_PIPE_DIRECTORY": pipe,
            "CUDA_MPS_LOG_DIRECTORY": str(run / "mps" / "log"),
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": threads,
        }
    meta = json.loads((run / "run.json").read_text())
    assert meta["share"] == {"mode": "mps", "threads": [30, 70], "existing_daemon": False}
    assert not alive(daemon_pid(fake_mps))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_daemon_quits_when_gpumon_is_stopped_or_killed(
    tmp_path: Path, fake_mps: dict[str, str], signum: int
) -> None:
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [*GPUMON, *mps_run(tmp_path, runs, "mps", 100_000, 100_000), "--headless"],
        env={**os.environ, **fake_mps},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pid = serving_daemon(runs, fake_mps)
        proc.send_signal(signum)
        proc.wait(30)
        daemon_ended(fake_mps, pid)
        assert "command quit" in log_lines(fake_mps)
        pipe = (
            next(line for line in log_lines(fake_mps) if line.startswith("argv=[-f]"))
            .split("pipe=")[1]
            .split()[0]
        )
        wait_for(
            lambda: not Path(pipe).exists(),
            timeout=10,
            what="the guardian to remove the pipe directory",
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_failure_to_start_the_daemon_is_one_line_and_leaves_nothing(
    tmp_path: Path, fake_mps: dict[str, str]
) -> None:
    runs = tmp_path / "runs"
    env = {**fake_mps, "FAKE_MPS_FAIL": "cannot open /dev/nvidiactl"}
    result = gpumon(*mps_run(tmp_path, runs, "mps", 5), "--headless", env=env)
    assert result.returncode == 1, "the daemon would not start: this machine, not the input"
    assert result.stderr.strip().splitlines()[-1] == (
        "gpumon: error: could not start the MPS daemon: nvidia-cuda-mps-control exited with status 1: "
        "cannot open /dev/nvidiactl"
    )
    assert "Traceback" not in result.stderr
    assert not [p for p in runs.iterdir() if (p / "run.json").exists()]


def test_without_mps_binaries_or_on_the_cpu_one_line_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": f"{empty}{os.pathsep}{Path(sys.executable).parent}"}
    result = gpumon(
        "run",
        "--cmd",
        "true",
        "--share",
        "mps",
        "--headless",
        "--out",
        str(tmp_path / "runs"),
        env=env,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "gpumon: error: --share mps needs nvidia-cuda-mps-control on PATH (it comes with the NVIDIA driver's CUDA tools)"
    )
    result = gpumon(
        "run",
        "fcn",
        "--device",
        "cpu",
        "--share",
        "mps",
        "--headless",
        "--out",
        str(tmp_path / "runs"),
    )
    assert result.returncode == 2 and "--device cpu has none" in result.stderr
    result = gpumon(
        "run", "fcn", "--share", "mps:threads=30", "--headless", "--out", str(tmp_path / "runs")
    )
    assert result.returncode == 2 and "bad --share" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_an_existing_daemon_is_used_only_when_asked_and_never_stopped(
    tmp_path: Path, fake_mps: dict[str, str]
) -> None:
    pipe = tmp_path / "user-pipe"
    pipe.mkdir()
    env = {**os.environ, **fake_mps, "CUDA_MPS_PIPE_DIRECTORY": str(pipe)}
    daemon = subprocess.Popen([str(FAKE_BIN / "nvidia-cuda-mps-control"), "-f"], env=env)
    try:
        wait_for(lambda: (pipe / "control").exists(), timeout=10, what="the user's daemon")
        runs = tmp_path / "runs"
        refused = gpumon(*mps_run(tmp_path, runs, "mps", 5), "--headless", env=fake_mps)
        assert refused.returncode == 2
        assert f"an MPS control daemon is already running (pipe directory {pipe})" in refused.stderr
        used = gpumon(*mps_run(tmp_path, runs, "mps:existing", 5), "--headless", env=fake_mps)
        assert used.returncode == 0, used.stderr
        assert client_env(only_run(runs), "A") == {"CUDA_MPS_PIPE_DIRECTORY": str(pipe)}
        assert daemon.poll() is None and "command quit" not in log_lines(fake_mps)
        assert doctor_mps(fake_mps)["summary"].startswith(
            f"MPS daemon already running (pipe directory {pipe})"
        )
    finally:
        subprocess.run(
            [str(FAKE_BIN / "nvidia-cuda-mps-control")],
            input="quit\n",
            text=True,
            env=env,
            timeout=10,
        )
        daemon.wait(10)


def test_compare_prints_the_share_mode_and_refuses_to_mix_modes(tmp_path: Path) -> None:
    from tests.tracegen import Job, write_run

    xa = write_run(tmp_path / "xa", [Job("A", "fcn", phases=((10, 0.1),), warmup=3)])
    xb = write_run(tmp_path / "xb", [Job("A", "lstm", phases=((10, 0.05),), warmup=3)])
    pair = [
        Job("A", "fcn", phases=((10, 0.2),), warmup=3),
        Job("B", "lstm", phases=((10, 0.1),), warmup=3),
    ]
    sliced = write_run(tmp_path / "sliced", pair)
    mps = write_run(tmp_path / "mps", pair)
    for run in (
        xa,
        xb,
        sliced,
        mps,
    ):  # GPU runs: on the CPU the jobs share cores, whatever --share said
        meta = json.loads((run / "run.json").read_text())
        meta["device"] = "cuda:0"
        if run == mps:
            meta["share"] = {"mode": "mps", "threads": None, "existing_daemon": False}
        (run / "run.json").write_text(json.dumps(meta))

    base = ["compare", "--exclusive", str(xa), "--exclusive", str(xb)]
    result = gpumon(*base, "--shared", str(mps), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pair"]["share"] == "mps"
    assert (
        "Pair (timeslice): STP" in gpumon(*base, "--shared", str(sliced)).stdout
    )  # runs from before modes
    mixed = gpumon(*base, "--shared", str(sliced), "--shared", str(mps))
    assert mixed.returncode == 2
    assert mixed.stderr.strip() == (
        "gpumon: error: the shared runs were recorded under different share modes (mps, timeslice): "
        "compare one mode at a time"
    )
    listed = json.loads(gpumon("runs", str(tmp_path), "--json").stdout)
    assert {r["name"]: r["share"] for r in listed} == {
        "xa": "timeslice",
        "xb": "timeslice",
        "sliced": "timeslice",
        "mps": "mps",
    }


def test_a_detached_runners_daemon_dies_with_the_runner_even_with_kill_9(
    tmp_path: Path, fake_mps: dict[str, str]
) -> None:
    runs = tmp_path / "runs"
    done = gpumon(
        *mps_run(tmp_path, runs, "mps", 100_000, 100_000), "--detach", "--json", env=fake_mps
    )
    assert done.returncode == 0, done.stderr
    runner = json.loads(done.stdout)["runner_pid"]
    try:
        pid = serving_daemon(runs, fake_mps)
        os.kill(
            runner, signal.SIGKILL
        )  # the terminal that started it is long gone: the runner is the owner
        daemon_ended(fake_mps, pid)
        assert json.loads(gpumon("runs", str(runs), "--json").stdout)[0]["status"] == "interrupted"
    finally:
        if alive(runner):
            os.kill(runner, signal.SIGKILL)
