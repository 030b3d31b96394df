"""The test suite on a loaded machine: pytest with busy-loop processes beside it, as on a shared 2-core box.

Each busy loop is ``python -c 'while True: pass'`` (one core's worth of CPU), started before pytest and
killed after it, whatever happened. The suite must pass so: its tests wait for events, never for a
duration (issue 36). Prints pytest's summary line, the wall time and the load averages before and after.

    python benchmarks/loaded_suite.py                        # the suite as CI runs it, beside 2 busy loops
    python benchmarks/loaded_suite.py --repeat 3 -- tests/e2e/test_beside.py -k capture
    python benchmarks/loaded_suite.py --busy 0               # the same run on an otherwise idle machine

With no pytest arguments it runs the README's test command (after ``<!-- ci:test -->``, the one .ci/run runs:
four workers side by side), so what it measures is what CI runs.

Exit status: pytest's (of the last repeat that failed, else 0). Not in CI: it measures the machine as much
as the code; its result is recorded in docs/testing.md with the machine and the command.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUSY = "while True: pass"
README_TEST = re.compile(r"<!-- ci:test -->\n```bash\npytest ([^\n]*)\n```")


def readme_test_args() -> list[str]:
    """The arguments of the README's test command (``-x -q -n 4 …``), the one CI runs."""
    found = README_TEST.search((ROOT / "README.md").read_text())
    if found is None:
        raise SystemExit("loaded_suite: README.md has no <!-- ci:test --> block running pytest")
    return shlex.split(found.group(1))


def summary(output: str) -> str:
    """pytest's last line (``3 failed, 610 passed in 712.31s``)."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "(no output)"


def run_once(busy: int, pytest_args: list[str], log: Path | None) -> tuple[int, str, float]:
    loops = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(busy)]
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *pytest_args],
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
        "pytest_args",
        nargs="*",
        help="pytest's arguments (after --; default: the README's test command, as CI runs it)",
    )
    args = parser.parse_args()
    args.pytest_args = args.pytest_args or readme_test_args()
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
