"""Do gpumon's intervals cover the answer a longer study would give? Single runs against repeats.

Captures ``--repeats`` (>= 10) repeats of a same-core CPU pair with the real
``gpumon run --headless``: ``fcn:threads=1,cpus=0`` alone, ``gemm:threads=1,cpus=0``
alone, and both together. The reference is the slowdown r of each job and the
STP computed from ALL repeats at once. Then it compares

* every single repeat on its own (one exclusive run per job, one shared run):
  the interval sees the noise within that run only;
* groups of three repeats (three exclusive runs per job, three shared runs):
  the interval comes from the spread between the runs;

and prints the share of intervals that contain the reference. Target: the
3-repeat intervals contain it at least 90 % of the time. Captures already in
``--out`` (matched by label) are reused, so an interrupted run resumes.

    nice -n 10 python benchmarks/interval_coverage.py --out /tmp/coverage [--repeats 12] [--duration 30]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validate_slowdown import background_cores, capture, load_average  # noqa: E402

FCN = "fcn:threads=1,cpus=0"
GEMM = "gemm:threads=1,cpus=0"
CONDITIONS = (("x-fcn", (FCN,)), ("x-gemm", (GEMM,)), ("s-fcn+gemm", (FCN, GEMM)))
NO_WAIT = (float("inf"), 0.0)
MIN_STEPS = 50
TRIES = 3


def existing(out: Path) -> dict[str, Path]:
    """Captures already in ``out`` by label (complete ones only)."""
    found = {}
    from gpumon.core.store.trace import load_run

    for meta_path in sorted(out.glob("*/run.json")):
        run = load_run(meta_path.parent)
        if run.meta.status == "complete":
            found[run.label] = meta_path.parent
    return found


def steady_steps(run: Path) -> int:
    """Post-warm-up steps of the job with the fewest (0 when one never got going)."""
    import csv

    with open(run / "steps.csv", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["warmup"] == "0"]
    from gpumon.core.store.trace import load_run

    return min(sum(1 for r in rows if r["process"] == w.slot) for w in load_run(run).workloads)


def record(out: Path, repeats: int, duration: float) -> list[dict[str, Path]]:
    """Every repeat's three captures (label -> run), capturing the missing ones."""
    out.mkdir(parents=True, exist_ok=True)
    have = existing(out)
    runs = []
    for i in range(repeats):
        repeat = {}
        for name, specs in CONDITIONS:
            label = f"cov-{name}-{i}"
            for _ in range(TRIES):
                if label in have and steady_steps(have[label]) >= MIN_STEPS:
                    break
                have[label] = capture(list(specs), label, out, duration, NO_WAIT)
                print(
                    f"  load {load_average()}, background {background_cores(have[label]):.2f} cores, "
                    f"{steady_steps(have[label])} steady steps",
                    flush=True,
                )
            else:
                sys.exit(
                    f"interval_coverage: {label} got fewer than {MIN_STEPS} steady steps {TRIES} times"
                )
            repeat[name] = have[label]
        runs.append(repeat)
    return runs


def intervals(repeats: list[dict[str, Path]], seed: int) -> dict[str, tuple[float, float, float]]:
    """(estimate, low, high) of r_A, r_B and STP from these repeats together."""
    from gpumon.analysis.compare import compare
    from gpumon.core.store.trace import load_run

    exclusive = [load_run(r[name]) for r in repeats for name in ("x-fcn", "x-gemm")]
    shared = [load_run(r["s-fcn+gemm"]) for r in repeats]
    c = compare(exclusive, shared, seed=seed)
    found = {f"r_{w.slot}": w.slowdown for w in c.workloads}
    found["STP"] = c.pair.stp
    return {k: (e.value, e.low, e.high) for k, e in found.items()}


def coverage(
    groups: list[list[dict[str, Path]]], truth: dict[str, tuple[float, float, float]]
) -> dict[str, tuple[int, int, float]]:
    """Per quantity: intervals containing the reference, intervals in all, their median relative width."""
    hits = {k: 0 for k in truth}
    totals = {k: 0 for k in truth}
    widths: dict[str, list[float]] = {k: [] for k in truth}
    for i, group in enumerate(groups):
        for key, (value, low, high) in intervals(group, seed=i).items():
            if math.isnan(low):
                continue
            totals[key] += 1
            hits[key] += low <= truth[key][0] <= high
            widths[key].append((high - low) / value)
    return {
        k: (hits[k], totals[k], sorted(widths[k])[len(widths[k]) // 2] if widths[k] else math.nan)
        for k in truth
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="runs directory (captures found there are reused)"
    )
    parser.add_argument(
        "--repeats", type=int, default=12, help="repeats of the three captures (default 12, >= 10)"
    )
    parser.add_argument(
        "--duration", type=float, default=30.0, help="seconds per capture (default 30)"
    )
    parser.add_argument(
        "--groups", type=int, default=60, help="3-repeat groups to draw (default 60)"
    )
    args = parser.parse_args()
    if args.repeats < 10:
        parser.error("--repeats must be at least 10")
    runs = record(args.out, args.repeats, args.duration)
    truth = intervals(runs, seed=0)
    print(
        f"\nreference from all {len(runs)} repeats: "
        + ", ".join(f"{k} {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for k, v in truth.items())
    )
    singles = [[r] for r in runs]
    for i, single in enumerate(singles):
        found = intervals(single, seed=i)
        print(
            f"repeat {i:2d}: "
            + ", ".join(f"{k} {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for k, v in found.items())
        )
    triples = [list(g) for g in itertools.combinations(runs, 3)]
    random.Random(0).shuffle(triples)
    triples = triples[: args.groups]
    print(f"\n{'intervals':<22} {'quantity':<6} {'contain the reference':>22} {'median width':>13}")
    for name, groups in (
        (f"single run (n={len(singles)})", singles),
        (f"3 repeats (n={len(triples)})", triples),
    ):
        for key, (hits, total, width) in coverage(groups, truth).items():
            share = hits / total if total else math.nan
            print(f"{name:<22} {key:<6} {hits:>5}/{total:<5} = {share:6.1%} {width:>12.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
