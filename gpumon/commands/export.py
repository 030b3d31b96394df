"""``gpumon export``: a run's tables as plain CSV (or Parquet), complete rows only."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpumon.extras import require


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a run's tables as plain CSV (or Parquet)",
        description="Write steps.csv, device.csv, processes.csv, host.csv and gpu_others.csv (the other GPU processes; "
        "runs recorded before it have none) of a run, complete rows only. "
        "RUN is a run directory, a run name in the runs directory, or 'last'.",
    )
    p.add_argument("run", metavar="RUN")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", type=Path, metavar="OUTDIR", help="write CSV files into OUTDIR")
    target.add_argument("--parquet", type=Path, metavar="OUTDIR", help="write Parquet files into OUTDIR")
    p.add_argument("--runs-dir", type=Path, default=None, help="where to look up RUN by name")
    p.add_argument("--force", action="store_true", help="replace files of the same names already in OUTDIR (without "
                   "it they are refused). A failed write (full disk, read-only folder) leaves OUTDIR as it was")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from gpumon.core.store.runstore import resolve_run, runs_dir_or_default
    from gpumon.core.store.trace import export, load_run

    fmt, out = ("csv", args.csv) if args.csv is not None else ("parquet", args.parquet)
    if fmt == "parquet":
        require("pyarrow", "--parquet")
    run = load_run(resolve_run(args.run, runs_dir_or_default(args.runs_dir)))
    for path in export(run, out, fmt, overwrite=args.force):
        print(path)
    return 0
