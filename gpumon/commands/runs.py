"""``gpumon runs``: list the captured runs of a runs directory (text, or ``--json`` for scripts)."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path
from typing import Any
from gpumon.commands.argtypes import positive_whole_number
from gpumon.core.records.enums import RunStatus
from gpumon.core.records.printable import printable
from gpumon.core.records.units import fmt_rate, json_number
from gpumon.core.store.runrecord import DamagedRun, RunSummary

NAME_WIDTH = 34  # the RUN column, widened to the longest name
DAMAGED = "damaged"  # a run whose run.json or tables do not read: listed with what is wrong, never left out
DEFAULT_LIMIT = 20  # the newest runs listed without --limit / --all


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "runs",
        help="list captured runs",
        description="List the captured runs in a runs directory, newest first "
        f"(the newest {DEFAULT_LIMIT} unless --limit or --all says otherwise). "
        "A run whose run.json or tables cannot be read (corrupt, truncated, empty) is listed as damaged, "
        "with what is wrong. A finished run is listed from its run.json alone (its summary, written when it "
        "finalised; a run recorded before summaries gets one computed once into $XDG_CACHE_HOME/gpumon).",
    )
    p.add_argument(
        "dir",
        nargs="?",
        type=Path,
        default=None,
        metavar="DIR",
        help="runs directory (default: see gpumon --help)",
    )
    p.add_argument("--json", action="store_true", help="one JSON array for scripts")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--limit",
        type=positive_whole_number,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"list the newest N runs (default {DEFAULT_LIMIT})",
    )
    shown.add_argument("--all", action="store_true", help="list every run")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # deferred: the listing cache's reader and writer (safewrite's tempfile), not needed by gpumon --help
    from gpumon.core.store.listing import listing
    from gpumon.core.store.runsfolder import runs_dir_or_default

    runs_dir = runs_dir_or_default(args.dir)
    listed, left = listing(runs_dir, newest=None if args.all else args.limit)
    if left:
        print(
            f"gpumon: {left} older run(s) in {runs_dir} not listed (--all lists them)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps([entry_json(entry, runs_dir) for entry in listed], indent=2))
        return 0
    if not listed:
        print(f"no runs in {runs_dir}")
        return 0
    width = max(
        NAME_WIDTH, *(len(entry.name) for entry in listed)
    )  # a name is never cut: copy-paste works
    print(
        f"{'RUN':<{width}} {'MODE':<9} {'SHARE':<10} {'STATUS':<11} {'DURATION':>8}  RATES / WORKLOADS"
    )
    print("\n".join([entry_line(entry, width) for entry in listed]))  # one write, not one a row
    bad = sum(isinstance(entry, DamagedRun) for entry in listed)
    if bad:
        print(
            f"gpumon: {bad} damaged run(s) in {runs_dir}, listed with what is wrong",
            file=sys.stderr,
        )
    return 0


def entry_line(entry: RunSummary | DamagedRun, width: int = 0) -> str:
    """One row of the table, its name whole in a column ``width`` wide (at least ``NAME_WIDTH``)."""
    width = max(width, NAME_WIDTH, len(entry.name))
    if isinstance(entry, DamagedRun):
        return printable(
            f"{entry.name:<{width}} {'?':<9} {'?':<10} {DAMAGED:<11} {'–':>8}  {entry.problem}"
        )
    s = entry
    rates = (
        "  ".join(
            f"{k} {fmt_rate(s.rates.get(k, math.nan))} ({s.steps.get(k, 0):,} steps)"
            for k in sorted(set(s.rates) | set(s.steps))
        )
        or "no steps"
    )
    duration = "–" if math.isnan(s.duration_s) else f"{s.duration_s:.1f}s"
    runner = ""
    if s.status == RunStatus.RUNNING and s.runner is not None:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.runner.started))
        runner = f"  (runner pid {s.runner.pid} since {since}{', detached' if s.runner.detached else ''})"
    return printable(  # names, labels, specs: text from the run directories
        f"{s.name:<{width}} {s.mode:<9} {s.shown_share:<10} {s.status:<11} {duration:>8}  {rates}  [{s.workloads}]{runner}"
    )


def entry_json(entry: RunSummary | DamagedRun, runs_dir: Path) -> dict[str, Any]:
    """One element of ``runs --json``: every run has the same keys; a damaged one has nulls and its ``problem``."""
    if isinstance(entry, DamagedRun):
        return {
            "name": entry.name,
            "path": str(runs_dir / entry.name),
            "label": None,
            "mode": None,
            "share": None,
            "status": DAMAGED,
            "workloads": None,
            "duration_s": None,
            "iter_per_s": {},
            "steps": {},
            "runner": None,
            "problem": entry.problem,
        }
    return {
        "name": entry.name,
        "path": str(runs_dir / entry.name),
        "label": entry.label,
        "mode": entry.mode,
        "share": entry.share,
        "status": entry.status,
        "workloads": entry.workloads,
        "duration_s": json_number(entry.duration_s),
        "iter_per_s": {k: json_number(v) for k, v in entry.rates.items()},
        "steps": dict(entry.steps),
        "runner": runner_json(entry),
        "problem": None,
    }


def runner_json(summary: RunSummary) -> dict | None:
    """``runs --json``'s runner: who writes (wrote) the run, and since when (ISO 8601, local time with its offset)."""
    runner = summary.runner
    if runner is None:
        return None
    since = (
        datetime.datetime.fromtimestamp(runner.started).astimezone().isoformat(timespec="seconds")
    )
    return {
        "pid": runner.pid,
        "since": since,
        "user": runner.user,
        "host": runner.host,
        "detached": runner.detached,
        "alive": summary.status == RunStatus.RUNNING,
    }
