"""The runner's identity: which process writes a run, proven by the lock it holds, never by what run.json says.

Real processes throughout: a "holder" is a child Python that takes the real ``RunnerLock`` in a run directory and
writes the run.json a capture writes (as the recorder does), and a victim is a process that must survive.
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from gpumon.core.store.runner import (
    run_status,
    INTERRUPTED,
    LOCK_FILE,
    RECORDING,
    RUNNING,
    RunnerInfo,
    RunnerLock,
    run_owner,
    runner_process,
)
from gpumon.core.jobs.runnerstop import stop_runner
from gpumon.core.store.runmeta import RunMeta
from gpumon.errors import UsageError
from gpumon.safewrite import UnsafeDestination
from tests.helpers import fork_as_nobody, hold_run, runner_as_nobody, reachable_by_others, victim


def _meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def _status(meta: dict, run_dir: Path) -> str:
    """What every reader makes of run.json ``meta`` (a dict, as forged) for the run in ``run_dir``."""
    read = RunMeta.from_json({"schema": 1, "workloads": [], **meta})
    return run_status(read.status, read.runner, run_dir)


def _forge(run_dir: Path, process: psutil.Process, status: str = RECORDING) -> dict:
    """run.json rewritten to name ``process`` as its runner, as anyone who can write a file can."""
    meta = _meta(run_dir)
    meta["status"] = status
    meta["runner"].update(pid=process.pid, started=process.create_time(), uid=os.getuid())
    (run_dir / "run.json").write_text(json.dumps(meta))
    return meta


@pytest.fixture
def holder(tmp_path):
    run_dir = tmp_path / "runs" / "20260101-000000-held"
    proc, info = hold_run(run_dir)
    yield run_dir, proc, info
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_this_process_is_ours_and_its_entry_round_trips() -> None:
    me = RunnerInfo.current(detached=True)
    assert (
        me.pid == os.getpid() and me.claimed() is not None and me.uid == os.getuid() and me.detached
    )
    assert RunnerInfo.from_json(me.to_json()) == me
    assert RunMeta.from_json({"schema": 1, "workloads": [], "runner": me.to_json()}).runner == me


def test_the_runner_holding_its_lock_is_proven_running_and_stopped_by_sigterm(holder) -> None:
    run_dir, proc, info = holder
    meta = _meta(run_dir)
    assert runner_process(run_dir, info).pid == proc.pid
    assert _status(meta, run_dir) == RUNNING and run_owner(run_dir, info) == os.getuid()
    assert stop_runner(run_dir, info)
    assert proc.wait(10) == -signal.SIGTERM
    assert (
        _status(meta, run_dir) == INTERRUPTED
    )  # the kernel let go of its lock: killed, not finalised
    assert not stop_runner(run_dir, info)


def test_a_copy_of_the_run_directory_is_not_running_and_stopping_it_signals_nothing(
    holder, tmp_path
) -> None:
    run_dir, proc, info = holder
    copy = run_dir.parent / "20991231-000000-backup-copy"
    shutil.copytree(run_dir, copy)  # runner.lock too: another inode, which nobody holds
    assert _status(_meta(copy), copy) == INTERRUPTED and runner_process(copy, info) is None
    assert not stop_runner(copy, info)
    assert proc.poll() is None and _status(_meta(run_dir), run_dir) == RUNNING


def test_a_hard_link_to_the_lock_in_another_directory_proves_nothing_there(holder) -> None:
    run_dir, proc, info = holder
    other = run_dir.parent / "20991231-000000-linked"
    shutil.copytree(run_dir, other, ignore=shutil.ignore_patterns(LOCK_FILE))
    os.link(
        run_dir / LOCK_FILE, other / LOCK_FILE
    )  # the same inode, under another directory's name
    assert runner_process(other, info) is None and not stop_runner(other, info)
    assert runner_process(run_dir, info).pid == proc.pid  # the name it opened is still its own
    (other / LOCK_FILE).unlink()
    (other / LOCK_FILE).symlink_to(run_dir / LOCK_FILE)  # a symbolic link is not the file either
    assert runner_process(other, info) is None
    assert proc.poll() is None


def test_a_run_json_naming_another_process_never_gets_it_signalled(tmp_path) -> None:
    run_dir = tmp_path / "runs" / "20260101-000000-forged"
    forger, _ = hold_run(run_dir)  # the directory's lock is held, by the forger
    with victim() as sleeper:
        try:
            forged = _forge(run_dir, psutil.Process(sleeper.pid))
            info = RunnerInfo.from_json(forged["runner"])
            assert runner_process(run_dir, info) is None and _status(forged, run_dir) == INTERRUPTED
            assert not stop_runner(run_dir, info)
            assert sleeper.poll() is None
        finally:
            forger.kill()
            forger.wait()


@pytest.mark.parametrize(
    "lock",
    [
        "pass",  # merely open (a reader, a pager): no lock at all
        "fcntl.flock(f, fcntl.LOCK_SH)",  # a shared flock: /proc's "FLOCK ADVISORY READ", not a runner's WRITE
        "fcntl.lockf(f, fcntl.LOCK_EX)",  # a POSIX write lock: "POSIX ADVISORY WRITE", not a runner's FLOCK
    ],
)
def test_holding_the_file_without_the_runners_lock_is_not_being_the_runner(tmp_path, lock) -> None:
    """A process that has the file open after the runner died, unlocked or locked another way, is not the runner."""
    run_dir = tmp_path / "runs" / "20260101-000000-read"
    proc, _ = hold_run(run_dir)
    proc.kill()
    proc.wait()
    (run_dir / LOCK_FILE).touch()
    code = f"import fcntl, sys, time; f = open(sys.argv[1], 'r+'); {lock}; print(1, flush=True); time.sleep(120)"
    other = subprocess.Popen(
        [sys.executable, "-c", code, str(run_dir / LOCK_FILE)], stdout=subprocess.PIPE
    )
    try:
        assert other.stdout.readline()
        forged = _forge(run_dir, psutil.Process(other.pid))
        info = RunnerInfo.from_json(forged["runner"])
        assert runner_process(run_dir, info) is None and not stop_runner(run_dir, info)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_recycled_pid_or_a_zombie_is_not_the_runner(holder) -> None:
    run_dir, proc, info = holder
    assert (
        runner_process(run_dir, replace(info, started=info.started - 5)) is None
    )  # same PID, another start time
    assert not stop_runner(run_dir, replace(info, started=info.started - 5))
    assert proc.poll() is None
    proc.kill()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # it has exited; not reaped yet
    assert runner_process(run_dir, info) is None


def test_status_of_finished_old_garbled_and_foreign_runs(tmp_path) -> None:
    assert _status({"status": "complete"}, tmp_path) == "complete"
    assert (
        _status({"status": "recording"}, tmp_path) == INTERRUPTED
    )  # recorded before runners were named
    assert (
        _status({"status": "recording", "runner": {"pid": 1}}, tmp_path) == INTERRUPTED
    )  # garbled entry
    here = RunnerInfo.current().host
    for pid in (-1, 0, "x", 2**80, None):
        entry = {"pid": pid, "started": 0.0, "uid": 0, "user": "x", "host": here}
        assert RunnerInfo.from_json(entry) is None
        assert _status({"status": "recording", "runner": entry}, tmp_path) == INTERRUPTED
    elsewhere = {"pid": 1, "started": 0.0, "uid": 0, "user": "x", "host": "another-host.invalid"}
    assert (
        _status({"status": "recording", "runner": elsewhere}, tmp_path) == RECORDING
    )  # this machine cannot tell


def test_the_lock_is_a_new_file_and_is_removed_once_released(tmp_path) -> None:
    lock = RunnerLock.take(tmp_path)
    assert os.stat(tmp_path / LOCK_FILE).st_mode & 0o777 == 0o600  # its user's alone
    with pytest.raises(FileExistsError):
        RunnerLock.take(tmp_path)  # never one that is there already (a planted file or link)
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()
    lock.release()  # once let go, a second release does nothing
    (tmp_path / LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeDestination, match="symbolic link"):
        RunnerLock.take(tmp_path)
    assert not (tmp_path / "elsewhere").exists()


needs_root = pytest.mark.skipif(
    os.getuid() != 0, reason="needs root to run a process as another user (nobody)"
)


@pytest.fixture
def shared_dir():
    with reachable_by_others() as path:
        yield path


@needs_root
def test_another_users_runner_is_theirs_and_stopped_only_with_any_user(shared_dir) -> None:
    run_dir = shared_dir / "20260101-000000-theirs"
    with runner_as_nobody(run_dir) as runner:
        info = RunnerInfo.from_json(_meta(run_dir)["runner"])
        nobody = pwd.getpwnam("nobody").pw_uid
        assert info.uid == nobody and run_owner(run_dir, info) == nobody
        assert (
            _status(_meta(run_dir), run_dir) == RUNNING
        )  # root may look at another user's descriptors
        with pytest.raises(UsageError) as refused:
            stop_runner(run_dir, info)
        assert str(refused.value) == (
            "20260101-000000-theirs belongs to user nobody: you can stop your own runs only "
            "(--any-user: also another user's)"
        )
        assert psutil.pid_exists(runner.pid)
        assert psutil.Process(runner.pid).status() != psutil.STATUS_ZOMBIE
        assert stop_runner(run_dir, info, any_user=True)
        assert runner.status() == signal.SIGTERM


CAP_KILL = 5
CAPABILITY_VERSION_3 = 0x20080522


@contextmanager
def without_cap_kill() -> Iterator[None]:
    """This thread without CAP_KILL in its effective set (kept in its permitted set, and put back after): root that
    may still look at any process (CAP_SYS_PTRACE), but not signal another user's."""
    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (
        ctypes.c_uint32 * 6
    )()  # effective, permitted, inheritable of capabilities 0-31, then of 32-63
    assert libc.capget(header, data) == 0, os.strerror(ctypes.get_errno())
    effective = data[0]
    data[0] = effective & ~(1 << CAP_KILL)
    assert libc.capset(header, data) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        data[0] = effective
        assert libc.capset(header, data) == 0, os.strerror(ctypes.get_errno())


@needs_root
def test_a_runner_the_caller_may_inspect_but_not_signal_is_refused_in_words(shared_dir) -> None:
    run_dir = shared_dir / "20260101-000000-unsignalled"
    with runner_as_nobody(run_dir) as runner:
        info = RunnerInfo.from_json(_meta(run_dir)["runner"])
        with without_cap_kill(), pytest.raises(UsageError) as refused:
            stop_runner(run_dir, info, any_user=True)
        assert str(refused.value) == (
            f"20260101-000000-unsignalled: not permitted to signal its runner (pid {runner.pid})"
        )
        assert psutil.Process(runner.pid).status() != psutil.STATUS_ZOMBIE  # untouched


@needs_root
def test_a_runner_is_its_users_and_a_lock_file_another_user_owns_proves_nothing(shared_dir) -> None:
    """root's runner in a directory given to nobody once it holds it: the run is root's while it runs, the
    directory's after; a lock file given to another user (it must be the runner's user's) names no runner."""
    nobody = pwd.getpwnam("nobody").pw_uid
    run_dir = shared_dir / "20260101-000000-lent"
    proc, info = hold_run(run_dir)
    os.chown(run_dir, nobody, -1)
    try:
        assert run_owner(run_dir, info) == 0 and runner_process(run_dir, info) is not None
        os.chown(run_dir / LOCK_FILE, nobody, -1)
        assert runner_process(run_dir, info) is None and run_owner(run_dir, info) == nobody
    finally:
        proc.kill()
        proc.wait()


@needs_root
def test_a_user_who_may_not_inspect_the_runner_reads_recording(shared_dir) -> None:
    """nobody may not read root's /proc/PID/fd: it cannot tell whether root's run still runs, and says so."""
    run_dir = shared_dir / "20260101-000000-roots"
    proc, info = hold_run(run_dir)
    try:
        meta = _meta(run_dir)
        assert _status(meta, run_dir) == RUNNING
        assert fork_as_nobody(lambda: _status(meta, run_dir)) == RECORDING
        # whose run it is: root's runner, proven here; nobody cannot tell, and reads the directory's owner (root too)
        assert run_owner(run_dir, info) == 0
        assert fork_as_nobody(lambda: run_owner(run_dir, info)) == "0"
        assert fork_as_nobody(lambda: str(stop_runner(run_dir, info))) == (
            "UsageError: 20260101-000000-roots: its runner is another user's process; "
            "you can stop your own runs only"
        )
        assert proc.poll() is None
        assert stop_runner(run_dir, info)  # its owner may
        assert proc.wait() == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
