"""Issue 42's lent-GPU session in one call: calibrate, capture each built-in job with its beside-partner phase
(time-sliced and under MPS), measure pairs, and score `gpumon predict` from the phase runs against them.

    source .gpu/setup.sh && python benchmarks/predict_on_gpu.py --out $OUT/predict42      # about 9 min on an H100 (estimated, 38 captures: not run yet)
    python benchmarks/predict_on_gpu.py --out DIR --device cpu --jobs fcn,lstm --preset tiny --seconds 8  # mechanics

Steps (each command and its output logged under --out; everything gpumon writes goes there too):

  1. `gpumon calibrate --json` into DIR/calibration ($GPUMON_CALIBRATION), then the standard partner alone
     (`gpumon run gemm --duration S`): its rate is stored as the calibration's ``partner_rate`` (what the phase's
     pressure is measured against);
  2. each job `gpumon run JOB --partner-phase P --duration S+P` and `gpumon run JOB --duration S` (its plain solo
     run, compare's baseline), time-sliced, and again with `--share mps`;
  3. each pair of the jobs `gpumon run A B --duration S` time-sliced (under MPS the --mps-pairs), and `gpumon
     compare --json` against the jobs' plain solo runs for the measured r;
  4. `gpumon predict`'s prediction (gpumon.analysis.predict, what --json prints) from the two phase runs: MAPE of r
     against r = 1, r inside the printed intervals, the lowest low bound, wrong verdicts; DIR/score.md and .json.

Device named in score.md (nvidia-smi's name and driver). Asserts nothing: the numbers go to docs/validation.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpumon import safewrite  # noqa: E402
from gpumon.analysis.predict import predict  # noqa: E402
from gpumon.analysis.predict_phase import PARTNER_SPEC  # noqa: E402
from gpumon.core.records.rates import verdict  # noqa: E402
from gpumon.core.store import calibration  # noqa: E402
from gpumon.core.store.trace import load_run  # noqa: E402
from gpumon.errors import UsageError  # noqa: E402

JOBS = "h2d,gemm,fcn,resnet50"  # q4_contention's: every pair time-sliced
MPS_PAIRS = (
    "fcn+resnet50,h2d+fcn,resnet50+resnet50,gemm+fcn"  # under MPS (the device time is short)
)


def gpumon(args: list[str], log: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The real CLI, its output logged."""
    done = subprocess.run(
        [sys.executable, "-m", "gpumon", *args], capture_output=True, text=True, env=env
    )
    safewrite.write_text(
        log, f"$ gpumon {' '.join(args)}\n{done.stdout}\n{done.stderr}", replace=True
    )
    return done


def newest(runs: Path, before: set[Path]) -> Path:
    (run,) = set(runs.iterdir()) - before
    return run


def capture(args: list[str], runs: Path, log: Path, env: dict[str, str]) -> Path | None:
    before = set(runs.iterdir()) if runs.exists() else set()
    done = gpumon(["run", *args, "--headless", "--out", str(runs)], log, env)
    return newest(runs, before) if done.returncode == 0 else None


def store_partner_rate(gpu: str, run: Path) -> float:
    """The partner's steps per second alone, into this GPU's calibration (details.partner_rate)."""
    from gpumon.analysis.predict import read_jobs

    rate = read_jobs([load_run(run)])[0][0].rate
    stored = calibration.load(gpu)
    if stored is not None:
        details = {**stored.details, "partner_rate": rate}
        calibration.save(dataclasses.replace(stored, details=details))
    return rate


def score_pair(
    solos: tuple[Path, Path],
    phases: tuple[Path, Path],
    shared: Path,
    share: str,
    log: Path,
    env: dict,
) -> dict | None:
    """Measured r (`gpumon compare` of the pair against the jobs' plain solo runs) beside predict's from the
    jobs' phase runs."""
    exclusive = [x for s in dict.fromkeys(solos) for x in ("--exclusive", str(s))]
    done = gpumon(["compare", *exclusive, "--shared", str(shared), "--json"], log, env)
    if done.returncode != 0:
        return None
    measured = json.loads(done.stdout)
    r = [measured["workloads"][s]["slowdown"]["estimate"] for s in ("A", "B")]
    a, b = phases
    runs = [load_run(a)] + ([] if a == b else [load_run(b)])
    assign = {} if a == b else {str(runs[0].path): "A", str(runs[1].path): "B"}
    try:
        (p,) = predict(runs, share, assign)
    except UsageError as exc:
        print(f"predict: {exc}", flush=True)
        return None
    return {"measured": r, "stp": sum(1 / x for x in r), "predicted": p.to_dict()}


def report(rows: list[dict], device: str) -> str:
    lines = [f"# issue 42 on a lent GPU: {device}", ""]
    for share in ("timeslice", "mps"):
        mine = [r for r in rows if r["share"] == share]
        if not mine:
            continue
        pred = [r["predicted"]["workloads"][s]["slowdown"] for r in mine for s in ("A", "B")]
        meas = [m for r in mine for m in r["measured"]]
        mape = 100 * sum(abs(p["estimate"] - m) / m for p, m in zip(pred, meas)) / len(meas)
        naive = 100 * sum(abs(1 - m) / m for m in meas) / len(meas)
        inside = sum(p["low"] <= m <= p["high"] for p, m in zip(pred, meas))
        wrong = sum(
            (r["predicted"]["pair"]["verdict"] == "pays" and r["stp"] < 0.95)
            or (r["predicted"]["pair"]["verdict"] == "loses" and r["stp"] > 1.05)
            for r in mine
        )
        low = min(p["low"] for p in pred)
        lines.append(
            f"- {share}: {len(mine)} pairs, MAPE of r {mape:.1f} % (r = 1: {naive:.1f} %), r inside "
            f"{inside}/{len(meas)}, lowest low bound {low:.2f}, wrong verdicts {wrong}"
        )
    lines += [
        "",
        "| pair | share | measured r | predicted r [interval] | verdict |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        w = r["predicted"]["workloads"]
        lines.append(
            f"| {r['label']} | {r['share']} | {r['measured'][0]:.2f}, {r['measured'][1]:.2f} | "
            + ", ".join(
                f"{w[s]['slowdown']['estimate']:.2f} [{w[s]['slowdown']['low']:.2f}, {w[s]['slowdown']['high']:.2f}]"
                for s in ("A", "B")
            )
            + f" | {r['predicted']['pair']['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def measure_share(
    share: str, jobs: list[str], args: argparse.Namespace, out: Path, env: dict[str, str]
) -> list[dict]:
    """One share mode: each job's phase and plain solo runs, the pairs, each pair scored."""
    logs, common = out / "logs", ["--device", args.device]
    rows = []
    phased, solo = {}, {}
    for job in jobs:
        name = job.split(":")[0]
        phased[job] = capture(
            [job, "--partner-phase", str(args.phase), "--duration", str(args.seconds + args.phase),
             "--share", share, *common],
            out / "runs", logs / f"phase-{share}-{name}.log", env,
        )  # fmt: skip
        solo[job] = capture(
            [job, "--duration", str(args.seconds), "--share", share, *common],
            out / "runs", logs / f"solo-{share}-{name}.log", env,
        )  # fmt: skip
    pairs = list(itertools.combinations_with_replacement(jobs, 2))
    if share == "mps":
        wanted = set(args.mps_pairs.split(","))
        pairs = [p for p in pairs if f"{p[0].split(':')[0]}+{p[1].split(':')[0]}" in wanted]
    for a, b in pairs:
        label = f"{a.split(':')[0]}+{b.split(':')[0]}"
        shared = capture(
            [a, b, "--duration", str(args.seconds), "--share", share, *common],
            out / "runs", logs / f"pair-{share}-{label}.log", env,
        )  # fmt: skip
        sa, sb, pa, pb = solo[a], solo[b], phased[a], phased[b]
        if shared is None or sa is None or sb is None or pa is None or pb is None:
            continue
        log = logs / f"compare-{share}-{label}.log"
        row = score_pair((sa, sb), (pa, pb), shared, share, log, env)
        if row is not None:
            rows.append({"label": label, "share": share, **row})
            print(f"{share} {label}: measured {row['measured']}", flush=True)
    return rows


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--jobs", default=JOBS, help=f"built-in jobs (default {JOBS})")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--seconds", type=float, default=10.0, help="each solo part and each pair")
    parser.add_argument("--phase", type=float, default=6.0, help="each beside-partner phase")
    parser.add_argument("--no-mps", action="store_true")
    parser.add_argument(
        "--mps-pairs", default=MPS_PAIRS, help=f"pairs measured under MPS ({MPS_PAIRS})"
    )
    return parser


def main() -> int:
    args = arguments().parse_args()
    out = args.out.resolve()
    safewrite.ensure_folder(out / "logs")
    env = {
        **os.environ,
        calibration.ENV: str(out / "calibration"),
        "GPUMON_RUNS": str(out / "runs"),
    }
    os.environ[calibration.ENV] = env[calibration.ENV]
    began = time.monotonic()
    logs = out / "logs"
    if args.device != "cpu":
        cal = gpumon(
            ["calibrate", "--json"] + (["--no-mps"] if args.no_mps else []),
            logs / "calibrate.log",
            env,
        )
        print(f"calibrate: exit {cal.returncode}", flush=True)
    shares = ["timeslice"] + ([] if args.no_mps or args.device == "cpu" else ["mps"])
    jobs = [f"{j}:preset={args.preset}" for j in args.jobs.split(",")]
    common = ["--device", args.device]
    partner = capture(
        [f"{PARTNER_SPEC}:preset={args.preset}", "--duration", str(args.seconds), *common],
        out / "runs",
        logs / "partner.log",
        env,
    )
    if partner is not None and args.device != "cpu":
        gpu = load_run(partner).gpu
        name = (gpu.name if gpu is not None else None) or ""
        print(
            f"partner alone: {store_partner_rate(name, partner):.2f} it/s",
            flush=True,
        )
    rows = [row for share in shares for row in measure_share(share, jobs, args, out, env)]
    device = "cpu"
    if args.device != "cpu":
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        device = smi.stdout.strip() or "unknown GPU"
    safewrite.write_text(out / "score.md", report(rows, device), replace=True)
    safewrite.write_text(out / "score.json", json.dumps(rows, indent=1), replace=True)
    print(report(rows, device))
    print(
        f"{time.monotonic() - began:.0f} s; verdict() of the measured STP: {[verdict(r['stp'], r['stp']) for r in rows]}"
    )
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
