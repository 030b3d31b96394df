"""``gpumon export``: a run's tables as plain CSV (or Parquet), complete rows only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpumon.commands.base import RUN_HELP
from gpumon.extras import require
from gpumon.core.records.printable import printable

HERE = (
    object()
)  # --csv or --parquet without a folder: one named after the run, in the current directory


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a run's tables as plain CSV (or Parquet)",
        description="Write steps.csv, device.csv, processes.csv, host.csv and gpu_others.csv (the other GPU processes; "
        "runs recorded before it have none) of a run, complete rows only, with columns named for a notebook "
        "(wall_epoch_s: the wall clock in Unix epoch seconds; step_s: a step's duration; job: the job's spec; "
        "host's per_core as core0_pct, core1_pct...), and its run.json. "
        f"RUN is {RUN_HELP}.",
    )
    p.add_argument("run", metavar="RUN")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--csv",
        type=Path,
        nargs="?",
        const=HERE,
        metavar="OUTDIR",
        help="write CSV files into OUTDIR (default: ./RUN_NAME-csv)",
    )
    target.add_argument(
        "--parquet",
        type=Path,
        nargs="?",
        const=HERE,
        metavar="OUTDIR",
        help="write Parquet files into OUTDIR (default: ./RUN_NAME-parquet)",
    )
    p.add_argument("--runs-dir", type=Path, default=None, help="where to look up RUN by name")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace files of the same names already in OUTDIR (without "
        "it they are refused). A failed write (full disk, read-only folder) leaves OUTDIR as it was",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # deferred: +0.04 s CPU (psutil) on gpumon --help
    from gpumon.core.store.runstore import export_dir, resolve_run
    from gpumon.core.store.runsfolder import runs_dir_or_default
    from gpumon.core.store.trace import export, load_run

    fmt, out = ("csv", args.csv) if args.csv is not None else ("parquet", args.parquet)
    if fmt == "parquet":
        require("pyarrow", "--parquet")
    run = load_run(resolve_run(args.run, runs_dir_or_default(args.runs_dir)))
    if out is HERE:
        out = export_dir(run.path, fmt)
    files = export(run, out, fmt, overwrite=args.force)
    # which run a name or 'last' meant, on stderr: stdout stays the list of files, for scripts
    tables = len([f for f in files if f.name != "run.json"])
    print(
        printable(
            f"gpumon: exported run {run.path.name} ({run.mode}, label {run.label}) to {out}: {tables} {fmt} files "
            "and run.json"
        ),
        file=sys.stderr,
    )
    for path in files:
        print(printable(path))
    return 0
