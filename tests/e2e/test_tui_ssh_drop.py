"""An SSH drop under the live monitor: the terminal vanishes, gpumon stops the children, finalises
the capture and exits (it must not hang restoring a terminal that is gone)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import psutil
import pytest

from tests.e2e.test_run_headless import stepping
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux to own a terminal")


def test_terminal_hangup_stops_children_and_finalises(tmp_path):
    socket = str(tmp_path / "tmux.sock")
    command = shlex.join(
        [sys.executable, "-m", "gpumon", "run", "fcn", "gemm", "--device", "cpu", "--no-nvml"]
    )
    env = {**os.environ, "GPUMON_RUNS": str(tmp_path / "runs")}
    subprocess.run(
        ["tmux", "-S", socket, "new-session", "-d", "-x", "100", "-y", "30", command],
        env=env,
        check=True,
    )
    try:
        run_dir = wait_for(
            lambda: next((tmp_path / "runs").glob("*/run.json"), None), what="the capture"
        ).parent
        wait_for(
            lambda: stepping(run_dir) == {"A", "B"}, timeout=90, what="both workloads stepping"
        )
        pane_pid = int(
            subprocess.run(
                ["tmux", "-S", socket, "list-panes", "-F", "#{pane_pid}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()[0]
        )
        monitor = psutil.Process(pane_pid)
        children = monitor.children()
        assert len(children) == 2
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], check=False)
    gone, alive = psutil.wait_procs([monitor, *children], timeout=30)
    assert not alive, f"still running after the hang-up: {alive}"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete"
    assert [w["state"] for w in meta["workloads"]] == ["stopped", "stopped"]
