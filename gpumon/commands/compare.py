"""The ``gpumon compare`` subcommand: argument parsing and its handler (imports stay light)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from gpumon.analysis import stats_helper
from gpumon.commands.argtypes import add_exclusive, parse_runs
from gpumon.core.records.rates import DEFINITIONS
from gpumon.errors import UsageError
from gpumon.console.color import use_color

# compare's own terms; the rates' come from core/records/rates.py (DEFINITIONS), in the words every help uses
COMPARE_TERMS = (
    (
        "per-copy bandwidth",
        "bytes / CUDA-event time of each copy; while sharing it includes waiting for a time "
        "slice, so it falls even on an idle link; link busy (PCIe traffic / link capacity) says whether the link was "
        "the limit; copy bytes/s is bytes / step wall time. On the CPU a copy is a RAM-to-RAM memcpy timed on the "
        "host (no link, no time slice)",
    ),
    (
        "why",
        "each job's extra time per step split into waiting for the GPU, the host-to-device link, the CPU and "
        'unexplained, with the evidence (docs/compare.md); "cannot tell" when data is missing',
    ),
    (
        "intervals",
        "95 %: with two or more runs of a condition, from the spread between the runs (Student t); with "
        "one run, a moving-block bootstrap over time bins that covers within-run noise only (the output says so); the "
        'verdict is "cannot tell" when the STP interval straddles 1',
    ),
)


def definitions(terms: tuple[tuple[str, str], ...]) -> str:
    """``terms`` as an indented glossary for ``--help`` (the term, then its words wrapped beside it)."""
    lines = []
    for term, text in terms:
        wrapped = textwrap.wrap(text, width=58, break_on_hyphens=False)
        lines.append(
            f"  {term:<19} {wrapped[0]}" if len(term) < 20 else f"  {term}\n{'':22}{wrapped[0]}"
        )
        lines += [f"{'':22}{line}" for line in wrapped[1:]]
    return "\n".join(lines)


DESCRIPTION = f"""\
Compare exclusive and shared runs of a pair of workloads, side by side: each job's
rate alone and shared, its slowdown, the pair's combined throughput (STP), whether
sharing paid off, and how copy bandwidth, GPU utilisation and CPU use changed.

definitions (docs/numbers.md):
{definitions(DEFINITIONS + COMPARE_TERMS)}

A RUN is a run directory, a run's name or --label in the runs directory (a label
names the newest run with that label), or 'last'.
Workloads are matched to the shared run's A and B by their spec (name and
options); prefix a run with A= or B= to assign it when specs differ. With no
--exclusive run, the baselines come from the exclusive phase of a staggered
shared run (A alone before B started), and the output says so.
"""

EPILOG = """\
examples:
  gpumon compare --exclusive RUN_A --exclusive RUN_B --shared RUN_AB
  gpumon compare --exclusive A=RUN_1 --exclusive A=RUN_2 --exclusive B=RUN_3 \\
                 --shared RUN_AB1 --shared RUN_AB2 --report out/
  gpumon compare --shared STAGGERED_RUN --json
"""


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add ``compare`` to the CLI's subcommands, with ``handler=run``."""
    parser = subparsers.add_parser(
        "compare",
        help="compare exclusive and shared runs: slowdown, combined throughput, and why",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_exclusive(
        parser,
        "a run of one workload alone (repeat the flag for each workload and for repeats); "
        "A=RUN or B=RUN assigns it to that shared workload instead of matching by spec",
    )
    parser.add_argument(
        "--shared",
        metavar="RUN",
        action="append",
        default=[],
        help="a run of both workloads together (repeat the flag for repeats of the same pair); required",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="also write report.md, summary.json, CSVs of the tables and PNG plots into DIR (the plots need "
        "matplotlib: pip install 'gpumon[analysis]'; without it the rest is written and the report says so)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --report: replace report files already in DIR (without it they are kept and nothing is "
        "written)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the results as JSON for scripts: 'summary' (the verdict in words), each workload's "
        "'slowdown' ({estimate, low, high}), 'cause', 'shares' and 'evidence', the pair's 'stp'",
    )
    parser.set_defaults(handler=run, quick_exit=True)


def start_early(argv: list[str]) -> None:
    """Before the arguments are parsed: the distribution tests' helper, so its scipy import starts first."""
    if not {"-h", "--help"} & set(argv):
        stats_helper.start_early()


def run(args: argparse.Namespace) -> int:
    """Handler of ``gpumon compare``: prints tables or JSON, optionally writes a report."""
    if not args.shared:
        raise UsageError("compare needs at least one --shared RUN (see gpumon compare --help)")
    if args.force and not args.report:
        raise UsageError("--force only applies to --report DIR (it replaces the report's files)")
    exclusive_paths, shared_paths, assign = parse_runs(args.exclusive, args.shared)
    # the helper started early, kept if it pays: its scipy import runs while the analysis is imported and the
    # runs are read
    tests = stats_helper.for_runs([*exclusive_paths, *shared_paths])
    # deferred: +0.17 s CPU (numpy, psutil) on gpumon --help; and after the helper has started
    from gpumon.analysis.compare import compare
    from gpumon.analysis.text import comparison_json, render_tables
    from gpumon.core.store.trace import load_run

    exclusive = [load_run(p) for p in exclusive_paths]
    shared = [load_run(p) for p in shared_paths]
    comparison = compare(exclusive, shared, assign, tests=tests)
    written = []
    if args.report:
        # deferred: +0.14 s CPU (numpy) on gpumon --help
        from gpumon.analysis.report import write_report

        written = write_report(
            comparison, [*exclusive, *shared], Path(args.report), replace=args.force
        )
    if args.json:
        data = comparison_json(comparison)
        if args.report:
            data["report"] = {"dir": str(Path(args.report)), "files": [p.name for p in written]}
        print(json.dumps(data, indent=2, allow_nan=False))
    else:
        print("\n".join(render_tables(comparison, color=use_color(sys.stdout))))
        if args.report:
            # deferred: +0.14 s CPU (numpy) on gpumon --help
            from gpumon.analysis.report import PLOTS_NEED

            drawn = any(p.suffix == ".png" for p in written)
            what = (
                "report.md, summary.json, CSVs, PNGs"
                if drawn
                else f"report.md, summary.json, CSVs; {PLOTS_NEED}"
            )
            print(f"\nReport written to {args.report} ({len(written)} files: {what})")
    return 0
