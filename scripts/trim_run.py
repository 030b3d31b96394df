"""Cut a run directory down to a time window, keeping run.json consistent: how tests/data/h100/ was made.

    python scripts/trim_run.py SRC_RUN DST_RUN --start 11.5 --end 19.5

Rows of every table with ``start <= t <= end`` are kept, with their original ``t``. The result
reads like a capture toggled on at ``start`` (``capture_start_t``) and ended at ``end``
(``duration_s``); workloads still running at ``end`` get ``stop_t = end``.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
from pathlib import Path

TABLES = ("steps", "device", "processes", "host")


def trim_table(src: Path, dst: Path, start: float, end: float) -> int:
    """Copy the header and the rows whose ``t`` lies in [start, end]; return the row count."""
    kept = 0
    with src.open(newline="") as fin, dst.open("w", newline="") as fout:
        reader = csv.reader(fin)
        writer = csv.writer(fout, lineterminator="\n")
        header = next(reader)
        writer.writerow(header)
        column = header.index("t")
        for row in reader:
            if start <= float(row[column]) <= end:
                writer.writerow(row)
                kept += 1
    return kept


def trim_run(src: Path, dst: Path, start: float, end: float) -> dict[str, int]:
    """Write the trimmed copy of ``src`` to ``dst``; return rows kept per table."""
    dst.mkdir(parents=True, exist_ok=True)
    kept = {
        t: trim_table(src / f"{t}.csv", dst / f"{t}.csv", start, end)
        for t in TABLES
        if (src / f"{t}.csv").exists()
    }
    if (src / "logs").is_dir():
        shutil.copytree(src / "logs", dst / "logs", dirs_exist_ok=True)
    meta = json.loads((src / "run.json").read_text())
    meta["capture_start_t"] = max(start, float(meta.get("capture_start_t", 0.0)))
    meta["duration_s"] = round(end - meta["capture_start_t"], 6)
    meta["trimmed_from"] = {"run": src.name, "start_t": start, "end_t": end}
    for workload in meta["workloads"]:
        if workload.get("stop_t") is None or workload["stop_t"] > end:
            workload["stop_t"] = end
    (dst / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--start", type=float, required=True, help="first run time kept (s)")
    parser.add_argument("--end", type=float, required=True, help="last run time kept (s)")
    args = parser.parse_args()
    print(trim_run(args.src, args.dst, args.start, args.end))


if __name__ == "__main__":
    main()
