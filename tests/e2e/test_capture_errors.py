"""A capture that cannot be written (issue 14 item 1): one stderr line, jobs stopped or kept, exit 1, no traceback."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap

import psutil

from gpumon.core.store.trace import load_run
from tests.e2e.test_run_headless import stepping
from tests.helpers import GPUMON, headless_cpu, in_private_mount, remove_tree, wait_for


def _start(
    tmp_path, *extra: str, job: tuple[str, ...] = ("fcn",)
) -> tuple[subprocess.Popen, object]:
    proc = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                tmp_path,
                *job,
                "--json",
                *extra,
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_dir = wait_for(
        lambda: next(iter(tmp_path.glob("*/run.json")), None), 60, what="run directory"
    ).parent
    wait_for(lambda: stepping(run_dir) == {"A"}, timeout=90, what="steps recorded")
    return proc, run_dir


def _child_pid(run_dir) -> int:
    return json.loads((run_dir / "run.json").read_text())["workloads"][0]["pid"]


def test_a_run_directory_removed_mid_run_stops_the_job_and_exits_1(tmp_path):
    proc, run_dir = _start(tmp_path, "--duration", "120")
    child = psutil.Process(_child_pid(run_dir))
    remove_tree(run_dir)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    stopped = [line for line in err.splitlines() if line.startswith("gpumon: capture stopped at ")]
    assert stopped == [stopped[0]] and stopped[0].endswith(
        f"run directory {run_dir} was removed"
    ), err
    assert f"gpumon: could not finalise {run_dir / 'run.json'}" in err
    assert "run saved to" not in err
    _, alive = psutil.wait_procs([child], timeout=10)
    assert not alive, "the job is stopped by default"


def test_on_capture_error_continue_keeps_the_job_running_unrecorded(tmp_path):
    # a job that steps at once (no torch import), so --duration leaves time after the failure on any machine
    stepper = ("--cmd", shlex.join([sys.executable, "-c", SLOW_STEPPER]))
    proc, run_dir = _start(
        tmp_path, "--duration", "25", "--on-capture-error", "continue", job=stepper
    )
    remove_tree(run_dir)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "gpumon: capture stopped at " in err
    assert "gpumon: workload A stopped at --duration 25 s" in err, (
        "the job ran until --duration ended it"
    )
    status = [json.loads(line) for line in out.splitlines() if line.startswith('{"t"')]
    failed_at = float(err.split("gpumon: capture stopped at ", 1)[1].split(" s:", 1)[0])
    later = [s for s in status if s["t"] > failed_at + 2 and s["steps"] > 0]
    assert later and later[-1]["steps"] > status[0]["steps"], (
        "status lines show the job kept training"
    )


SLOW_STEPPER = textwrap.dedent(
    """
    import time
    from gpumon import probe
    while True:
        time.sleep(0.02)
        probe.step(samples=8)
    """
)

FAST_STEPPER = textwrap.dedent(
    """
    import time
    from gpumon import probe
    while True:
        time.sleep(0.001)
        probe.step(samples=8)
    """
)


def test_a_full_filesystem_truncates_the_run_and_keeps_it_readable(tmp_path):
    """A real 200 KiB tmpfs in a private mount namespace (unshare -rm), filled by a job stepping every 1 ms."""
    mnt, saved = tmp_path / "mnt", tmp_path / "saved"
    saved.mkdir()
    gpumon = shlex.join(
        [
            *GPUMON,
            "run",
            "--cmd",
            shlex.join([sys.executable, "-c", FAST_STEPPER]),
            "--headless",
            "--no-nvml",
            "--out",
            str(mnt),
            "--duration",
            "300",
        ]
    )
    result = in_private_mount(
        tmp_path, "size=200k", f"{gpumon}; rc=$?; cp -a {mnt}/. {saved}/; exit $rc", timeout=300
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    (run_dir,) = saved.iterdir()
    line = next(
        s for s in result.stderr.splitlines() if s.startswith("gpumon: capture stopped at ")
    )
    assert line.endswith(f"no space left on {mnt / run_dir.name}"), result.stderr
    assert f"gpumon: run saved to {mnt / run_dir.name} (truncated)" in result.stderr
    run = load_run(run_dir)
    assert run.meta.status == "truncated" and "no space left" in run.meta.capture_error.reason
    assert len(run.steps()) > 100
    for args in (
        ["runs", str(saved), "--json"],
        ["export", str(run_dir), "--csv", str(tmp_path / "csv")],
    ):
        listing = subprocess.run([*GPUMON, *args], capture_output=True, text=True, timeout=120)
        assert listing.returncode == 0 and "Traceback" not in listing.stderr, listing.stderr
    assert (
        json.loads(
            subprocess.run(
                [*GPUMON, "runs", str(saved), "--json"], capture_output=True, text=True
            ).stdout
        )[0]["status"]
        == "truncated"
    )
