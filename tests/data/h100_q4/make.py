"""How these fixtures were cut from the real H100 runs (not a test; needs the original archive).

    python tests/data/h100_q4/make.py /tmp/q4/q4/runs

Each run keeps run.json as recorded and the rows of every table inside a 2.5 s window:
for an exclusive run, from 1 s after its first post-warm-up step; for a shared run,
from 1 s after the start of its overlap window (both jobs running, warm-up over).
"""

from __future__ import annotations

import csv
import io
import shutil
import sys
from pathlib import Path

RUNS = ("x-h2d", "x-gemm", "x-fcn", "s-fcn+fcn", "s-h2d+h2d", "s-h2d+gemm", "s-gemm+fcn")
SECONDS = 2.5
HERE = Path(__file__).resolve().parent


def first_steady(steps: list[dict[str, str]], process: str) -> float:
    return min(float(r["t"]) for r in steps if r["process"] == process and r["warmup"] == "0")


def trim(source: Path, target: Path) -> None:
    steps = list(csv.DictReader(io.StringIO((source / "steps.csv").read_text())))
    start = max(first_steady(steps, p) for p in {r["process"] for r in steps}) + 1.0
    end = start + SECONDS
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "run.json", target / "run.json")
    for table in ("steps", "device", "processes", "host"):
        lines = (source / f"{table}.csv").read_text().splitlines(keepends=True)
        kept = [line for line in lines[1:] if start <= float(line.split(",")[3 if table == "steps" else 0]) <= end]
        (target / f"{table}.csv").write_text(lines[0] + "".join(kept))


def main() -> None:
    runs = Path(sys.argv[1])
    for name in RUNS:
        (source,) = runs.glob(f"*-{name}-r1")
        trim(source, HERE / name)


if __name__ == "__main__":
    main()
