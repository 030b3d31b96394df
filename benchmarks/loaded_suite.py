"""The test suite on a loaded machine: pytest with busy-loop processes beside it, as on a shared 2-core box.

Each busy loop is ``python -c 'while True: pass'`` (one core's worth of CPU), started before pytest and
killed after it, whatever happened. The suite must pass so: its tests wait for events, never for a
duration (issue 36). Prints pytest's summary line, the wall time and the load averages before and after.

    python benchmarks/loaded_suite.py                        # the whole suite beside 2 busy loops (~15 min)
    python benchmarks/loaded_suite.py --repeat 3 -- tests/e2e/test_beside.py -k capture
    python benchmarks/loaded_suite.py --busy 0               # the same run on an otherwise idle machine

Exit status: pytest's (of the last repeat that failed, else 0). Not in CI: it measures the machine as much
as the code; its result is recorded in docs/testing.md with the machine and the command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUSY = "while True: pass"


def summary(output: str) -> str:
    """pytest's last line (``3 failed, 610 passed in 712.31s``)."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "(no output)"


def run_once(busy: int, pytest_args: list[str], log: Path | None) -> tuple[int, str, float]:
    loops = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(busy)]
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", *pytest_args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    output = done.stdout + done.stderr
    if log is not None:
        with log.open("a") as f:
            f.write(output)
    failures = [line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return done.returncode, "\n".join([*failures, summary(output)]), time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--busy", type=int, default=2, help="busy-loop processes beside pytest (default 2)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run pytest this many times in a row (default 1)"
    )
    parser.add_argument(
        "--log", type=Path, help="append pytest's whole output of every run to this file"
    )
    parser.add_argument(
        "pytest_args", nargs="*", help="what pytest runs (after --; default: the whole suite)"
    )
    args = parser.parse_args()
    status = 0
    for i in range(args.repeat):
        before = os.getloadavg()
        code, result, seconds = run_once(args.busy, args.pytest_args, args.log)
        after = os.getloadavg()
        print(
            f"run {i + 1}/{args.repeat}, {args.busy} busy loops, {os.cpu_count()} cores: {result} "
            f"(exit {code}, {seconds:.0f} s wall; load average {before[0]:.1f} before, {after[0]:.1f} after)",
            flush=True,
        )
        status = code or status
    return status


if __name__ == "__main__":
    sys.exit(main())
