"""run.json's runner at its edges: defaults of an entry, a uid without a name, a run without a status. Written for
the mutation run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import psutil

from gpumon.core.store.runner import (
    INTERRUPTED,
    PID_MAX,
    RECORDING,
    RunnerInfo,
    run_status,
    user_name,
)


def test_a_uid_without_a_name_is_its_number() -> None:
    assert user_name(54321) == "54321"
    assert user_name(os.getuid()) == RunnerInfo.current().user


def test_this_process_as_its_runner() -> None:
    me = RunnerInfo.current()
    assert (me.pid, me.uid, me.host, me.detached) == (
        os.getpid(),
        os.getuid(),
        socket.gethostname(),
        False,
    )
    assert me.started == psutil.Process().create_time()
    assert RunnerInfo.current(detached=True).detached is True


def test_an_entry_without_detached_was_not_detached() -> None:
    entry = {"pid": 7, "started": 1.5, "uid": 0, "user": "root", "host": "h"}
    assert RunnerInfo.from_json(entry) == RunnerInfo(7, 1.5, 0, "root", "h", False)
    assert RunnerInfo.from_json({**entry, "detached": True}).detached is True
    assert RunnerInfo.from_json(RunnerInfo(7, 1.5, 0, "root", "h", True).to_json()).detached is True


def test_pid_max_limit_itself_is_no_pid() -> None:
    """PIDs are below pid_max, which is at most PID_MAX_LIMIT (4194304): that number is a garbled entry, not a PID."""
    entry = {"started": 1.5, "uid": 0, "user": "root", "host": "h"}
    assert PID_MAX == 4_194_304
    assert RunnerInfo.from_json({**entry, "pid": PID_MAX - 1}) == RunnerInfo(
        PID_MAX - 1, 1.5, 0, "root", "h"
    )
    assert RunnerInfo.from_json({**entry, "pid": PID_MAX}) is None


def test_a_run_without_a_status(tmp_path: Path) -> None:
    assert run_status(None, None, tmp_path) == "?"
    assert run_status("complete", None, tmp_path) == "complete"
    here = {"pid": 1, "started": 0.0, "uid": 0, "user": "root", "host": socket.gethostname()}
    elsewhere = RunnerInfo.from_json({**here, "host": socket.gethostname() + "-other"})
    assert (
        run_status(RECORDING, elsewhere, tmp_path) == RECORDING
    )  # another host's runner: this one cannot tell
    assert (
        run_status(RECORDING, RunnerInfo.from_json(here), tmp_path) == INTERRUPTED
    )  # here, and no lock held
