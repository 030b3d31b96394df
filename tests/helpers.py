"""Shared test helpers: run gpumon as a real subprocess, wait for conditions without sleeping blindly."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

GPUMON = [sys.executable, "-m", "gpumon"]


def gpumon(*args: str, timeout: float = 120, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    """Run the real CLI to completion."""
    return subprocess.run(
        [*GPUMON, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, **kw
    )


def wait_for(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.05, what: str = "condition") -> T:
    """Poll ``condition`` until it returns a truthy value; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def only_run(runs_dir: Path) -> Path:
    runs = [p for p in runs_dir.iterdir() if (p / "run.json").exists()]
    assert len(runs) == 1, runs
    return runs[0]
