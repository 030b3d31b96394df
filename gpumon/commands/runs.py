"""``gpumon runs``: list the captured runs of a runs directory (text, or ``--json`` for scripts)."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpumon.core.store.trace import RunSummary


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list captured runs", description="List the captured runs in a runs directory.")
    p.add_argument("dir", nargs="?", type=Path, default=None, metavar="DIR", help="runs directory (default: see gpumon --help)")
    p.add_argument("--json", action="store_true", help="one JSON array for scripts")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from gpumon.core.store.runner import RUNNING
    from gpumon.core.store.runstore import runs_dir_or_default
    from gpumon.core.store.trace import list_runs, summarize
    from gpumon.core.records.units import fmt_rate, json_number

    runs_dir = runs_dir_or_default(args.dir)
    summaries = [summarize(run) for run in list_runs(runs_dir)]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": s.name,
                        "path": str(runs_dir / s.name),
                        "label": s.label,
                        "mode": s.mode,
                        "share": s.share,
                        "status": s.status,
                        "workloads": s.workloads,
                        "duration_s": json_number(s.duration_s),
                        "iter_per_s": {k: json_number(v) for k, v in s.rates.items()},
                        "runner": runner_json(s),
                    }
                    for s in summaries
                ],
                indent=2,
            )
        )
        return 0
    if not summaries:
        print(f"no runs in {runs_dir}")
        return 0
    print(f"{'RUN':<34} {'MODE':<9} {'SHARE':<10} {'STATUS':<11} {'DURATION':>8}  RATES / WORKLOADS")
    for s in summaries:
        rates = "  ".join(f"{k} {fmt_rate(v)}" for k, v in sorted(s.rates.items())) or "no steps"
        duration = "–" if math.isnan(s.duration_s) else f"{s.duration_s:.1f}s"
        runner = ""
        if s.status == RUNNING and s.runner is not None:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.runner.started))
            runner = f"  (runner pid {s.runner.pid} since {since}{', detached' if s.runner.detached else ''})"
        print(f"{s.name:<34.34} {s.mode:<9} {s.shown_share:<10} {s.status:<11} {duration:>8}  {rates}  [{s.workloads}]{runner}")
    return 0


def runner_json(summary: "RunSummary") -> dict | None:
    """``runs --json``'s runner: who writes (wrote) the run, and since when (ISO 8601, local time with its offset)."""
    from gpumon.core.store.runner import RUNNING

    runner = summary.runner
    if runner is None:
        return None
    since = datetime.datetime.fromtimestamp(runner.started).astimezone().isoformat(timespec="seconds")
    return {"pid": runner.pid, "since": since, "user": runner.user, "host": runner.host, "detached": runner.detached,
            "alive": summary.status == RUNNING}
