"""Captures that scale (issue 41): time and peak memory of `runs`, `compare`, `export` and the replay's first
frame on a big capture and on 10,000 runs, next to their floors measured in the same run.

    python benchmarks/scale.py [--steps 5000000 15000000] [--runs 10000] [--root /tmp/gpumon-scale]
        [--skip-replay] [--only runs compare export]

Every command runs in a fresh process under ``/usr/bin/time`` (its wall time and peak RSS). The floors:
json-loading every run.json of the runs folder, and ``pandas.read_csv`` of the capture's steps.csv, each in a fresh
process too (so both sides pay the interpreter's start; gpumon's side also its imports; gpumon and the libraries
both sides import byte-compiled first under ``--root``/pycache, as an install byte-compiles them). The data
goes under ``--root`` (never in the repository): a 5 M-step capture is ~0.26 GB of steps.csv, 15 M ~0.8 GB.

The capture is a staggered pair written as gpumon writes it: the run's metadata, states and sampled tables
through the real Recorder (tests/tracegen.py), its steps.csv (A alone, both, B alone; 100 and 50 steps/s alone,
1.5x slower shared) written in bulk, then finalised as the recorder does (the columnar copy and run.json's
summary: ``finalise`` in the table). "old" rows: the same run as recorded before copies and summaries, read
first (the reader makes them in the user's cache) and again. ``--only``: of a capture, only those commands' rows
(its finalise and floor are always measured).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpumon.core.store import columnar  # noqa: E402
from gpumon.core.store.trace import load_run, steps_summary  # noqa: E402
from tests.tracegen import Job, write_run  # noqa: E402

STEPS_A, STEPS_B = 0.01, 0.02  # seconds per step alone
SHARED = 1.5  # each job's step time shared, times its own
CHUNK = 1_000_000


def measure(
    argv: list[str], env: dict[str, str], timeout: float = 3600
) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) and exit status of ``argv`` run in a fresh process."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%e %M", "-o", out.name, *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
        wall, kib = out.read().split()[-2:]
    if done.returncode != 0:
        print(f"  ({' '.join(argv[2:5])}...: exit {done.returncode}: {done.stderr.strip()[-300:]})")
    return float(wall), int(kib) / 1024, done.returncode


def _job_steps(
    slot: str, spans: list[tuple[float, float, float]], pid: int
) -> dict[str, np.ndarray]:
    """A job's steps over ``spans`` of (start, end, seconds per step), 2 % noise, its first 5 steps warm-up."""
    rng = np.random.default_rng(pid)
    times = []
    for start, end, step_s in spans:
        n = int((end - start) / step_s)
        d = step_s * rng.lognormal(0.0, 0.02, n)
        times.append(start + np.cumsum(d) * ((end - start) / max(d.sum(), 1e-9)))
    t = np.concatenate(times)
    iter_s = np.diff(t, prepend=spans[0][0])
    n = len(t)
    return {
        "process": np.full(n, slot, dtype=object),
        "pid": np.full(n, pid),
        "step": np.arange(n),
        "t": np.round(t, 6),
        "iter_s": np.round(iter_s, 6),
        "samples": np.full(n, 64.0),
        "warmup": (np.arange(n) < 5).astype(int),
        "copy_bytes": np.zeros(n, dtype=int),
        "copy_s": np.full(n, np.nan),
    }


def make_capture(run_dir: Path, steps: int) -> Path:
    """A staggered pair of ``steps`` steps in all, recorded as gpumon records it (see the module's docstring)."""
    import pandas as pd

    # A alone 0.2 T, both 0.6 T, B alone 0.2 T: 60 T steps of A and 30 T of B
    total = steps / (
        0.2 / STEPS_A + 0.6 / (STEPS_A * SHARED) + 0.6 / (STEPS_B * SHARED) + 0.2 / STEPS_B
    )
    T = round(total, 3)
    a_end, b_start = 0.8 * T, 0.2 * T
    write_run(
        run_dir,
        [
            Job(slot="A", phases=((1.0, 0.1),), stop=a_end, pid=1000),
            Job(
                slot="B",
                spec="fcn:preset=small",
                start=b_start,
                phases=((b_start + 1.0, 0.1),),
                stop=T,
                pid=1001,
            ),
        ],
        interval_s=max(1.0, T / 20_000),
        gpu_util=60.0,
    )
    a = _job_steps("A", [(0.0, b_start, STEPS_A), (b_start, a_end, STEPS_A * SHARED)], 1000)
    b = _job_steps("B", [(b_start, a_end, STEPS_B * SHARED), (a_end, T, STEPS_B)], 1001)
    both = {k: np.concatenate([a[k], b[k]]) for k in a}
    order = np.argsort(both["t"], kind="stable")
    frame = pd.DataFrame({k: v[order] for k, v in both.items()})
    del both, a, b
    (run_dir / "steps.parquet").unlink(missing_ok=True)
    with open(run_dir / "steps.csv", "w", newline="") as f:
        for start in range(0, len(frame), CHUNK):
            frame.iloc[start : start + CHUNK].to_csv(f, index=False, header=start == 0)
    meta = json.loads((run_dir / "run.json").read_text())
    meta.pop("summary", None)
    meta["duration_s"] = T
    (run_dir / "run.json").write_text(json.dumps(meta))
    return run_dir


def finalise(run_dir: Path) -> None:
    """What the recorder does once run.json is final: the columnar copy, then run.json's summary."""
    columnar.write_run_copy(run_dir)
    run = load_run(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["summary"] = steps_summary(run).to_json()
    (run_dir / "run.json").write_text(json.dumps(meta))


def make_runs(folder: Path, count: int) -> Path:
    """``count`` small finished runs (copies of one recorded run, each under its own name)."""
    model = write_run(
        folder.parent / "model-run",
        [Job(slot="A", phases=((30.0, 0.1),)), Job(slot="B", phases=((30.0, 0.2),), pid=7)],
    )
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        shutil.copytree(
            model, folder / f"20261127-{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}-r{i:05d}"
        )
    return folder


def _without_summaries(folder: Path) -> None:
    for path in folder.glob("*/run.json"):
        meta = json.loads(path.read_text())
        meta.pop("summary", None)
        path.write_text(json.dumps(meta))


def row(
    rows: list[list[str]],
    what: str,
    floor: tuple[float, float, int] | None,
    got: tuple[float, float, int],
) -> None:
    ratio = f"{got[0] / floor[0]:.2f}x" if floor else ""
    rows.append([what, f"{got[0]:.2f}", f"{got[1]:.0f}", ratio])
    print(f"  {what:<58} {got[0]:8.2f} s {got[1]:8.0f} MB  {ratio}", flush=True)


def bench_runs(root: Path, count: int, env: dict[str, str], rows: list[list[str]]) -> None:
    """``gpumon runs --all`` over ``count`` runs: first (its rows made in the user's cache) and again, for runs
    with run.json's summary and for runs recorded before it (their summaries computed once into the cache)."""
    folder = make_runs(root / "many", count)
    gpumon = [sys.executable, "-m", "gpumon"]
    # lists model-run: byte-compiles what runs imports
    measure([*gpumon, "runs", str(folder.parent)], env)
    floor_code = "import json, pathlib, sys; [json.loads(p.read_bytes()) for p in pathlib.Path(sys.argv[1]).glob('*/run.json')]"
    for kind in ("with summaries", "recorded before summaries"):
        if kind.startswith("recorded"):
            _without_summaries(folder)
            shutil.rmtree(Path(env["GPUMON_CACHE_DIR"]), ignore_errors=True)
        for when in ("first", "again"):
            floor = measure([sys.executable, "-c", floor_code, str(folder)], env)
            row(rows, f"floor: json-load {count:,} run.json", None, floor)
            listed = measure([*gpumon, "runs", str(folder), "--all"], env)
            row(rows, f"gpumon runs --all, {count:,} runs {kind}, {when}", floor, listed)
    row(
        rows,
        f"gpumon runs (newest 20 of {count:,})",
        None,
        measure([*gpumon, "runs", str(folder)], env),
    )
    shutil.rmtree(folder)


FINALISE = (
    "import sys; sys.path.insert(0, {root!r}); from pathlib import Path; "
    "from benchmarks.scale import finalise; finalise(Path(sys.argv[1]))"
)
REPLAY = (
    "import sys; sys.path.insert(0, {root!r}); from gpumon.core.records.bus import Bus; "
    "from gpumon.core.sources.replay import ReplaySource; s = ReplaySource(sys.argv[1], Bus()); s.seek(s.start_t)"
)
READ_CSV = "import sys, pandas; pandas.read_csv(sys.argv[1])"


COMMANDS = ("runs", "compare", "export")


def bench_capture(
    root: Path,
    steps: int,
    env: dict[str, str],
    rows: list[list[str]],
    replay_too: bool,
    only: tuple[str, ...] = COMMANDS,
) -> None:
    """A capture of ``steps`` steps: finalised as the recorder does, read as a new run, then as an old one."""
    folder = root / f"steps-{steps}"
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    run_dir = make_capture(folder / "capture", steps)
    print(f"  made {steps:,} steps in {time.perf_counter() - started:.0f} s", flush=True)
    size = f"{steps / 1e6:g} M"
    finalised = measure([sys.executable, "-c", FINALISE.format(root=str(ROOT)), str(run_dir)], env)
    row(rows, f"{size} steps: finalise (columnar copy + summary)", None, finalised)
    csv_mb = (run_dir / "steps.csv").stat().st_size / 1e6
    copy_mb = (run_dir / "steps.parquet").stat().st_size / 1e6
    on_disk = (
        f"{size} steps on disk: steps.csv {csv_mb:.0f} MB ({csv_mb / steps * 1e6:.1f} MB/M steps), "
        f"steps.parquet {copy_mb:.0f} MB ({copy_mb / steps * 1e6:.1f} MB/M steps)"
    )
    print(f"  {on_disk}")
    rows.append([on_disk, "", "", ""])
    floor = measure([sys.executable, "-c", READ_CSV, str(run_dir / "steps.csv")], env)
    row(rows, f"{size}: floor: pandas.read_csv(steps.csv)", None, floor)
    out = str(folder / "export")
    gpumon = [sys.executable, "-m", "gpumon"]
    for what, argv in (
        ("gpumon runs", ["runs", str(folder)]),
        ("gpumon compare --shared", ["compare", "--shared", str(run_dir)]),
        ("gpumon export --csv", ["export", str(run_dir), "--csv", out]),
        ("gpumon export --parquet", ["export", str(run_dir), "--parquet", out, "--force"]),
    ):
        if argv[0] in only:
            row(rows, f"{size}: {what}", floor, measure([*gpumon, *argv], env))
    _as_recorded_before(run_dir)
    for what, argv in (
        ("gpumon compare, first (copy made in the cache)", ["compare", "--shared", str(run_dir)]),
        ("gpumon compare, again", ["compare", "--shared", str(run_dir)]),
        ("gpumon runs, first (summary made in the cache)", ["runs", str(folder)]),
        ("gpumon runs, again", ["runs", str(folder)]),
    ):
        if argv[0] in only:
            row(rows, f"{size} old: {what}", floor, measure([*gpumon, *argv], env))
    if replay_too:
        replay = [sys.executable, "-c", REPLAY.format(root=str(ROOT)), str(run_dir)]
        row(rows, f"{size}: replay's first frame", floor, measure(replay, env, timeout=1800))
    shutil.rmtree(folder)


def _as_recorded_before(run_dir: Path) -> None:
    """The run as recorded before copies and summaries: no steps.parquet, no summary in run.json."""
    (run_dir / "steps.parquet").unlink()
    meta = json.loads((run_dir / "run.json").read_text())
    meta.pop("summary", None)
    (run_dir / "run.json").write_text(json.dumps(meta))


# What the commands and the floors import from outside gpumon: compiled under the prefix before anything is timed.
# Without it the first command to import each (the floor's pandas, compare's scipy.stats) paid its compilation:
# 2.69 s against 0.93 s for the same read_csv, 2.47 s against 1.03 s for the same compare (2026-11-28).
THIRD_PARTY = "import numpy, pandas, pyarrow.parquet, psutil, scipy.stats"


def byte_compile(env: dict[str, str]) -> None:
    """gpumon's modules and the libraries it imports byte-compiled under ``env``'s pycache prefix, as installed."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "gpumon")], env=env, check=True
    )
    subprocess.run([sys.executable, "-c", THIRD_PARTY], env=env, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="*", default=[5_000_000, 15_000_000])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--root", type=Path, default=Path("/tmp/gpumon-scale"))
    parser.add_argument("--skip-replay", action="store_true")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=COMMANDS,
        default=list(COMMANDS),
        help="of a capture: these commands' rows",
    )
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUMON_CACHE_DIR": str(args.root / "cache")}
    # gpumon's modules byte-compiled, as an install has them and as the floor's json and pathlib are: without it
    # (PYTHONDONTWRITEBYTECODE, set on some boxes) every command compiles gpumon's modules first
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(args.root / "pycache")
    byte_compile(env)
    rows: list[list[str]] = []
    if args.runs:
        bench_runs(args.root, args.runs, env, rows)
    for steps in args.steps:
        bench_capture(args.root, steps, env, rows, not args.skip_replay, tuple(args.only))
    print("\n| work | wall s | peak MB | × floor |\n| --- | ---: | ---: | ---: |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    shutil.rmtree(args.root / "cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
