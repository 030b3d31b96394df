"""How well ``gpumon predict`` foretells measured slowdowns: leave-one-pair-out and leave-one-workload-out.

Reads the H100 experiments (default ``../shared/h100/experiments`` beside the repo: q4_contention.tgz,
modes.tgz), extracts them to a temporary directory, reads every exclusive run through
``gpumon.analysis.predict`` (the same readers ``gpumon predict`` uses) and takes each pair's measured r
from the experiment's slowdown_matrix.csv (``gpumon compare``'s figures). For each held-out pair it refits
the model's constants on the other pairs (LOPO), or on the pairs without either of its workloads
(LOWO; the shipped constants when nothing is left), by a grid search minimising the MAPE of r, then
predicts the held-out pair. Prints MAPE of r and STP, the verdict agreement, the coverage of the
printed intervals, and naive baselines, per sharing mode, and a table per pair. Asserts nothing.

    python benchmarks/predict_accuracy.py [--data DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpumon.analysis.predict import intervals, read_jobs  # noqa: E402
from gpumon.analysis.predict_model import CONSTANTS, MPS, TIMESLICE, Constants, Solo, predict_pair  # noqa: E402
from gpumon.core.records.rates import stp, verdict  # noqa: E402
from gpumon.core.store.trace import load_run  # noqa: E402

ARCHIVES = ("q4_contention.tgz", "modes.tgz")
EXPERIMENTS = {"q4": TIMESLICE, "exp": TIMESLICE, "expmps": MPS}
GRID = {
    TIMESLICE: [{"slice_s": t * 1e-3, "switch_s": s * 1e-3} for t in (1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 8)
                for s in (0, 0.1, 0.2, 0.3, 0.4, 0.6)],
    MPS: [{"sm_fill": g / 100} for g in range(50, 101, 2)],
}


@dataclasses.dataclass(frozen=True)
class Pair:
    """One measured pair: its experiment, mode, the two workloads' solo profiles and measured r."""

    experiment: str
    mode: str
    names: tuple[str, str]
    solos: tuple[Solo, Solo]
    measured: tuple[float, float]

    @property
    def label(self) -> str:
        return f"{self.experiment}:{self.names[0]}+{self.names[1]}"


def load(root: Path) -> list[Pair]:
    pairs = []
    for experiment, mode in EXPERIMENTS.items():
        folder = root / experiment
        solos: dict[str, Solo] = {}
        for run in sorted((folder / "runs").glob("*-x-*")):
            name = run.name.split("-x-")[1].rsplit("-r", 1)[0]
            jobs, _ = read_jobs([load_run(run)])
            solos[name] = jobs[0].solo
        rows = list(csv.DictReader(open(folder / "slowdown_matrix.csv")))
        for a, b in zip(rows[::2], rows[1::2]):
            pairs.append(Pair(experiment, mode, (a["job"], b["job"]), (solos[a["job"]], solos[b["job"]]),
                              (float(a["slowdown"]), float(b["slowdown"]))))
    return pairs


def mape(pred: list[float], meas: list[float]) -> float:
    return 100 * sum(abs(p - m) / m for p, m in zip(pred, meas)) / len(meas)


def fit(train: list[Pair], mode: str) -> Constants:
    """The grid point with the smallest MAPE of r on ``train`` (the shipped constants when it is empty)."""
    if not train:
        return CONSTANTS
    best, best_err = CONSTANTS, math.inf
    for point in GRID[mode]:
        c = dataclasses.replace(CONSTANTS, **point)
        err = mape([r for p in train for r in predict_pair(*p.solos, mode, c).slowdown],
                   [m for p in train for m in p.measured])
        if err < best_err:
            best, best_err = c, err
    return best


def naive(pair: Pair) -> dict[str, tuple[float, float]]:
    a, b = pair.solos
    partner = {"r = 1 + partner util": (1 + b.busy, 1 + a.busy)}
    return {"r = 1": (1.0, 1.0), **partner} if pair.mode == MPS else {"r = 2": (2.0, 2.0), **partner}


def score(pairs: list[Pair], scheme: str) -> list[dict]:
    """Each pair predicted with constants fitted on the others (LOPO) or on those sharing no workload (LOWO), with the
    intervals and verdict ``gpumon predict`` prints (its ``intervals``, the shipped errors E)."""
    rows = []
    for p in pairs:
        same_mode = [q for q in pairs if q.mode == p.mode and q is not p]
        if scheme == "LOWO":
            same_mode = [q for q in same_mode if not set(q.names) & set(p.names)]
        c = fit(same_mode, p.mode)
        pred = predict_pair(*p.solos, p.mode, c)
        r, pair = intervals([pred], p.mode)
        rows.append({"pair": p, "pred": pred.slowdown, "stp": pred.stp,
                     "covered": [e.low <= m <= e.high for e, m in zip(r, p.measured)],
                     "stp_covered": pair.low <= stp(p.measured) <= pair.high,
                     "verdict": verdict(pair.low, pair.high), "point": verdict(pred.stp, pred.stp),
                     "naive": naive(p)})
    return rows


def e95(errors: list[float]) -> float:
    """The smallest E that at least 95 % of the relative errors fall within."""
    ranked = sorted(errors)
    return ranked[max(0, math.ceil(0.95 * len(ranked)) - 1)]


def summary(rows: list[dict], mode: str, scheme: str) -> list[str]:
    rows = [r for r in rows if r["pair"].mode == mode]
    meas = [m for r in rows for m in r["pair"].measured]
    meas_stp = [stp(r["pair"].measured) for r in rows]
    clear = [r for r, s in zip(rows, meas_stp) if not 0.9 <= s <= 1.1]
    truth = [verdict(s, s) for s in meas_stp if not 0.9 <= s <= 1.1]
    out = [f"| {scheme} | {mode} | model | {mape([x for r in rows for x in r['pred']], meas):.1f} | "
           f"{mape([r['stp'] for r in rows], meas_stp):.1f} | "
           f"{sum(r['point'] == t for r, t in zip(clear, truth))}/{len(clear)} point, "
           f"{sum(r['verdict'] == t for r, t in zip(clear, truth))}/{len(clear)} interval | "
           f"{sum(c for r in rows for c in r['covered'])}/{len(meas)} | "
           f"{sum(r['stp_covered'] for r in rows)}/{len(rows)} |"]
    for name in rows[0]["naive"]:
        pred = [x for r in rows for x in r["naive"][name]]
        stps = [stp(r["naive"][name]) for r in rows]
        ok = sum(verdict(s, s) == t for s, t, m in zip(stps, [verdict(s, s) for s in meas_stp], meas_stp)
                 if not 0.9 <= m <= 1.1)
        out.append(f"| {scheme} | {mode} | naive {name} | {mape(pred, meas):.1f} | {mape(stps, meas_stp):.1f} | "
                   f"{ok}/{len(clear)} point | | |")
    return out


def errors(rows: list[dict], mode: str) -> str:
    """The leave-out errors |measured / predicted - 1| of r and STP behind the shipped E (the printed intervals)."""
    rows = [r for r in rows if r["pair"].mode == mode]
    r_err = [abs(m / x - 1) for r in rows for m, x in zip(r["pair"].measured, r["pred"])]
    s_err = [abs(stp(r["pair"].measured) / r["stp"] - 1) for r in rows]
    fmt = lambda xs: ", ".join(f"{100 * x:.1f}" for x in sorted(xs, reverse=True))  # noqa: E731
    return (f"{mode}: E_r (95 %) {100 * e95(r_err):.1f} % (shipped {100 * CONSTANTS.r_error(mode):.0f} %), "
            f"E_STP (95 %) {100 * e95(s_err):.1f} % (shipped {100 * CONSTANTS.stp_error(mode):.0f} %); "
            f"r errors % {fmt(r_err)}; STP errors % {fmt(s_err)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "h100" / "experiments")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in ARCHIVES:
            with tarfile.open(args.data / name) as tar:
                tar.extractall(tmp, filter="data")
        pairs = load(Path(tmp))
    for mode in (TIMESLICE, MPS):
        best = fit([p for p in pairs if p.mode == mode], mode)
        print(f"{mode}: fitted on every pair: " + ", ".join(f"{k} {getattr(best, k):g}" for k in GRID[mode][0]))
    print("\n| scheme | mode | predictor | MAPE r % | MAPE STP % | verdict (measured STP outside [0.9, 1.1]) "
          "| measured r inside interval | measured STP inside interval |")
    print("|---|---|---|---|---|---|---|---|")
    results = {scheme: score(pairs, scheme) for scheme in ("LOPO", "LOWO")}
    for scheme, rows in results.items():
        for mode in (TIMESLICE, MPS):
            print("\n".join(summary(rows, mode, scheme)))
    print("\nLOWO leave-out errors:")
    for mode in (TIMESLICE, MPS):
        print(errors(results["LOWO"], mode))
    pooled = [abs(stp(r["pair"].measured) / r["stp"] - 1) for r in results["LOWO"]]
    print(f"both modes: E_STP (95 %) {100 * e95(pooled):.1f} % over {len(pooled)} pairs")
    print("\nPer pair (predicted: LOPO / LOWO; verdict: what predict prints with the LOWO prediction):\n")
    print("| pair | mode | measured r A, B | predicted r A, B (LOPO) | predicted r A, B (LOWO) | measured STP "
          "| predicted STP (LOPO / LOWO) | verdict measured | verdict predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lopo, lowo in zip(results["LOPO"], results["LOWO"]):
        p = lopo["pair"]
        measured = stp(p.measured)
        truth = verdict(measured, measured) if not 0.9 <= measured <= 1.1 else "(near 1)"
        print(f"| {p.label} | {p.mode} | {p.measured[0]:.2f}, {p.measured[1]:.2f} | {lopo['pred'][0]:.2f}, "
              f"{lopo['pred'][1]:.2f} | {lowo['pred'][0]:.2f}, {lowo['pred'][1]:.2f} | {measured:.2f} | "
              f"{lopo['stp']:.2f} / {lowo['stp']:.2f} | {truth} | {lowo['verdict']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
