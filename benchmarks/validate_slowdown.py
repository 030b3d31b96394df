"""Validate the whole chain (gpumon run -> run directories -> gpumon compare) against physics.

Two compute-bound ``gemm`` jobs with one thread each:

* pinned to the SAME core, the scheduler gives each half the core: r = 2, STP = 1;
* pinned to DIFFERENT cores, neither waits for the other: r = 1, STP = 2 (less
  whatever the shared caches and memory bandwidth take);
* the same-core pair once more as a single staggered run (B starts 12 s after A),
  whose baselines come from A's exclusive phase.

The script captures exclusive and shared runs with the real ``gpumon run
--headless``, compares them with the real ``gpumon compare --json``, and prints
the measured slowdowns and STP beside the expected ones.

Other processes on the machine break the physics (a third busy process on core 0
is not in the model), so before each capture the script waits until the CPUs are
idle, and after it measures the background load of every capture (host CPU minus
the workloads' CPU, from host.csv and processes.csv). Exit status: 0 when every
measurement is within tolerance (|r - expected| <= 0.25), 1 when one is off on
a quiet machine, 3 when one is off but the machine was busy (inconclusive).
Too slow and too noisy for a unit test: docs/validation.md has the figures
measured on the 2-core machine.

    python benchmarks/validate_slowdown.py [--duration 30] [--repeats 2] [--out DIR] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

GPUMON = [sys.executable, "-m", "gpumon"]
SAVED = re.compile(r"run saved to (\S+)")
CORE0 = "gemm:cpus=0,threads=1"
CORE1 = "gemm:cpus=1,threads=1"


@dataclass(frozen=True)
class Case:
    """A physics-known pairing: the shared run's two specs and the expected r and STP."""

    name: str
    shared: tuple[str, str]
    expected_r: float
    expected_stp: float
    r_tolerance: float
    stagger: float = 0.0


CASES = (
    Case("same core", (CORE0, CORE0), 2.0, 1.0, 0.25),
    Case("different cores", (CORE0, CORE1), 1.0, 2.0, 0.25),
    Case("same core, staggered", (CORE0, CORE0), 2.0, 1.0, 0.25, stagger=12.0),
)


def busy_cores(seconds: float = 1.0) -> float:
    """CPUs busy over ``seconds``, in cores, from /proc/stat."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)

    busy0, total0 = sample()
    time.sleep(seconds)
    busy1, total1 = sample()
    return (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1)


def wait_quiet(limit: float, timeout: float) -> float:
    """Wait until fewer than ``limit`` cores are busy (at most ``timeout`` s); returns the last reading."""
    deadline = time.monotonic() + timeout
    busy = busy_cores()
    while busy >= limit and time.monotonic() < deadline:
        busy = busy_cores(2.0)
    return busy


def background_cores(run: Path) -> float:
    """Mean CPU used by other processes during a capture, in cores (host CPU minus the workloads')."""
    import pandas as pd

    meta = json.loads((run / "run.json").read_text())
    host = pd.read_csv(run / "host.csv").set_index("t")["cpu_pct"] * (meta["host"].get("cpus") or 1)
    own = pd.read_csv(run / "processes.csv").groupby("t")["cpu_pct"].sum()
    both = pd.concat([host, own], axis=1, keys=["host", "own"]).dropna()
    return float((both["host"] - both["own"]).clip(lower=0).mean() / 100)


def capture(
    specs: list[str],
    label: str,
    runs: Path,
    duration: float,
    quiet: tuple[float, float],
    stagger: float = 0.0,
) -> Path:
    """One headless capture on a quiet machine; returns its run directory."""
    busy = wait_quiet(*quiet)
    if busy >= quiet[0]:
        print(f"  (machine still busy: {busy:.2f} cores; capturing anyway)", flush=True)
    argv = [
        *GPUMON,
        "run",
        *specs,
        "--headless",
        "--duration",
        str(duration + stagger),
        "--out",
        str(runs),
        "--label",
        label,
    ]
    if stagger:
        argv += ["--stagger", str(stagger)]
    print("$ gpumon " + " ".join(argv[3:]), flush=True)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 120)
    found = SAVED.search(result.stdout + result.stderr)
    if result.returncode != 0 or not found:
        sys.exit(
            f"validate_slowdown: gpumon run failed ({result.returncode}):\n{result.stderr[-2000:]}"
        )
    return Path(found.group(1))


def compare(exclusive: list[Path], shared: list[Path], report: Path | None) -> dict:
    """``gpumon compare --json`` of the runs."""
    argv = [*GPUMON, "compare", "--json"]
    for path in exclusive:
        argv += ["--exclusive", str(path)]
    for path in shared:
        argv += ["--shared", str(path)]
    if report is not None:
        argv += ["--report", str(report)]
    print("$ gpumon " + " ".join(argv[3:]), flush=True)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        sys.exit(f"validate_slowdown: gpumon compare failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


def load_average() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def interval(e: dict) -> str:
    if e["estimate"] is None:
        return "n/a"
    if e["low"] is None:
        return f"{e['estimate']:.3f}"
    return f"{e['estimate']:.3f} [{e['low']:.3f}, {e['high']:.3f}]"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--duration", type=float, default=30.0, help="seconds per capture (default 30)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="captures per condition (default 2)")
    parser.add_argument(
        "--out", type=Path, default=None, help="runs directory (default: a temporary one)"
    )
    parser.add_argument(
        "--report", action="store_true", help="also write a compare report per case under OUT"
    )
    parser.add_argument(
        "--quiet-below",
        type=float,
        default=0.2,
        metavar="CORES",
        help="before each capture, wait until fewer CPU cores than this are busy (default 0.2)",
    )
    parser.add_argument(
        "--quiet-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="give up waiting for a quiet machine after S seconds (default 600)",
    )
    parser.add_argument(
        "--max-background",
        type=float,
        default=0.1,
        metavar="CORES",
        help="background load above which a capture counts as disturbed (default 0.1 cores)",
    )
    args = parser.parse_args()
    quiet = (args.quiet_below, args.quiet_timeout)
    out = args.out or Path(tempfile.mkdtemp(prefix="gpumon-validate-"))
    runs = out / "runs"
    print(
        f"runs in {runs}; {os.cpu_count()} CPUs; load average before: {load_average()}", flush=True
    )

    exclusive: dict[str, list[Path]] = {CORE0: [], CORE1: []}
    shared: dict[str, list[Path]] = {c.name: [] for c in CASES}
    for i in range(args.repeats):
        for spec, tag in ((CORE0, "cpu0"), (CORE1, "cpu1")):
            exclusive[spec].append(capture([spec], f"alone-{tag}-{i}", runs, args.duration, quiet))
        for case in CASES:
            label = f"{case.name.replace(' ', '-').replace(',', '')}-{i}"
            shared[case.name].append(
                capture(list(case.shared), label, runs, args.duration, quiet, case.stagger)
            )

    rows = []
    off_quiet = off_disturbed = False
    for case in CASES:
        baselines = (
            []
            if case.stagger
            else [p for spec in dict.fromkeys(case.shared) for p in exclusive[spec]]
        )
        background = max(background_cores(p) for p in [*baselines, *shared[case.name]])
        noisy = background > args.max_background
        report = (
            out / f"report-{case.name.replace(' ', '-').replace(',', '')}" if args.report else None
        )
        result = compare(baselines, shared[case.name], report)
        for slot in ("A", "B"):
            w = result["workloads"][slot]
            r = w["slowdown"]["estimate"]
            ok = r is not None and abs(r - case.expected_r) <= case.r_tolerance
            off_quiet |= not ok and not noisy
            off_disturbed |= not ok and noisy
            rows.append(
                (
                    case.name,
                    slot,
                    f"{w['exclusive_rate']:.1f}",
                    f"{w['shared_rate']:.1f}",
                    f"{case.expected_r:.2f}",
                    interval(w["slowdown"]),
                    "ok" if ok else "OFF",
                    f"{background:.2f}",
                )
            )
        stp = result["pair"]["stp"]
        rows.append(
            (
                case.name,
                "STP",
                "",
                "",
                f"{case.expected_stp:.2f}",
                interval(stp),
                result["pair"]["verdict"],
                f"{background:.2f}" + (" (disturbed)" if noisy else ""),
            )
        )
        for note in result["notes"]:
            print(f"note ({case.name}): {note}")
        for warning in result["warnings"]:
            print(f"warning ({case.name}): {warning}")

    headers = (
        "case",
        "job",
        "alone it/s",
        "shared it/s",
        "expected",
        "measured [95% CI]",
        "check",
        "background cores (max)",
    )
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    print(f"\nload average after: {load_average()}")
    for row in (headers, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    if off_quiet:
        return 1
    if off_disturbed:
        print(
            "inconclusive: a measurement is off, but other processes used the CPUs during its captures"
        )
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
