"""Only your own runs: ``stop``, ``attach`` and ``runs`` accept a run's PID only from its proven runner.

The three ways a file could once aim ``gpumon stop`` at a process gpumon never started, each with a real
victim that must survive: a copied run directory, a run.json naming another process, and a run directory of
another user. Plus the one documented way to act on another user's run (``--any-user``), against a real process.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.e2e.test_detach import STEPPER, Pane, _detach, _env, _jobs, _steps, needs_tmux
from tests.e2e.test_run_headless import stepping
from tests.helpers import (
    gpumon,
    hold_run,
    runner_as_nobody,
    reachable_by_others,
    victim,
    wait_for,
)

LOCK_FILE = "runner.lock"  # gpumon.core.store.runner.LOCK_FILE, spelled out so this file runs against older gpumon too

DATA = Path(__file__).parents[1] / "data" / "cpu_same_core" / "x-fcn"
needs_root = pytest.mark.skipif(
    os.getuid() != 0, reason="needs root to make a run directory of another user"
)


def _listed(env: dict[str, str], runs_dir: Path | None = None) -> dict[str, dict]:
    done = gpumon("runs", "--json", *([str(runs_dir)] if runs_dir else []), env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return {r["name"]: r for r in json.loads(done.stdout)}


def _forge(run_dir: Path, target: psutil.Process, uid: int | None = None) -> None:
    """run.json says ``target`` is the runner of a run still recording, as anyone who can write a file can."""
    meta = json.loads((run_dir / "run.json").read_text())
    meta["status"] = "recording"
    meta["runner"] = {
        "pid": target.pid,
        "started": target.create_time(),
        "uid": os.getuid() if uid is None else uid,
        "user": "me",
        "host": os.uname().nodename,
        "detached": True,
    }
    (run_dir / "run.json").write_text(json.dumps(meta))


def _alive(proc: subprocess.Popen | psutil.Process) -> bool:
    if isinstance(proc, subprocess.Popen):
        return proc.poll() is None
    return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE


def test_a_copied_run_is_not_running_and_stopping_the_copy_leaves_the_original_running(tmp_path):
    env = _env(tmp_path)
    stepper = shlex.join([sys.executable, "-c", STEPPER])
    run_dir, runner = _detach(tmp_path, "--cmd", stepper, "--label", "orig")
    try:
        wait_for(lambda: stepping(run_dir) == {"A"}, timeout=60, what="the job stepping")
        job = _jobs(run_dir)[0]
        copy = (
            run_dir.parent / "20991126-040000-backup-copy"
        )  # newer than the original: plain stop once picked it
        shutil.copytree(run_dir, copy)

        stopped = gpumon("stop", copy.name, env=env)
        assert (
            stopped.returncode == 0
            and f"{copy.name} is not running (interrupted)" in stopped.stderr
        ), stopped.stderr
        assert "stopping" not in stopped.stderr
        before = _steps(run_dir)
        wait_for(
            lambda: _steps(run_dir) > before + 10, timeout=30, what="the original still recording"
        )
        assert _alive(runner) and _alive(job)

        listed = _listed(env)
        assert (
            listed[run_dir.name]["status"] == "running"
            and listed[run_dir.name]["runner"]["pid"] == runner.pid
        )
        assert (
            listed[copy.name]["status"] == "interrupted"
            and listed[copy.name]["runner"]["alive"] is False
        )
        assert "runner pid" not in next(
            line for line in gpumon("runs", env=env).stdout.splitlines() if copy.name in line
        )

        plain = gpumon(
            "stop", env=env, timeout=90
        )  # your newest running run: the original, never the copy
        assert (
            plain.returncode == 0
            and f"stopping {run_dir.name} (runner pid {runner.pid})" in plain.stderr
        ), plain.stderr
        psutil.wait_procs([runner, job], timeout=20)
        assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    finally:
        if runner.is_running():
            runner.kill()


@needs_tmux
def test_attach_opens_a_copied_run_as_a_replay_whose_runner_it_cannot_stop(tmp_path):
    env = _env(tmp_path)
    run_dir, runner = _detach(
        tmp_path, "--cmd", shlex.join([sys.executable, "-c", STEPPER]), "--label", "orig"
    )
    pane = None
    try:
        wait_for(lambda: stepping(run_dir) == {"A"}, timeout=60, what="the job stepping")
        copy = run_dir.parent / "20991126-040000-backup-copy"
        shutil.copytree(run_dir, copy)
        pane = Pane(tmp_path, "copy", [sys.executable, "-m", "gpumon", "attach", copy.name], env)
        pane.wait_screen(lambda s: "replay " in s, 60, "the copy opened as a replay")
        pane.keys("x")  # the replay has no stop: the key does nothing
        pane.keys("q")
        text = pane.wait_screen(lambda s: "viewer-exit=" in s, 20, "the viewer quitting")
        assert f"{copy.name} is not running (interrupted): opening it as a replay" in text
        assert _alive(runner) and all(_alive(job) for job in _jobs(run_dir))
    finally:
        if pane is not None:
            pane.close()
        runner.kill()


def test_a_run_json_naming_another_process_never_gets_it_signalled(tmp_path):
    env = _env(tmp_path)
    forged = tmp_path / "runs" / "20991126-050000-forged"
    shutil.copytree(DATA, forged)
    with victim() as sleeper:
        _forge(forged, psutil.Process(sleeper.pid))
        (forged / LOCK_FILE).touch()  # a lock file, which the sleep never holds
        plain = gpumon("stop", env=env)
        assert plain.returncode == 2 and "no running run" in plain.stderr, plain.stderr
        named = gpumon("stop", forged.name, env=env)
        assert (
            named.returncode == 0
            and "is not running (interrupted): nothing to stop" in named.stderr
        ), named.stderr
        assert _alive(sleeper)
        assert _listed(env)[forged.name]["status"] == "interrupted"

        # the forger holds that directory's lock itself, and still names the sleep: the sleep does not hold it
        (forged / LOCK_FILE).unlink()
        meta = (forged / "run.json").read_text()
        forger, _ = hold_run(forged)
        try:
            (forged / "run.json").write_text(meta)
            assert _listed(env)[forged.name]["status"] == "interrupted"
            for argv in (["stop"], ["stop", forged.name]):
                gpumon(*argv, env=env)
            assert _alive(sleeper) and _alive(forger)
        finally:
            forger.kill()
            forger.wait()
        assert _alive(sleeper)


@needs_root
def test_another_users_run_directory_never_gets_your_process_signalled(tmp_path):
    env = _env(tmp_path)
    theirs = tmp_path / "runs" / "20991126-060000-theirs"
    shutil.copytree(DATA, theirs)
    with victim() as sleeper:  # root's own process, which run.json (claiming uid 0) names
        _forge(theirs, psutil.Process(sleeper.pid), uid=0)
        for path in (theirs, *theirs.rglob("*")):
            os.chown(path, 65534, 65534, follow_symlinks=False)
        for command in ("stop", "attach"):
            refused = gpumon(command, str(theirs), env=env)
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
            assert "belongs to user nobody" in refused.stderr
        anyway = gpumon("stop", "--any-user", str(theirs), env=env)
        assert anyway.returncode == 0 and "not running (interrupted)" in anyway.stderr, (
            anyway.stderr
        )
        assert _alive(sleeper)


@needs_root
def test_a_real_runner_of_another_user_is_stopped_only_with_any_user():
    with reachable_by_others() as base:
        run_dir = base / "20991126-070000-theirs"
        env = {"GPUMON_RUNS": str(base), "NO_COLOR": "1"}
        with runner_as_nobody(run_dir) as runner:
            assert _listed(env)[run_dir.name]["status"] == "running"
            refused = gpumon("stop", run_dir.name, env=env)
            assert refused.returncode == 2 and "belongs to user nobody" in refused.stderr, (
                refused.stderr
            )
            assert psutil.Process(runner.pid).status() != psutil.STATUS_ZOMBIE
            stopped = gpumon("stop", "--any-user", run_dir.name, env=env)
            assert stopped.returncode == 0 and f"(runner pid {runner.pid})" in stopped.stderr, (
                stopped.stderr
            )
            assert runner.status() == signal.SIGTERM
