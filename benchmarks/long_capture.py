"""Hour-long headless captures: does the monitor stay flat, and do the readers stay fast?

Runs three headless captures side by side for MINUTES (default 60): job A alone, job B alone,
and A + B sharing. Each job is a light Python loop (no training) that calls
``gpumon.probe.step()`` about RATE times a second with a short sleep, so an hour yields
hundreds of thousands of step rows without burning a shared machine's CPU. Every WINDOW
minutes it prints, for the shared capture's monitor process (gpumon itself, not its children),
its RSS and the CPU it used in that window, and the trace size of each capture. When the
captures end it prints the trace size per hour, RSS growth after the first window, and how
long ``gpumon runs``, ``gpumon export --csv`` and ``gpumon compare`` take on the result (wall
time of the command as a user runs it, interpreter start included).

    nice -n 15 python benchmarks/long_capture.py [--minutes 60] [--out DIR]
    python benchmarks/long_capture.py --readers-only DIR   # time the readers on existing captures

Prints figures measured in this run; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

MIB = 1 << 20
CAPTURES = ("alone-A", "alone-B", "shared-AB")


def job(rate: float) -> None:
    """The light workload: ``probe.step()`` about ``rate`` times a second, sleeping in between
    (``--job NAME`` only tells A's command from B's, so that compare matches them by spec)."""
    from gpumon import probe

    period = 1.0 / rate
    deadline = time.monotonic()
    while True:
        probe.step(samples=1)
        deadline += period
        delay = deadline - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            deadline = time.monotonic()


def job_command(name: str, rate: float) -> str:
    return f"{sys.executable} {Path(__file__).resolve()} --job {name} --rate {rate:g}"


@dataclass
class Capture:
    name: str
    runs_dir: Path
    proc: subprocess.Popen
    monitor: psutil.Process

    def run_dir(self) -> Path | None:
        dirs = (
            [p for p in self.runs_dir.iterdir() if (p / "run.json").is_file()]
            if self.runs_dir.is_dir()
            else []
        )
        return dirs[0] if dirs else None

    def trace_bytes(self) -> int:
        run = self.run_dir()
        return sum(f.stat().st_size for f in run.rglob("*") if f.is_file()) if run else 0


def start_capture(name: str, root: Path, seconds: float, rate: float, log) -> Capture:
    runs_dir = root / name
    runs_dir.mkdir(parents=True, exist_ok=True)
    slots = name.split("-", 1)[1]
    cmd = [
        sys.executable,
        "-m",
        "gpumon",
        "run",
        "--headless",
        "--duration",
        f"{seconds:g}",
        "--out",
        str(runs_dir),
        "--no-nvml",
        "--label",
        name,
    ]
    for slot in slots:
        cmd += ["--cmd", job_command(slot, rate)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    return Capture(name, runs_dir, proc, psutil.Process(proc.pid))


def cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def capture(root: Path, minutes: float, window_min: float, rate: float) -> None:
    seconds = minutes * 60
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "monitors.log"
    print(f"captures under {root} (monitor stderr in {log_path})", flush=True)
    print(
        f"{len(CAPTURES)} headless captures of {minutes:g} min, light jobs at ~{rate:g} steps/s, "
        f"100 ms sampling, no NVML",
        flush=True,
    )
    with open(log_path, "w") as log:
        captures = [start_capture(name, root, seconds, rate, log) for name in CAPTURES]
        shared = captures[-1]
        began = time.monotonic()
        last_cpu, last_t = cpu_seconds(shared.monitor), began
        rss_windows: list[float] = []
        print(
            f"{'window':>8} {'end min':>8} {'monitor RSS':>12} {'monitor CPU':>12} "
            + " ".join(f"{c.name + ' trace':>18}" for c in captures),
            flush=True,
        )
        n = 0
        while shared.proc.poll() is None:
            n += 1
            target = began + n * window_min * 60
            while shared.proc.poll() is None and time.monotonic() < target:
                time.sleep(min(5.0, max(0.1, target - time.monotonic())))
            if shared.proc.poll() is not None:
                break
            now = time.monotonic()
            try:
                rss = shared.monitor.memory_info().rss / MIB
                cpu = cpu_seconds(shared.monitor)
            except psutil.NoSuchProcess:
                break
            rss_windows.append(rss)
            cpu_pct = 100 * (cpu - last_cpu) / (now - last_t)
            last_cpu, last_t = cpu, now
            sizes = " ".join(f"{c.trace_bytes() / MIB:15.1f} MiB" for c in captures)
            print(
                f"{n:>8} {(now - began) / 60:8.1f} {rss:8.1f} MiB {cpu_pct:10.2f} % {sizes}",
                flush=True,
            )
        for c in captures:
            c.proc.wait()
        elapsed_h = (time.monotonic() - began) / 3600
    print(
        "exit status: " + ", ".join(f"{c.name} {c.proc.returncode}" for c in captures), flush=True
    )
    if len(rss_windows) >= 2:
        base = rss_windows[0]
        growth = 100 * (max(rss_windows[1:]) - base) / base
        print(
            f"monitor RSS: {base:.1f} MiB after the first window, at most {max(rss_windows[1:]):.1f} MiB later "
            f"({growth:+.1f} %; target < 10 %)",
            flush=True,
        )
    for c in captures:
        print(
            f"trace size {c.name}: {c.trace_bytes() / MIB:.1f} MiB = {c.trace_bytes() / MIB / elapsed_h:.1f} MiB per hour",
            flush=True,
        )
    readers(root)


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user + system) of the command, and its result."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def readers(root: Path, repeats: int = 3) -> None:
    """Time ``runs``, ``export --csv`` and ``compare`` on the captures under ``root``, ``repeats`` times each."""
    from gpumon.core.store.trace import load_run

    gpumon = [sys.executable, "-m", "gpumon"]
    runs = {
        name: next((p for p in (root / name).iterdir() if (p / "run.json").is_file()), None)
        for name in CAPTURES
    }
    missing = [name for name, run in runs.items() if run is None]
    if missing:
        print(f"no capture for {', '.join(missing)} under {root}", flush=True)
        return
    for name, run in runs.items():
        meta = load_run(run).meta
        with open(run / "steps.csv", "rb") as f:
            rows = sum(1 for _ in f) - 1
        print(
            f"{name}: {rows:,} step rows, status {meta.status}, duration {meta.duration_s} s",
            flush=True,
        )
    shared = runs["shared-AB"]

    def no_cache() -> None:  # what a first reader finds: steps.csv only
        for run in runs.values():
            (run / "steps.parquet").unlink(missing_ok=True)

    compare = gpumon + [
        "compare",
        "--exclusive",
        str(runs["alone-A"]),
        "--exclusive",
        str(runs["alone-B"]),
        "--shared",
        str(shared),
    ]
    with tempfile.TemporaryDirectory() as out:
        cases = [  # (title, command, remove the steps caches before each timing)
            (
                "gpumon runs, first (no steps.parquet: pandas reads steps.csv and writes it)",
                gpumon + ["runs", str(shared.parent)],
                True,
            ),
            (
                "gpumon runs, again (steps.parquet's columns, pyarrow alone)",
                gpumon + ["runs", str(shared.parent)],
                False,
            ),
            (
                "gpumon export --csv (shared capture)",
                gpumon + ["export", str(shared), "--csv", out],
                False,
            ),
            ("gpumon compare, first (CSV parsed, steps.parquet written)", compare, True),
            ("gpumon compare, again (steps.parquet read)", compare, False),
            (
                "python -c 'import pandas, scipy.stats, pyarrow' (compare's imports alone)",
                [sys.executable, "-c", "import pandas, scipy.stats, pyarrow.parquet"],
                False,
            ),
        ]
        timed(compare)  # warm-up: the interpreter's and the libraries' files in the page cache
        print(
            f"load average before timing: {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
            flush=True,
        )
        for title, cmd, fresh in cases:
            figures = []
            for _ in range(repeats):
                if fresh:
                    no_cache()
                wall, cpu, done = timed(cmd)
                if done.returncode != 0:
                    figures.append(f"exit {done.returncode}: {done.stderr.strip()[-300:]}")
                    break
                figures.append(f"{wall:.2f} s wall {cpu:.2f} s CPU")
            print(f"{title}: {'; '.join(figures)}", flush=True)
        print(
            f"load average after timing: {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
            flush=True,
        )
        print("  " + "\n  ".join(done_lines(compare)), flush=True)


def done_lines(cmd: list[str]) -> list[str]:
    """The first lines of what compare prints (rates, slowdowns, STP)."""
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[:8]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--minutes", type=float, default=60.0, help="length of each capture (default 60)"
    )
    parser.add_argument(
        "--window", type=float, default=5.0, help="minutes per RSS/CPU window (default 5)"
    )
    parser.add_argument(
        "--rate", type=float, default=200.0, help="steps per second of each light job (default 200)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the captures go (default: a new /tmp dir, kept)",
    )
    parser.add_argument(
        "--readers-only",
        type=Path,
        default=None,
        metavar="DIR",
        help="only time runs/export/compare on the captures a previous run left in DIR",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timings of each reader command (default 3)"
    )
    parser.add_argument("--job", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job is not None:
        job(args.rate)
    elif args.readers_only is not None:
        readers(args.readers_only, args.repeats)
    else:
        root = args.out or Path(tempfile.mkdtemp(prefix="gpumon-long-"))
        capture(root, args.minutes, args.window, args.rate)


if __name__ == "__main__":
    main()
