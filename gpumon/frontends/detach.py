"""``gpumon run --detach``: the headless runner in a session of its own, so the run outlives the terminal.

The terminal's ``gpumon run … --detach`` starts ``gpumon run … --detached-child`` (this very gpumon, whatever the
working directory holds: ``module_argv``) with ``start_new_session``
(no controlling terminal: a hang-up, a closed laptop or a dropped SSH connection does not reach it),
shows the runner's first lines until it has opened its run directory, prints that directory and how
to attach, and returns. The runner is the same headless run; once its capture is open it moves its
own output into ``RUN/runner.log`` (which closes the pipe the terminal reads: that EOF is the
terminal's signal to return). The jobs die with the runner, as they die with any gpumon
(PDEATHSIG, the MPS guardian's pipe): ``kill -9`` of the runner ends them too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from gpumon.core.jobs.interpreter import module_argv
from gpumon.core.records.model import ENDED_STATES
from gpumon.core.records.enums import RunStatus
from gpumon.core.records.printable import printable
from gpumon.safewrite import create_new_fd

DETACHED_CHILD_FLAG = "--detached-child"  # marks the process that --detach starts: the run's runner
RUNNER_LOG = "runner.log"
RUN_JSON_MAX = 1 << 20  # what is read of run.json to tell whether the run has ended
CAPTURING = "gpumon: capturing to "  # the line that names the run directory (headless prints it)


def start_runner(
    argv: list[str], as_json: bool, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    """Start the runner for ``gpumon ARGV`` and return once it captures (0) or has failed (its status)."""
    read_end, write_end = os.pipe()
    try:
        runner = subprocess.Popen(
            [*module_argv("gpumon"), *argv, DETACHED_CHILD_FLAG],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=write_end,
            start_new_session=True,
        )
    finally:
        os.close(write_end)
    run_dir = None
    with open(read_end, encoding="utf-8", errors="replace") as pipe:
        for line in pipe:  # until the runner moves its output to runner.log, or ends
            line = line.rstrip("\n")
            if line.startswith(CAPTURING):
                run_dir = Path(line[len(CAPTURING) :])
            elif line:
                print(line, file=err, flush=True)
    status = runner.poll()
    if run_dir is None or (status is not None and status != 0):
        return runner.wait() if status is None else status
    if as_json:
        print(json.dumps({"run": str(run_dir), "runner_pid": runner.pid}), file=out, flush=True)
    else:
        print(run_dir, file=out, flush=True)
    print(detached_words(run_dir, runner.pid, ended=status is not None), file=err, flush=True)
    return 0


def already_ended(run_dir: Path) -> bool:
    """run.json says the run is over, or that every job in it has ended (read as data: anything else is False)."""
    try:
        with open(run_dir / "run.json", "rb") as f:
            meta = json.loads(f.read(RUN_JSON_MAX))
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(meta, dict):
        return False
    jobs = meta.get("workloads")
    if meta.get("status") not in (None, RunStatus.RECORDING):
        return True
    return (
        isinstance(jobs, list)
        and bool(jobs)
        and all(isinstance(j, dict) and j.get("state") in ENDED_STATES for j in jobs)
    )


def detached_words(run_dir: Path, pid: int, ended: bool) -> str:
    """What the terminal says once the runner has its run directory: where it records, or that it has ended
    already (a job that exited at once is never said to be running)."""
    name = printable(run_dir.name)
    if ended or already_ended(run_dir):
        return (
            f"gpumon: detached run {printable(run_dir)} has already ended (its jobs exited); "
            f"`gpumon runs` lists it, its log: {printable(run_dir / RUNNER_LOG)}"
        )
    return (
        f"gpumon: detached: runner pid {pid} records to {printable(run_dir)}\n"
        f"gpumon: watch it with `gpumon attach {name}`, stop it with `gpumon stop {name}`; "
        f"its log: {printable(run_dir / RUNNER_LOG)}"
    )


def move_output_to_log(run_dir: Path) -> None:
    """In the runner, once the capture is open: stdout and stderr go to ``RUN/runner.log`` from now on.

    The terminal read them through a pipe; replacing both descriptors closes that pipe's last write
    end here, which tells ``start_runner`` the runner is up.
    """
    print(f"{CAPTURING}{run_dir}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    fd = create_new_fd(run_dir / RUNNER_LOG)
    try:
        os.dup2(fd, sys.stdout.fileno())
        os.dup2(fd, sys.stderr.fileno())
    finally:
        os.close(fd)
