"""Runs that outlive the terminal: ``gpumon run --detach``, ``gpumon attach`` in a real pty, ``gpumon stop``.

Real processes throughout: the runner trains two CPU jobs, the viewers are real ``gpumon attach``
processes in tmux panes (a real pseudo-terminal each), and closing a pane's terminal is a real SIGHUP.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.test_run_headless import stepping
from tests.helpers import gpumon, new_tmux, recording_claim, wait_for

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux to own a terminal")


# Probe steppers, which start in a fraction of a second: A's exclusive phase before B's start, which compare
# needs, is there on any machine (a torch job on a loaded 2-core box can still be warming up at the stagger).
STEPPER = "import time\nfrom gpumon import probe\nwhile True:\n    time.sleep(0.01)\n    probe.step(samples=8)\n"


def _env(tmp_path: Path) -> dict[str, str]:
    return {"GPUMON_RUNS": str(tmp_path / "runs"), "NO_COLOR": "1"}


def _detach(tmp_path: Path, *args: str) -> tuple[Path, psutil.Process]:
    """``gpumon run ARGS --detach --json``: the run directory and the runner, once it returned."""
    started = time.monotonic()
    done = gpumon(
        "run",
        *args,
        "--device",
        "cpu",
        "--no-nvml",
        "--detach",
        "--json",
        env=_env(tmp_path),
        timeout=60,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    run_dir, runner = Path(answer["run"]), psutil.Process(answer["runner_pid"])
    assert took < 20, f"--detach took {took:.1f} s to return"
    assert "gpumon attach" in done.stderr and "gpumon stop" in done.stderr
    return run_dir, runner


def _jobs(run_dir: Path) -> list[psutil.Process]:
    meta = json.loads((run_dir / "run.json").read_text())
    return [psutil.Process(w["pid"]) for w in meta["workloads"] if w.get("pid")]


def _steps(run_dir: Path) -> int:
    return (run_dir / "steps.csv").read_bytes().count(b"\n")


class Pane:
    """One tmux server with one pane running a command in a real pty of ``cols`` x ``rows``."""

    def __init__(
        self, tmp_path: Path, name: str, command: list[str], env: dict[str, str], cols=120, rows=40
    ) -> None:
        self.socket = str(tmp_path / f"{name}.tmux")
        environment = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        line = f"env {environment} {shlex.join(command)}; echo viewer-exit=$?; sleep 600"
        new_tmux(self.socket, cols, rows, [line], {**os.environ, **env})

    def screen(self) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, "capture-pane", "-p"], capture_output=True, text=True
        )
        return done.stdout

    def wait_screen(self, shows, timeout: float, what: str) -> str:
        """The screen once ``shows(screen)`` holds."""
        return wait_for(
            lambda: (lambda s: s if shows(s) else None)(self.screen()), timeout=timeout, what=what
        )

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "send-keys", *keys], check=True)

    def program(self) -> psutil.Process:
        """The process running in the pane (the viewer)."""
        pane_pid = int(
            subprocess.run(
                ["tmux", "-S", self.socket, "list-panes", "-F", "#{pane_pid}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()[0]
        )
        return wait_for(
            lambda: next(
                (
                    p
                    for p in psutil.Process(pane_pid).children()
                    if "gpumon" in " ".join(p.cmdline())
                ),
                None,
            ),
            what="the viewer in the pane",
        )

    def close(self) -> None:
        """Kill the tmux server: the pane's terminal goes away and its program gets SIGHUP."""
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], check=False)


def _rates_shown(screen: str) -> bool:
    """Both panels show a number of it/s (not "–") below their titles."""
    lines = [line for line in screen.splitlines() if "iter/s" in line]
    return (
        bool(lines)
        and all(line.count("iter/s") == 2 for line in lines[:1])
        and "–" not in lines[0].split("iter/s")[1]
    )


@needs_tmux
def test_detach_attach_hangup_second_viewer_stop_compare(tmp_path):
    env = _env(tmp_path)
    stepper = shlex.join([sys.executable, "-c", STEPPER])
    run_dir, runner = _detach(
        tmp_path, "--cmd", stepper, "--cmd", stepper, "--stagger", "3"
    )  # A alone first
    viewers: list[Pane] = []
    try:
        assert (
            runner.ppid() != os.getpid() and os.getsid(runner.pid) == runner.pid
        )  # its own session, not our child
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["runner"]["pid"] == runner.pid and meta["runner"]["detached"] is True
        wait_for(lambda: stepping(run_dir) == {"A", "B"}, timeout=120, what="both jobs stepping")
        listed = json.loads(gpumon("runs", "--json", env=env).stdout)
        assert [(r["status"], r["runner"]["pid"]) for r in listed] == [("running", runner.pid)]

        first = Pane(tmp_path, "first", [sys.executable, "-m", "gpumon", "attach", "last"], env)
        viewers.append(first)
        screen = first.wait_screen(
            lambda s: "A · " in s and "B · " in s and _rates_shown(s),
            60,
            "the viewer showing both jobs' live rates",
        )
        assert "gpumon attach" in screen and f"runner pid {runner.pid}" in screen
        (tmp_path / "attach-120x40.txt").write_text(
            screen
        )  # the pane as the user saw it, kept with the test's files
        viewer = first.program()

        first.close()  # the viewer's terminal goes away: SIGHUP
        psutil.wait_procs([viewer], timeout=20)
        assert not viewer.is_running(), "the viewer outlived its terminal"
        before = _steps(run_dir)
        wait_for(
            lambda: _steps(run_dir) > before + 20,
            timeout=30,
            what="steps still arriving after the viewer's hang-up",
        )
        assert runner.is_running() and all(job.is_running() for job in _jobs(run_dir))

        second = Pane(
            tmp_path,
            "second",
            [sys.executable, "-m", "gpumon", "attach", run_dir.name],
            env,
            cols=80,
            rows=24,
        )
        viewers.append(second)
        wait_for(
            lambda: "A · " in second.screen() and _rates_shown(second.screen()),
            timeout=60,
            what="a second viewer on the same run",
        )
        jobs = _jobs(run_dir)
        stopped = gpumon("stop", "last", env=env, timeout=90)
        assert stopped.returncode == 0, stopped.stderr
        assert "run saved to" in stopped.stderr
        psutil.wait_procs([runner, *jobs], timeout=20)
        assert not runner.is_running() and not any(job.is_running() for job in jobs)
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["status"] == "complete" and meta["duration_s"] > 0
        assert [w["state"] for w in meta["workloads"]] == ["stopped", "stopped"]
        wait_for(
            lambda: "ended: complete" in second.screen(),
            timeout=20,
            what="the viewer saying the run ended",
        )
        assert second.program().is_running()  # it stays on the final picture until the user quits
        second.keys("q")
        wait_for(
            lambda: "viewer-exit=0" in second.screen(),
            timeout=20,
            what="the viewer quitting with q",
        )

        compared = gpumon("compare", "--shared", str(run_dir), "--json", env=env)
        assert compared.returncode == 0, compared.stderr
        assert set(json.loads(compared.stdout)["workloads"]) == {"A", "B"}
        assert (
            "runner pid" in (run_dir / "runner.log").read_text()
            or (run_dir / "runner.log").stat().st_size > 0
        )
    finally:
        for pane in viewers:
            pane.close()
        if runner.is_running():
            runner.kill()


def test_kill_9_of_the_runner_ends_its_jobs_and_the_run_reads_interrupted(tmp_path):
    env = _env(tmp_path)
    run_dir, runner = _detach(tmp_path, "fcn", "gemm")
    try:
        wait_for(lambda: len(_jobs(run_dir)) == 2, timeout=60, what="both jobs started")
        jobs = _jobs(run_dir)
        runner.send_signal(signal.SIGKILL)
        gone, alive = psutil.wait_procs(jobs, timeout=10)
        assert not alive, f"jobs outlived their runner: {alive}"
        listed = json.loads(gpumon("runs", "--json", env=env).stdout)
        assert [r["status"] for r in listed] == ["interrupted"]
        text = gpumon("runs", env=env).stdout
        assert "interrupted" in text and "running" not in text
        stopped = gpumon("stop", run_dir.name, env=env)
        assert stopped.returncode == 0 and "not running (interrupted)" in stopped.stderr
    finally:
        if runner.is_running():
            runner.kill()


def test_attach_and_stop_refuse_what_is_not_theirs_in_one_line(tmp_path):
    env = _env(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    for command in ("attach", "stop"):
        missing = gpumon(command, "no-such-run", env=env)
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
        assert "no-such-run" in missing.stderr
        nothing = gpumon(command, env=env)  # no running run at all
        assert (
            nothing.returncode == 2
            and "no running run" in nothing.stderr
            and "Traceback" not in nothing.stderr
        )

    # a run of another user (uid 65534, as a runs directory on a shared file system can hold): whose a run is comes
    # from its directory's owner (or its proven runner), never from run.json's runner.uid, which is only a claim
    other = runs / "20260101-000000-theirs"
    other.mkdir(parents=True)
    meta = recording_claim(
        {"pid": 1, "started": 0.0, "uid": 65534, "user": "nobody", "host": "elsewhere"}
    )
    (other / "run.json").write_text(json.dumps(meta))
    if os.getuid() == 0:  # only root can give a directory to another user
        os.chown(other, 65534, 65534)
    for command in ("attach", "stop"):
        refused = gpumon(command, other.name, env=env)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        if os.getuid() == 0:
            assert "belongs to user" in refused.stderr and "--any-user" in refused.stderr
        else:  # our directory: the claim of uid 65534 changes nothing
            assert "is written on host elsewhere" in refused.stderr

    # our own run, written by a runner on another machine (a runs directory on a shared file system)
    elsewhere = runs / "20260101-000001-elsewhere"
    elsewhere.mkdir()
    meta["runner"].update(uid=os.getuid(), user="me")
    (elsewhere / "run.json").write_text(json.dumps(meta))
    for command in ("attach", "stop"):
        refused = gpumon(command, elsewhere.name, env=env)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert f"is written on host elsewhere: {command} it there" in refused.stderr


@needs_tmux
def test_attach_of_a_finished_run_opens_it_as_a_replay(tmp_path):
    env = _env(tmp_path)
    done = gpumon(
        "run", "gemm", "--device", "cpu", "--no-nvml", "--headless", "--duration", "3", env=env
    )
    assert done.returncode == 0, done.stderr
    for bad, said in (
        (["--baseline", "C=last"], "bad --baseline 'C=last'"),
        (["--baseline", "A=no-such-run"], "no-such-run"),
    ):
        refused = gpumon("attach", "last", *bad, env=env)
        assert (
            refused.returncode == 2 and refused.stderr.count("\n") == 1 and said in refused.stderr
        ), refused.stderr
    pane = Pane(tmp_path, "replay", [sys.executable, "-m", "gpumon", "attach", "last"], env)
    try:
        screen = pane.wait_screen(
            lambda s: "replay " in s and "A · gemm" in s, 60, "the finished run as a replay"
        )
        assert "replay" in screen
        pane.keys("q")
        text = pane.wait_screen(lambda s: "viewer-exit=" in s, 20, "the viewer quitting")
        assert "not running (complete): opening it as a replay" in text
    finally:
        pane.close()
