"""The bad inputs and faults a careful tester tried (issue 33): each ends in one clear line and the right exit
status, never a traceback, a wrong status or silent nonsense. Real processes, real files, the real CLI."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers import gpumon, wait_for

STEPPER = "import time\nfrom gpumon import probe\nwhile True:\n    time.sleep(0.01)\n    probe.step(samples=8)\n"
DATA = Path(__file__).parents[1] / "data" / "cpu_same_core"


def _one_line_error(done: subprocess.CompletedProcess, status: int = 2) -> str:
    """The error line of a refused command: exit ``status``, one line on stderr, no traceback."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("gpumon: error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


@pytest.mark.parametrize("shadow", ["an empty folder", "a package"])
def test_1_a_gpumon_folder_in_the_working_directory_does_not_shadow_the_detached_runner(tmp_path, shadow):
    program = Path(sys.executable).parent / "gpumon"  # the installed command, as a user runs it
    if not program.exists():
        pytest.skip("needs the gpumon console script next to the interpreter (pip install)")
    work = tmp_path / "x"
    (work / "gpumon").mkdir(parents=True)
    if shadow == "a package":
        (work / "gpumon" / "__init__.py").write_text("raise SystemExit('imported the working directory s gpumon')\n")
    env = {**os.environ, "GPUMON_RUNS": str(tmp_path / "runs"), "NO_COLOR": "1"}
    # a job that imports nothing: whatever the user's own command does in its working directory is the user's
    done = subprocess.run([str(program), "run", "--cmd", "sleep 60", "--device", "cpu", "--no-nvml", "--detach",
                           "--duration", "60", "--json"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    runner = psutil.Process(json.loads(done.stdout)["runner_pid"])
    try:
        stopped = subprocess.run([str(program), "stop"], cwd=work, env=env, capture_output=True, text=True, timeout=90)
        assert stopped.returncode == 0 and "run saved to" in stopped.stderr, stopped.stderr
    finally:
        if runner.is_running():
            runner.kill()
