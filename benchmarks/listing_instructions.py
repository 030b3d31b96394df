"""``gpumon runs`` in instructions (valgrind's callgrind): deterministic where wall seconds on a loaded box are not.

    python benchmarks/listing_instructions.py [--runs 200] [--at 10000] [--root /tmp/gpumon-listing-cg]

Counts, each in a fresh process under ``valgrind --tool=callgrind``: the floor (json-loading every run.json, as
benchmarks/scale.py's floor does) over an empty folder and over ``--runs`` runs (benchmarks/scale.py's runs: copies
of one finished run), and ``gpumon runs --all`` over the empty folder (its start), over the runs with the user's
cache empty (first) and again. Prints each count, the start and the cost a run of both sides, and the ratio they
extrapolate to at ``--at`` runs. gpumon's modules are byte-compiled first, as benchmarks/scale.py does.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.scale import make_runs  # noqa: E402

FLOOR = (
    "import json, pathlib, sys; "
    "[json.loads(p.read_bytes()) for p in pathlib.Path(sys.argv[1]).glob('*/run.json')]"
)


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """The instructions callgrind counts for ``argv`` (its output discarded)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no count from callgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--at", type=int, default=10_000)
    parser.add_argument("--root", type=Path, default=Path("/tmp/gpumon-listing-cg"))
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    shutil.rmtree(args.root, ignore_errors=True)
    runs = make_runs(args.root / "many", args.runs)
    empty = args.root / "empty"
    empty.mkdir()
    cache = args.root / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUMON_CACHE_DIR": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(args.root / "pycache")
    gpumon = [sys.executable, "-m", "gpumon", "runs", "--all"]
    subprocess.run([*gpumon, str(runs)], env=env, stdout=subprocess.DEVNULL, check=True)
    shutil.rmtree(cache, ignore_errors=True)
    counts = {
        "floor, empty folder": instructions([sys.executable, "-c", FLOOR, str(empty)], env),
        f"floor, {args.runs} runs": instructions([sys.executable, "-c", FLOOR, str(runs)], env),
        "gpumon runs, empty folder": instructions([*gpumon, str(empty)], env),
    }
    shutil.rmtree(cache, ignore_errors=True)
    counts[f"gpumon runs, {args.runs} runs, first"] = instructions([*gpumon, str(runs)], env)
    counts[f"gpumon runs, {args.runs} runs, again"] = instructions([*gpumon, str(runs)], env)
    for what, count in counts.items():
        print(f"  {what:<36} {count / 1e6:10.1f} M instructions")
    floor_start, floor_all, start, first, again = counts.values()
    floor_run = (floor_all - floor_start) / args.runs
    print(f"  floor: start {floor_start / 1e6:.0f} M, {floor_run / 1e3:.0f} k a run")
    floor_at = floor_start + args.at * floor_run
    for when, total in (("first", first), ("again", again)):
        per_run = (total - start) / args.runs
        at = start + args.at * per_run
        print(
            f"  gpumon runs, {when}: start {start / 1e6:.0f} M, {per_run / 1e3:.0f} k a run: "
            f"{at / floor_at:.2f}x the floor at {args.at:,} runs"
        )
    shutil.rmtree(args.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
