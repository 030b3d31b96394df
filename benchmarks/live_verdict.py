"""How long the live interference line must measure before its r, STP and words hold: real pairs replayed.

Each shared capture's steps go through the live computation (``gpumon.core.records.rates.OverlapRates``, as
``gpumon run --baseline`` feeds it) against its jobs' exclusive captures (each job's rate alone, as ``--baseline``
reads it). At every step the running r of each job and STP are compared with the whole overlap's (``gpumon
compare``'s point values); ``error`` is the larger of |r/r_final - 1| over the jobs and |STP/STP_final - 1|.
Printed per pair: the final r and STP, the overlap's length and the slowest job's steps in it, when the error fell
below 10 % and 5 % for good (seconds into the overlap, and the slowest job's steps then), and, for each candidate
minimum window (seconds and steps of each job, the live line's ``MIN_OVERLAP_S``/``MIN_OVERLAP_STEPS`` among them),
the largest error the line would show once the window holds it and whether any word it would print (the verdict
on STP rounded to two digits, each job's "runs faster"/"barely notices"/"runs slower") differs from the final one.

Datasets: the H100's time-sliced and MPS pairs (``../shared/h100/experiments``: q4_contention.tgz, modes.tgz;
``../shared/h100/runs``: the two longer pairs), and with ``--cpu`` CPU pairs of the tiny presets captured here
first (each job alone ``--cpu-seconds``, then each pair as long). Asserts nothing.

    python benchmarks/live_verdict.py [--h100 ../shared/h100] [--cpu] [--cpu-seconds 30]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpumon.analysis.rates import curve, job_steps  # noqa: E402
from gpumon.core.records.rates import (  # noqa: E402
    LIVE_DIGITS,
    MIN_OVERLAP_S,
    MIN_OVERLAP_STEPS,
    OverlapRates,
    Point,
    effect,
    exclusive_rate,
    slowdown,
    stp,
    verdict,
)
from gpumon.core.store.trace import Run, load_run  # noqa: E402

CANDIDATES = ((1.0, 0), (2.0, 20), (3.0, 50), (MIN_OVERLAP_S, MIN_OVERLAP_STEPS), (8.0, 50))
CPU_JOBS = ("fcn:preset=tiny", "lstm:preset=tiny", "gemm:preset=tiny")


@dataclass(frozen=True)
class Sample:
    """The live line's figures ``elapsed`` seconds into the overlap, with the slowest job's ``steps`` in it."""

    elapsed: float
    steps: float
    r: dict[str, float]
    stp: float


def alone_rate(run: Run) -> float:
    """A job's exclusive rate from its capture alone (its only job), as --baseline reads it."""
    c = curve(run, run.workloads[0].slot)
    return exclusive_rate(c.t, c.n) if c is not None else math.nan


def live_samples(run: Run, x: dict[str, float]) -> list[Sample]:
    """The running r and STP at every step of the shared run, once both jobs have a rate in the overlap."""
    slots = sorted(x)
    rows = []
    for slot in slots:
        s = job_steps(run, slot)
        rows += [
            (float(t), slot, float(n), bool(w))
            for t, n, w in zip(s["t"], s["step"], s["warmup"].fillna(0))
        ]
    overlap, out = OverlapRates(), []
    for t, slot, n, warm in sorted(rows):
        overlap.add(slot, Point(t, n), warm)
        window = overlap.window(slots)
        if any(not rate > 0 for rate in window.rates.values()):
            continue
        r = {p: slowdown(x[p], window.rates[p]) for p in slots}
        out.append(Sample(window.duration, min(window.steps.values()), r, stp(r.values())))
    return out


def error(sample: Sample, final: Sample) -> float:
    return max(
        [abs(sample.stp / final.stp - 1)] + [abs(sample.r[p] / final.r[p] - 1) for p in final.r]
    )


def words(sample: Sample) -> tuple[str, ...]:
    shown = round(sample.stp, LIVE_DIGITS)
    return (verdict(shown, shown), *(effect(sample.r[p]) for p in sorted(sample.r)))


def settled(samples: list[Sample], final: Sample, within: float) -> tuple[float, float]:
    """Seconds into the overlap, and the slowest job's steps then, after which the error stays within ``within``."""
    for i in range(len(samples) - 1, -1, -1):
        if error(samples[i], final) > within:
            return (
                (samples[i + 1].elapsed, samples[i + 1].steps)
                if i + 1 < len(samples)
                else (math.inf, math.inf)
            )
    return (samples[0].elapsed, samples[0].steps) if samples else (math.inf, math.inf)


def pairs_in(folder: Path) -> list[tuple[Path, dict[str, Path]]]:
    """Each shared run of an experiment's runs/ folder with its jobs' exclusive runs (``*-x-NAME[-rN]``)."""
    runs = sorted(p for p in folder.iterdir() if (p / "run.json").exists())
    alone = {p.name.split("-x-")[1].rsplit("-r", 1)[0]: p for p in runs if "-x-" in p.name}
    out = []
    for shared in (p for p in runs if "-s-" in p.name):
        specs = {w.slot: (w.spec or "").split(":")[0] for w in load_run(shared).workloads}
        if all(name in alone for name in specs.values()):
            out.append((shared, {slot: alone[name] for slot, name in specs.items()}))
    return out


def capture_cpu(root: Path, seconds: float) -> Path:
    """Each tiny CPU job alone, then each pair of them, as ``runs/*-x-NAME`` and ``runs/*-s-A+B``."""
    runs = root / "runs"
    env = {**os.environ, "GPUMON_PYTHON": sys.executable}

    def run(label: str, *specs: str) -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gpumon",
                "run",
                *specs,
                "--headless",
                "--device",
                "cpu",
                "--no-nvml",
                "--duration",
                f"{seconds:g}",
                "--label",
                label,
                "--out",
                str(runs),
            ],
            check=True,
            capture_output=True,
            env=env,
        )

    names = [spec.split(":")[0] for spec in CPU_JOBS]
    for name, spec in zip(names, CPU_JOBS):
        run(f"x-{name}", spec)
    for i in range(len(CPU_JOBS)):
        for j in range(i + 1, len(CPU_JOBS)):
            run(f"s-{names[i]}+{names[j]}", CPU_JOBS[i], CPU_JOBS[j])
    return runs


def report(dataset: str, shared: Path, alone: dict[str, Path]) -> None:
    run = load_run(shared)
    x = {slot: alone_rate(load_run(path)) for slot, path in alone.items()}
    samples = live_samples(run, x)
    if not samples:
        print(f"{dataset:8} {shared.name}: no overlap")
        return
    final = samples[-1]
    t10, n10 = settled(samples, final, 0.10)
    t5, n5 = settled(samples, final, 0.05)
    cells = []
    for seconds, steps in CANDIDATES:
        shown = [s for s in samples if s.elapsed >= seconds and s.steps >= steps]
        worst = max((error(s, final) for s in shown), default=math.nan)
        flips = sum(words(s) != words(final) for s in shown)
        cells.append(f"{100 * worst:5.1f}%{'*' if flips else ' '}")
    r = " ".join(f"{p} {final.r[p]:.2f}" for p in sorted(final.r))
    print(
        f"{dataset:8} {shared.name[16:]:28} r {r:16} STP {final.stp:.2f}  {final.elapsed:5.1f} s {final.steps:6.0f}  "
        f"10%: {t10:5.2f} s {n10:5.0f}  5%: {t5:5.2f} s {n5:5.0f}  | " + "  ".join(cells)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--h100", type=Path, default=REPO.parent / "shared" / "h100")
    parser.add_argument(
        "--cpu", action="store_true", help="capture CPU pairs of the tiny presets here first"
    )
    parser.add_argument("--cpu-seconds", type=float, default=30.0)
    args = parser.parse_args()
    heads = "  ".join(f"{s:g} s/{n:<3d}" for s, n in CANDIDATES)
    print(
        "dataset  pair                         final r           STP    overlap steps  "
        "error for good after (s, steps)       | largest error once the window holds (s/steps); * a word flips"
    )
    print(f"{'':135}| {heads}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("q4_contention.tgz", "modes.tgz"):
            with tarfile.open(args.h100 / "experiments" / name) as tar:
                tar.extractall(tmp, filter="data")
        folders = [
            ("h100-ts", Path(tmp) / "q4" / "runs"),
            ("h100-ts", Path(tmp) / "exp" / "runs"),
            ("h100-mps", Path(tmp) / "expmps" / "runs"),
            ("h100-ts", args.h100 / "runs"),
        ]
        if args.cpu:
            folders.append(("cpu", capture_cpu(Path(tmp) / "cpu", args.cpu_seconds)))
        for dataset, folder in folders:
            for shared, alone in pairs_in(folder):
                report(dataset, shared, alone)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
