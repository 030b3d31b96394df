"""The soak (issue 41): a detached run of two probed jobs at ten times the usual step rate, watched by the TUI,
for --minutes; the memory of the runner and of the TUI must stay flat within 10 %.

    python benchmarks/soak.py --minutes 60            # the issue's hour
    python benchmarks/soak.py --minutes 10 --rate 250 # what a loaded 2-core box affords

The usual step rate is 25 steps/s (a week of it is the 15 M-step capture of benchmarks/scale.py); each job
here steps at --rate (default 250/s, ten times that), paced by the clock, with the public probe API. The
runner is ``gpumon run --cmd JOB --cmd JOB --detach`` (no NVML: this measures gpumon's own growth, not a
driver's); the TUI is ``gpumon attach RUN`` in a pty of 120x40, its output drained. Every --every seconds
the memory of both is sampled: RssAnon (the anonymous pages: the heap, what a leak grows) and VmRSS (which also
counts the shared libraries' file pages, which the kernel drops and reads back as the box's memory pressure
changes: a soak on a busy box saw RSS fall 21 % while nothing was freed). After --warmup minutes the first and
last tenth of the samples are compared: "flat" means the last tenth's mean RssAnon is within 10 % of the first
tenth's; RSS and both peaks are printed beside it. Data
under --root (default /tmp/gpumon-soak), removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from pty_monitor import PtyProgram, rss_mib  # noqa: E402

JOB = textwrap.dedent(
    """
    import sys, time
    from gpumon import probe

    period = 1.0 / float(sys.argv[1])
    start = time.monotonic()
    n = 0
    while True:
        n += 1
        delay = start + n * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        probe.step(samples=64)
    """
)


def flat(samples: list[float]) -> tuple[float, float, float, float]:
    """Mean of the first tenth, of the last tenth, their ratio, and the peak."""
    tenth = max(1, len(samples) // 10)
    first, last = statistics.fmean(samples[:tenth]), statistics.fmean(samples[-tenth:])
    return first, last, last / first, max(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="minutes before the first sample counts"
    )
    parser.add_argument("--rate", type=float, default=250.0, help="steps per second of each job")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--root", type=Path, default=Path("/tmp/gpumon-soak"))
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    root = args.root
    shutil.rmtree(root, ignore_errors=True)
    (root / "runs").mkdir(parents=True)
    job = root / "job.py"
    job.write_text(JOB)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUMON_CACHE_DIR": str(root / "cache")}
    command = f"{sys.executable} {job} {args.rate:g}"
    gpumon = [sys.executable, "-P", "-m", "gpumon"]
    started = subprocess.run(
        [*gpumon, "run", "--cmd", command, "--cmd", command, "--detach", "--json", "--no-nvml", "--out", str(root / "runs")],
        env=env, capture_output=True, text=True, check=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    out = json.loads(started.stdout)
    run_dir, runner = Path(out["run"]), int(out["runner_pid"])
    tui = PtyProgram([*gpumon, "attach", str(run_dir)], env, 120, 40, str(ROOT))
    samples: list[
        tuple[float, ...]
    ] = []  # t, runner and TUI RssAnon MiB, step rows, their VmRSS MiB
    began = time.monotonic()
    try:
        tui.drain(began + args.warmup * 60)
        while time.monotonic() - began < (args.warmup + args.minutes) * 60 and tui.open:
            with open(run_dir / "steps.csv", "rb") as f:
                rows = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
            anon = (rss_mib(runner, "RssAnon"), rss_mib(tui.pid, "RssAnon"))
            samples.append(
                (time.monotonic() - began, *anon, rows, rss_mib(runner), rss_mib(tui.pid))
            )
            tui.drain(time.monotonic() + args.every)
    finally:
        status = tui.quit(b"q")
        subprocess.run(
            [*gpumon, "stop", str(run_dir)], env=env, capture_output=True, timeout=300, cwd=ROOT
        )
    if len(samples) < 2:
        print(f"too few samples ({len(samples)}); the TUI exited: {status}; {tui.tail[-500:]!r}")
        return 1
    verdicts = report(samples, args)
    print(f"  the TUI quit with {status}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if all(verdicts) else 1


def report(samples: list[tuple[float, ...]], args: argparse.Namespace) -> list[bool]:
    """Print the soak's figures; whether the runner's and the TUI's memory stayed flat within 10 %."""
    seconds = samples[-1][0] - samples[0][0]
    rate = (samples[-1][3] - samples[0][3]) / seconds
    print(
        f"soak: {seconds / 60:.1f} min measured after {args.warmup:g} min warm-up, 2 jobs at {args.rate:g} "
        f"steps/s each; the capture recorded {rate:.0f} steps/s; {len(samples)} samples every {args.every:g} s"
    )
    verdicts = []
    for name, anon, rss in (("runner", 1, 4), ("TUI", 2, 5)):
        first, last, ratio, peak = flat([s[anon] for s in samples])
        verdicts.append(abs(ratio - 1) <= 0.10)
        print(
            f"  {name:<6} RssAnon first tenth {first:7.1f} MiB, last tenth {last:7.1f} MiB ({ratio:.3f}x), "
            f"peak {peak:7.1f} MiB: {'flat within 10 %' if verdicts[-1] else 'NOT flat'}"
        )
        first, last, ratio, peak = flat([s[rss] for s in samples])
        print(
            f"  {name:<6} VmRSS   first tenth {first:7.1f} MiB, last tenth {last:7.1f} MiB ({ratio:.3f}x), "
            f"peak {peak:7.1f} MiB"
        )
    return verdicts


if __name__ == "__main__":
    raise SystemExit(main())
