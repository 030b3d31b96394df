"""Cut a short window out of a real run directory, for test fixtures (not a test).

    python tests/data/trim.py SOURCE_RUN TARGET_DIR [--seconds 2.5] [--after 1.0]

run.json is kept as recorded; every table keeps the rows inside the window that starts
``--after`` seconds after the last job's first post-warm-up step (for a shared run: inside
the overlap, both jobs running and warm) and lasts ``--seconds``.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
from pathlib import Path


def first_steady(steps: list[dict[str, str]], process: str) -> float:
    return min(float(r["t"]) for r in steps if r["process"] == process and r["warmup"] == "0")


def trim(source: Path, target: Path, seconds: float, after: float) -> None:
    steps = list(csv.DictReader(io.StringIO((source / "steps.csv").read_text())))
    start = max(first_steady(steps, p) for p in {r["process"] for r in steps}) + after
    end = start + seconds
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "run.json", target / "run.json")
    for table in ("steps", "device", "processes", "host"):
        lines = (source / f"{table}.csv").read_text().splitlines(keepends=True)
        column = lines[0].split(",").index("t")
        kept = [line for line in lines[1:] if start <= float(line.split(",")[column]) <= end]
        (target / f"{table}.csv").write_text(lines[0] + "".join(kept))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--seconds", type=float, default=2.5)
    parser.add_argument("--after", type=float, default=1.0)
    args = parser.parse_args()
    trim(args.source, args.target, args.seconds, args.after)


if __name__ == "__main__":
    main()
