"""Every command a usage error suggests (``e.g. gpumon run fcn --headless``, ``see gpumon compare --help``) is
itself accepted: run, it is not a usage error."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.helpers import GPUMON, gpumon, wait_for

# commands whose one-line error carries a hint, and the hint's commands (placeholders such as … are not run)
PROVOKED = [
    ["run", "--headless"],
    ["run", "--detach"],
    ["compare"],
    ["predict"],
    ["doctor", "--device", "cpu"],
    ["fcn"],
    ["experiment"],
    ["--device", "cpu", "runs"],
    ["--device", "cpu", "run", "fcn"],
]
PLACEHOLDER = re.compile(r"…|\.\.\.|[A-Z]{3,}|train\.py")


def suggestions(stderr: str, given: tuple[str, ...] = ()) -> list[list[str]]:
    """The commands a one-line error suggests: ``gpumon WORDS`` up to a bracket, colon or semicolon. A flag's value
    shown as ``…`` is the value the user gave that flag (``gpumon runs --device …``: ``cpu``); a command with
    another placeholder (``gpumon run … --headless``, ``WORKLOAD``) is not run."""
    line = stderr.strip().splitlines()[-1]
    found = re.findall(r"gpumon ([^():;`]+)", line.removeprefix("gpumon: error:"))
    commands = []
    for words in (c.split() for c in found):
        for i, word in enumerate(words):
            if word == "…" and i and words[i - 1] in given[:-1]:
                words[i] = given[given.index(words[i - 1]) + 1]
        if words and not PLACEHOLDER.search(" ".join(words)):
            commands.append(words)
    return commands


def _env(tmp_path: Path) -> dict[str, str]:
    return {"GPUMON_RUNS": str(tmp_path / "runs"), "NO_COLOR": "1"}


def run_suggestion(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``gpumon ARGV``; a run is stopped (Ctrl-C, or ``gpumon stop``) once its run directory exists."""
    env = _env(tmp_path)
    if argv[0] != "run":
        return gpumon(*argv, env=env, timeout=600, cwd=tmp_path)
    proc = subprocess.Popen(
        [*GPUMON, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        cwd=tmp_path,
    )
    runs = tmp_path / "runs"
    wait_for(
        lambda: proc.poll() is not None or any(runs.glob("*/run.json")),
        timeout=300,
        what=f"gpumon {' '.join(argv)} to start its run or end",
    )
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    if "--detach" in argv:
        gpumon("stop", "last", env=env, timeout=300)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.mark.parametrize("provoke", PROVOKED, ids=" ".join)
def test_a_suggested_command_is_not_itself_a_usage_error(provoke, tmp_path):
    (tmp_path / "runs").mkdir()
    error = gpumon(*provoke, env=_env(tmp_path), cwd=tmp_path)
    assert error.returncode == 2 and "Traceback" not in error.stderr, error.stderr
    hinted = suggestions(error.stderr, tuple(provoke))
    for argv in hinted:
        done = run_suggestion(argv, tmp_path)
        assert done.returncode != 2 and "Traceback" not in done.stderr, (
            f"`gpumon {' '.join(argv)}`, suggested by `gpumon {' '.join(provoke)}`, is a usage error:\n"
            f"{done.stderr[-2000:]}"
        )


def test_the_suggestions_are_read_from_the_errors():
    assert suggestions(
        "gpumon: error: fcn is a workload: launch it with gpumon run fcn (gpumon run --help)\n"
    ) == [
        ["run", "fcn"],
        ["run", "--help"],
    ]
    given = ("--device", "cpu", "runs")
    assert suggestions("gpumon: error: x (gpumon runs --device …)", given) == [
        ["runs", "--device", "cpu"]
    ]
    assert suggestions("gpumon: error: x: gpumon run … --headless", ("--headless",)) == []
