"""How well ``gpumon predict`` foretells measured slowdowns on every dataset we have, out of sample.

Datasets (each read through ``gpumon.analysis.predict``, the readers ``gpumon predict`` uses):

  h100-ts    one NVIDIA H100 80GB HBM3 (SXM, driver 580.159.04), time slicing: q4_contention.tgz (h2d, gemm, fcn,
             resnet50, every pair) and modes.tgz exp/ (fcn+vgg19, vgg19+vgg19, resnet50+resnet50), 13 pairs;
             measured r from each experiment's slowdown_matrix.csv (``gpumon compare``'s figures)
  h100-mps   the same H100 under MPS: modes.tgz expmps/, 3 pairs, each job against its own MPS exclusive run
  lucid      Lucid's calibration share (ASPLOS'23, S-Lab License 1.0, non-commercial; read from ../shared/lucid,
             never copied): 181 time-sliced pairs of ResNet18, MobileNetV2, DCGAN and NeuMF configurations on a
             GPU Lucid does not name, its solo figures made gpumon exclusive runs by its own lucid_runs.py

Schemes (constants refitted on each fold's training pairs by a grid search minimising the MAPE of r):

  LOPO  leave one pair out: fitted on the dataset's other pairs
  LOFO  leave one family out: fitted on the dataset's pairs that share no family with the held-out pair (a family:
        a workload on the H100, leave-one-workload-out; a model on Lucid's GPU, its batch sizes and AMP settings
        together); its intervals are a calibrated GPU's
  LODO  leave one dataset out: the constants of the other GPU's dataset of the mode (time slicing only: one MPS
        dataset); its intervals are an uncalibrated GPU's

Beside naive baselines: r = 1, r = 2, r = 1 + the partner's solo GPU utilisation. Prints, per dataset, scheme and
predictor: MAPE of r and STP, Spearman's rho of STP, how often the measured r and STP lay inside the printed 95 %
intervals, and the verdict confusion (measured STP > 1.05 "pays", < 0.95 "loses", else "near 1", against the verdict
printed); then the out-of-sample errors behind ``predict_model.ERRORS`` and the per-pair tables. Asserts nothing.

    python benchmarks/predict_accuracy.py [--h100 ../shared/h100/experiments] [--lucid ../shared/lucid]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
SHARED = next(
    (p for p in (REPO.parent / "shared", REPO.parents[1] / "shared") if p.is_dir()),
    REPO.parent / "shared",
)
PROBED = (
    REPO / "docs" / "validation-h100-2026-11-26" / "calibration"
)  # gpumon calibrate on the H100, 2026-11-26
PARTNER = "gemm"  # the standard GPU-bound partner the beside-partner phase is emulated with

from gpumon.analysis.predict import Job, intervals, lacking, read_jobs  # noqa: E402
from gpumon.analysis.predict_fit import GRID, Measured, fit  # noqa: E402
from gpumon.analysis.predict_fit import mape as mape_of  # noqa: E402
from gpumon.analysis.predict_model import (  # noqa: E402
    DEFAULT,
    ERRORS,
    MPS,
    TIMESLICE,
    UNCALIBRATED,
    Constants,
    PairPrediction,
    predict_pair,
)
from gpumon.analysis.predict_phase import Phase, with_phase  # noqa: E402
from predict_folds import Scored, nested  # noqa: E402
from gpumon.core.records.rates import stp, verdict  # noqa: E402
from gpumon.core.store import calibration  # noqa: E402
from gpumon.core.store.trace import load_run  # noqa: E402

H100_DEVICE = "NVIDIA H100 80GB HBM3 (SXM, PCIe Gen5 x16), driver 580.159.04, 2026-11-23"
LUCID_DEVICE = "Lucid's testbed GPU (not named by Lucid; at least ~21 GB), nvidia-smi at 5 Hz, 30 s single runs"
H100_GPU = "NVIDIA H100 80GB HBM3"  # run.json's gpu.name: the model `gpumon calibrate` files its constants under
H100_EXPERIMENTS = {"q4": TIMESLICE, "exp": TIMESLICE, "expmps": MPS}
NEAR = (0.95, 1.05)  # measured STP inside: "near 1" (no verdict is wrong there)
MAX_FAMILIES = 4  # the H100's workloads, Lucid's models


@dataclasses.dataclass(frozen=True)
class Pair:
    """One measured pair: its dataset, the two jobs (solo profiles and what their runs hold), measured r."""

    dataset: str
    mode: str
    names: tuple[str, str]
    families: frozenset[str]
    jobs: tuple[Job, Job]
    measured: tuple[float, float]

    @property
    def label(self) -> str:
        return f"{self.names[0]}+{self.names[1]}"

    @property
    def measured_stp(self) -> float:
        return stp(self.measured)


def load_h100(root: Path) -> list[Pair]:
    pairs = []
    for experiment, mode in H100_EXPERIMENTS.items():
        folder = root / experiment
        jobs: dict[str, Job] = {}
        for run in sorted((folder / "runs").glob("*-x-*")):
            name = run.name.split("-x-")[1].rsplit("-r", 1)[0]
            jobs[name] = read_jobs([load_run(run)])[0][0]
        rows = list(csv.DictReader(open(folder / "slowdown_matrix.csv")))
        for a, b in zip(rows[::2], rows[1::2]):
            names = (a["job"], b["job"])
            pairs.append(
                Pair(
                    "h100-mps" if mode == MPS else "h100-ts",
                    mode,
                    (f"{experiment}:{names[0]}", names[1]),
                    frozenset(names),
                    (jobs[names[0]], jobs[names[1]]),
                    (float(a["slowdown"]), float(b["slowdown"])),
                )
            )
    return pairs


def load_lucid(share: Path, tmp: Path) -> list[Pair]:
    """Lucid's pairs, through its own lucid_runs.py (run here, into a temporary directory)."""
    subprocess.run(
        [
            sys.executable,
            str(share / "lucid_runs.py"),
            str(share / "single_data-calibration.csv"),
            str(share / "colocate_info-calibration.csv"),
            str(tmp),
        ],
        check=True,
        capture_output=True,
    )
    jobs: dict[str, Job] = {}
    pairs = []
    for row in csv.DictReader(open(tmp / "pairs.csv")):
        for name, run in ((row["a"], row["run_a"]), (row["b"], row["run_b"])):
            if name not in jobs:
                jobs[name] = read_jobs([load_run(run)])[0][0]
        families = frozenset(n.split("-")[0] for n in (row["a"], row["b"]))
        pairs.append(
            Pair(
                "lucid",
                TIMESLICE,
                (row["a"], row["b"]),
                families,
                (jobs[row["a"]], jobs[row["b"]]),
                (float(row["r_a"]), float(row["r_b"])),
            )
        )
    return pairs


def mape(pred: list[float], meas: list[float]) -> float:
    return 100 * sum(abs(p - m) / m for p, m in zip(pred, meas)) / len(meas) if meas else math.nan


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation (ties: mean ranks)."""

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        out = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))


def predicted(pair: Pair, c: Constants) -> PairPrediction:
    return predict_pair(pair.jobs[0].solo, pair.jobs[1].solo, pair.mode, c)


class Fitter:
    """``predict_fit.fit`` on training sets of pairs, each set fitted once."""

    def __init__(self, pairs: list[Pair], base: dict[str, Constants]) -> None:
        self.pairs = pairs
        self.base = base  # per dataset: the constants a mode's fit starts from (MPS: the GPU's time-slicing fit)

    @lru_cache(maxsize=None)  # noqa: B019 - one Fits per benchmark run: the cache is the point, and dies with it
    def fit(self, train: frozenset[int], mode: str, dataset: str) -> Constants:
        """The constants that predict the pairs ``train`` (indices into ``pairs``) best."""
        chosen = [self.pairs[i] for i in sorted(train)]
        measured = [Measured(p.jobs[0].solo, p.jobs[1].solo, p.measured) for p in chosen]
        return fit(measured, mode, self.base.get(dataset, DEFAULT))[0]


def score(pairs: list[Pair], fitter: Fitter, scheme: str, dataset: str) -> list[dict]:
    """Each pair of ``dataset`` predicted under ``scheme``, with the intervals and verdict ``gpumon predict`` prints."""
    rows = []
    mine = [i for i, p in enumerate(pairs) if p.dataset == dataset]
    for i in mine:
        p = pairs[i]
        if scheme == "LODO":
            others = frozenset(
                j for j, q in enumerate(pairs) if q.mode == p.mode and q.dataset != dataset
            )
            if not others:
                return []
            other = pairs[next(iter(others))].dataset
            c = fitter.fit(others, p.mode, other)
            if p.mode == TIMESLICE:
                c = dataclasses.replace(c, sm_fill=fitter.base.get(dataset, DEFAULT).sm_fill)
        else:
            train = frozenset(
                j
                for j in mine
                if j != i and (scheme == "LOPO" or not pairs[j].families & p.families)
            )
            c = fitter.fit(train, p.mode, dataset)
        rows.append(judge(p, c, calibrated=scheme != "LODO"))
    return rows


def judge(p: Pair, c: Constants, calibrated: bool, probed: bool = False) -> dict:
    pred = predicted(p, c)
    widen, _ = lacking(p.jobs, p.mode, calibrated, c, probed)
    r, pair = intervals([pred], p.mode, (0.0, 0.0), widen)
    return {
        "pair": p,
        "pred": pred.slowdown,
        "stp": pred.stp,
        "c": c,
        "covered": [e.low <= m <= e.high for e, m in zip(r, p.measured)],
        "stp_covered": pair.low <= p.measured_stp <= pair.high,
        "verdict": verdict(pair.low, pair.high),
    }


def naive(p: Pair) -> dict[str, tuple[float, float]]:
    a, b = (j.solo for j in p.jobs)
    return {
        "r = 1": (1.0, 1.0),
        "r = 2": (2.0, 2.0),
        "r = 1 + partner util": (1 + b.busy, 1 + a.busy),
    }


def truth(measured_stp: float) -> str:
    return "loses" if measured_stp < NEAR[0] else "pays" if measured_stp > NEAR[1] else "near 1"


def confusion(stps: list[float], verdicts: list[str]) -> str:
    """measured class -> printed verdicts, e.g. pays: 40 pays / 3 cannot tell; the wrong ones in bold."""
    out = []
    for cls in ("pays", "near 1", "loses"):
        got = [v for s, v in zip(stps, verdicts) if truth(s) == cls]
        if not got:
            continue
        counts = ", ".join(
            f"{'**' if _wrong(cls, v) else ''}{got.count(v)} {v}{'**' if _wrong(cls, v) else ''}"
            for v in ("pays", "cannot tell", "loses")
            if got.count(v)
        )
        out.append(f"{cls} ({len(got)}): {counts}")
    return "; ".join(out)


def _wrong(measured: str, printed: str) -> bool:
    return (measured == "loses" and printed == "pays") or (
        measured == "pays" and printed == "loses"
    )


def summary(rows: list[dict], scheme: str) -> list[str]:
    p0 = rows[0]["pair"]
    meas = [m for r in rows for m in r["pair"].measured]
    meas_stp = [r["pair"].measured_stp for r in rows]
    pred = [x for r in rows for x in r["pred"]]
    stps = [r["stp"] for r in rows]
    out = [
        f"| {p0.dataset} | {scheme} | model | {mape(pred, meas):.1f} | {mape(stps, meas_stp):.1f} | "
        f"{spearman(stps, meas_stp):.2f} | {sum(c for r in rows for c in r['covered'])}/{len(meas)} "
        f"({100 * sum(c for r in rows for c in r['covered']) / len(meas):.0f} %) | "
        f"{sum(r['stp_covered'] for r in rows)}/{len(rows)} ({100 * sum(r['stp_covered'] for r in rows) / len(rows):.0f} %) | "
        f"{confusion(meas_stp, [r['verdict'] for r in rows])} |"
    ]
    return out


def baselines(rows: list[dict]) -> list[str]:
    p0 = rows[0]["pair"]
    meas = [m for r in rows for m in r["pair"].measured]
    meas_stp = [r["pair"].measured_stp for r in rows]
    out = []
    for name in naive(p0):
        pred = [x for r in rows for x in naive(r["pair"])[name]]
        stps = [stp(naive(r["pair"])[name]) for r in rows]
        rho = spearman(stps, meas_stp) if len(set(stps)) > 1 else math.nan
        out.append(
            f"| {p0.dataset} | any | naive {name} | {mape(pred, meas):.1f} | {mape(stps, meas_stp):.1f} | "
            f"{'–' if math.isnan(rho) else f'{rho:.2f}'} | | | {confusion(meas_stp, [verdict(s, s) for s in stps])} "
            "(point) |"
        )
    return out


def e95(errors: list[float]) -> float:
    """The smallest E that at least 95 % of the relative errors fall within."""
    ranked = sorted(errors)
    return ranked[max(0, math.ceil(0.95 * len(ranked)) - 1)] if ranked else math.nan


def rel_errors(rows: list[dict]) -> tuple[list[float], list[float]]:
    """|log(measured / predicted)| of r and of STP (the intervals are log space)."""
    return (
        [abs(math.log(m / x)) for r in rows for m, x in zip(r["pair"].measured, r["pred"])],
        [abs(math.log(r["pair"].measured_stp / r["stp"])) for r in rows],
    )


def coverage_with(rows: list[dict], e_r: float, e_stp: float) -> str:
    """Coverage of r and STP had the intervals been +-e_r, +-e_stp, nothing added for missing inputs."""
    r_in = s_in = n = 0
    for r in rows:
        for m, x in zip(r["pair"].measured, r["pred"]):
            r_in += abs(math.log(m / x)) <= e_r
            n += 1
        s_in += abs(math.log(r["pair"].measured_stp / r["stp"])) <= e_stp
    return f"r {r_in}/{n} ({100 * r_in / n:.0f} %), STP {s_in}/{len(rows)} ({100 * s_in / len(rows):.0f} %)"


def flagged(pairs: list[Pair], dataset: str) -> dict[int, str]:
    """The data check stated in docs/predict.md before scoring with it: pairs that contradict their own solo runs
    (a job's measured r below 0.95, or a job that is a suspect solo block: r below 1 in more than half its pairs)."""
    mine = [i for i, p in enumerate(pairs) if p.dataset == dataset]
    below: dict[str, list[bool]] = {}
    for i in mine:
        for name, r in zip(pairs[i].names, pairs[i].measured):
            below.setdefault(name.split(":")[-1], []).append(r < 1)
    suspect = {n for n, b in below.items() if sum(b) > len(b) / 2}
    out = {}
    for i in mine:
        p = pairs[i]
        names = [n.split(":")[-1] for n in p.names]
        if min(p.measured) < 0.95:
            out[i] = "a job's r < 0.95"
        elif suspect & set(names):
            out[i] = "a suspect solo block"
    return out


def emulated_phases(pairs: list[Pair], c: Constants) -> dict[str, Phase]:
    """Each H100 workload's beside-partner phase, emulated from its q4 pair with the partner (gemm): its step beside
    gemm and gemm's rates alone and beside it, as ``gpumon run JOB --partner-phase`` would measure them."""
    phases = {}
    for p in pairs:
        if p.dataset != "h100-ts" or not p.names[0].startswith("q4:") or PARTNER not in p.families:
            continue
        names = [n.split(":")[-1] for n in p.names]
        x = 1 if names[0] == PARTNER else 0  # the job (gemm + gemm: either)
        job, partner = p.jobs[x].solo, p.jobs[1 - x].solo
        phases[names[x]] = Phase(
            p.measured[x] * job.step_s,
            1 / partner.step_s,
            1 / (p.measured[1 - x] * partner.step_s),
        )
    return phases


def fixed(pairs: list[Pair], c: Constants, phases: dict[str, Phase] | None = None):
    """A predictor that fits nothing: constants ``c`` (and the jobs' phases, where given) for every fold."""

    def solo(p: Pair, k: int):
        s = p.jobs[k].solo
        return with_phase(s, (phases or {}).get(p.names[k].split(":")[-1]), c) if phases else s

    def predictor(train: frozenset[int]):
        return lambda i: (
            predict_pair(solo(pairs[i], 0), solo(pairs[i], 1), pairs[i].mode, c).slowdown
        )

    return predictor


def fitted(pairs: list[Pair], fitter: Fitter, mode: str, dataset: str):
    """A predictor whose constants are fitted on each fold's training pairs (as ``--from-pairs`` fits them)."""

    def predictor(train: frozenset[int]):
        c = fitter.fit(train, mode, dataset)
        return lambda i: predicted(pairs[i], c).slowdown

    return predictor


def default_for_any_gpu(pairs: list[Pair]):
    """A predictor whose constants are chosen as ``predict_model.UNCALIBRATED`` was, on each fold's training pairs
    and the H100's: the grid point (two turns a step) with the best worse ratio of its MAPE of r to r = 1's over the
    two datasets (nested: the held-out family's pairs never choose it)."""
    h100 = [
        Measured(p.jobs[0].solo, p.jobs[1].solo, p.measured)
        for p in pairs
        if p.dataset == "h100-ts"
    ]

    def ratio(measured: list[Measured], c: Constants) -> float:
        naive = sum(abs(1 - m) / m for x in measured for m in x.r) / (2 * len(measured))
        return mape_of(measured, TIMESLICE, c) / (100 * naive)

    @lru_cache(maxsize=None)
    def choose(train: frozenset[int]) -> Constants:
        own = [
            Measured(pairs[i].jobs[0].solo, pairs[i].jobs[1].solo, pairs[i].measured) for i in train
        ]
        return min(
            (dataclasses.replace(UNCALIBRATED, **point) for point in GRID[TIMESLICE]),
            key=lambda c: max(ratio(own, c), ratio(h100, c)),
        )

    def predictor(train: frozenset[int]):
        c = choose(train)
        return lambda i: predicted(pairs[i], c).slowdown

    return predictor


def oof_row(label: str, pairs: list[Pair], rows: list[Scored], device: str) -> str:
    """One line of the out-of-fold table."""
    meas = [m for r in rows for m in pairs[r.index].measured]
    pred = [x for r in rows for x in r.pred]
    inside = sum(
        lo <= m <= hi for r in rows for lo, m, hi in zip(r.r_low, pairs[r.index].measured, r.r_high)
    )
    stp_in = sum(r.stp_low <= pairs[r.index].measured_stp <= r.stp_high for r in rows)
    stps = [pairs[r.index].measured_stp for r in rows]
    wrong = sum(
        (v == "pays" and s < NEAR[0]) or (v == "loses" and s > NEAR[1])
        for v, s in zip((r.verdict for r in rows), stps)
    )
    low = min(min(r.r_low) for r in rows)
    widths = sorted({round(100 * r.width[0]) for r in rows})
    return (
        f"| {label} | {device} | {len(rows)} | {mape(pred, meas):.1f} | {mape([1.0] * len(meas), meas):.1f} | "
        f"{inside}/{len(meas)} ({100 * inside / len(meas):.0f} %) | {stp_in}/{len(rows)} "
        f"({100 * stp_in / len(rows):.0f} %) | {low:.2f} | {widths[0]}-{widths[-1]} | "
        f"{confusion(stps, [r.verdict for r in rows])} | {wrong} |"
    )


@dataclasses.dataclass(frozen=True)
class Setting:
    """One row of the out-of-fold table: what is scored, on which pairs, and the pairs its folds may train on."""

    label: str
    device: str
    indices: list[int]
    predictor: Any
    pool: list[int] | None = None
    fits: bool = True  # False: the predictor fits nothing on pairs (its widths need no inner folds)


H100_TS, H100_MPS, LUCID_GPU = "H100 80GB HBM3", "H100 80GB HBM3 (MPS)", "Lucid testbed GPU"


def oof_settings(
    pairs: list[Pair], fitter: Fitter, probed: Constants | None, flags: dict[int, str]
) -> list[Setting]:
    """Every setting of issue 42's table (the probe rows only where the H100's calibration is given)."""

    def idx(dataset: str, keep=lambda p: True) -> list[int]:
        return [i for i, p in enumerate(pairs) if p.dataset == dataset and keep(p)]

    h100, mps, lucid = idx("h100-ts"), idx("h100-mps"), idx("lucid")
    clean = [i for i in lucid if i not in flags]
    out = [
        Setting("H100 time slicing, constants fitted on the other workloads' pairs (LOWO)", H100_TS, h100,
                fitted(pairs, fitter, TIMESLICE, "h100-ts")),
    ]  # fmt: skip
    if probed is not None:
        beside = idx("h100-ts", lambda p: PARTNER not in p.families)
        out += [
            Setting("H100 time slicing, probe constants only, solo captures as recorded (turns from each step's "
                    "structure)", H100_TS, h100, fixed(pairs, probed), fits=False),
            Setting(f"H100 time slicing, probe constants + each job's phase beside {PARTNER} (emulated from its q4 "
                    f"pair; pairs with {PARTNER} left out: they are the phases), LOWO", H100_TS, beside,
                    fixed(pairs, probed, emulated_phases(pairs, probed)), fits=False),
            Setting("H100 MPS, probe gamma (nothing fitted)", H100_MPS, mps, fixed(pairs, probed), fits=False),
        ]  # fmt: skip
    return out + [
        Setting("H100 MPS, gamma fitted on the other workloads' pairs (LOWO)", H100_MPS, mps,
                fitted(pairs, fitter, MPS, "h100-mps")),
        Setting("Lucid, held out after --from-pairs on the other families (LOFO)", LUCID_GPU, lucid,
                fitted(pairs, fitter, TIMESLICE, "lucid")),
        Setting("Lucid, uncalibrated (predict_model.UNCALIBRATED)", LUCID_GPU, lucid, fixed(pairs, UNCALIBRATED)),
        Setting("Lucid, uncalibrated, the default itself chosen without the held-out family (nested)", LUCID_GPU,
                lucid, default_for_any_gpu(pairs)),
        Setting(f"Lucid without the {len(flags)} pairs the data check flags, --from-pairs (LOFO)", LUCID_GPU, clean,
                fitted(pairs, fitter, TIMESLICE, "lucid"), clean),
        Setting(f"Lucid without the {len(flags)} flagged pairs, uncalibrated", LUCID_GPU, clean,
                fixed(pairs, UNCALIBRATED), clean),
    ]  # fmt: skip


def out_of_fold(pairs: list[Pair], fitter: Fitter, probed: Constants | None) -> None:
    """The issue-42 table: every setting scored out of fold, widths included (benchmarks/predict_folds.py)."""
    print(
        "\nOut of fold (nested: constants and interval widths fitted on the other families' pairs, each pair scored"
        " once; intervals r*exp(+-E_r), STP*exp(+-E_STP)):\n"
    )
    print(
        "| setting | device | pairs | MAPE r % | r = 1 % | r inside | STP inside | lowest low bound | E_r % "
        "(per fold) | verdict: measured (printed) | wrong verdicts |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    flags = flagged(pairs, "lucid")
    for s in oof_settings(pairs, fitter, probed, flags):
        rows = nested(
            s.indices,
            lambda i: pairs[i].families,
            lambda i: pairs[i].measured,
            s.predictor,
            s.pool,
            s.fits,
        )
        if rows:
            print(oof_row(s.label, pairs, rows, s.device))
    reasons = Counter(flags.values())
    print(
        f"\nData check (docs/predict.md's rule): {len(flags)} of "
        f"{sum(p.dataset == 'lucid' for p in pairs)} Lucid pairs flagged: "
        + (", ".join(f"{n} {k}" for k, n in sorted(reasons.items())) or "none")
    )


def error_terms(pairs: list[Pair], fitter: Fitter, results: dict) -> None:
    """The out-of-sample errors behind ``predict_model.ERRORS``, and coverage with the other dataset's errors."""
    print(
        "\nOut-of-sample errors (95 % of |log(measured / predicted)| fall within; r, STP), against predict_model.ERRORS:"
    )
    e = {key: tuple(e95(x) for x in rel_errors(rows)) for key, rows in results.items()}

    def term(more: tuple[float, float], base: tuple[float, float]) -> tuple[float, float]:
        return (
            math.sqrt(max(0.0, more[0] ** 2 - base[0] ** 2)),
            math.sqrt(max(0.0, more[1] ** 2 - base[1] ** 2)),
        )

    def show(label: str, got: tuple[float, float], shipped: tuple[float, float]) -> None:
        print(
            f"  {label}: {100 * got[0]:.1f} %, {100 * got[1]:.1f} % (shipped {100 * shipped[0]:.0f} %, "
            f"{100 * shipped[1]:.0f} %)"
        )

    show(
        "time slicing, every input (h100-ts, LOFO)",
        e[("h100-ts", "LOFO")],
        (ERRORS.base(TIMESLICE), ERRORS.base(TIMESLICE, "stp")),
    )
    show(
        "MPS, every input but GPM (h100-mps, LOFO)",
        e[("h100-mps", "LOFO")],
        (ERRORS.base(MPS), ERRORS.base(MPS, "stp")),
    )
    show(
        f"no copies recorded: lucid LOFO {100 * e[('lucid', 'LOFO')][0]:.1f} %, {100 * e[('lucid', 'LOFO')][1]:.1f} % "
        "against h100-ts LOFO, the difference in quadrature",
        term(e[("lucid", "LOFO")], e[("h100-ts", "LOFO")]),
        ERRORS.no_copies,
    )
    for d in ("h100-ts", "lucid"):
        print(
            f"    {d}: LODO {100 * e[(d, 'LODO')][0]:.1f} %, {100 * e[(d, 'LODO')][1]:.1f} %, LOFO "
            f"{100 * e[(d, 'LOFO')][0]:.1f} %, {100 * e[(d, 'LOFO')][1]:.1f} %: "
            + ", ".join(f"{100 * x:.1f} %" for x in term(e[(d, "LODO")], e[(d, "LOFO")]))
        )
    lucid_pairs = [p for p in pairs if p.dataset == "lucid"]
    e_default = tuple(
        e95(x) for x in rel_errors([judge(p, UNCALIBRATED, False) for p in lucid_pairs])
    )
    show(
        f"uncalibrated: what predict does on a GPU it has no constants for, UNCALIBRATED on Lucid's GPU "
        f"({100 * e_default[0]:.1f} %, {100 * e_default[1]:.1f} %) against lucid LOFO",
        term(e_default, e[("lucid", "LOFO")]),
        ERRORS.uncalibrated,
    )
    if ("h100-ts", "calibrate") in e:
        got = e[("h100-ts", "calibrate")]
        show(
            f"probe-calibrated: the H100's time slicing with gpumon calibrate's constants ({100 * got[0]:.1f} %, "
            f"{100 * got[1]:.1f} %) against h100-ts LOFO",
            term(got, e[("h100-ts", "LOFO")]),
            ERRORS.probed,
        )
    outside_and_crossed(pairs, fitter, results, e, show, term)


def outside_and_crossed(
    pairs: list[Pair], fitter: Fitter, results: dict, e: dict, show: Any, term: Any
) -> None:
    """The term for a utilisation outside the range checked, and coverage with the other dataset's errors."""
    # utilisation outside the checked range: Lucid fitted on the pairs whose jobs both lie in [0.3, 0.9]
    lucid = [i for i, p in enumerate(pairs) if p.dataset == "lucid"]
    inside = frozenset(i for i in lucid if all(0.3 <= j.solo.busy <= 0.9 for j in pairs[i].jobs))
    c = fitter.fit(inside, TIMESLICE, "lucid")
    e_out = tuple(
        e95(x) for x in rel_errors([judge(pairs[i], c, True) for i in lucid if i not in inside])
    )
    e_in = tuple(e95(x) for x in rel_errors([judge(pairs[i], c, True) for i in inside]))
    show(
        f"a job outside the utilisation fitted on (lucid fitted on jobs in 30-90 %: outside {100 * e_out[0]:.1f} %, "
        f"{100 * e_out[1]:.1f} %, inside {100 * e_in[0]:.1f} %, {100 * e_in[1]:.1f} %)",
        term(e_out, e_in),
        ERRORS.outside,
    )
    busy = [j.solo.busy for p in pairs for j in p.jobs]
    print(
        f"  utilisation checked: {100 * min(busy):.1f}-{100 * max(busy):.1f} % "
        f"(shipped {100 * ERRORS.checked_busy[0]:.0f}-{100 * ERRORS.checked_busy[1]:.0f} %)"
    )
    print(
        "\nCoverage of the LOFO predictions with intervals from the other dataset's errors alone (time slicing):"
    )
    for d, other in (("h100-ts", "lucid"), ("lucid", "h100-ts")):
        print(
            f"  {d} with +-{100 * e[(other, 'LOFO')][0]:.1f} % (r), +-{100 * e[(other, 'LOFO')][1]:.1f} % (STP) "
            f"from {other}: {coverage_with(results[(d, 'LOFO')], *e[(other, 'LOFO')])}"
        )


def per_pair_tables(results: dict) -> None:
    """The H100's pairs one by one, and Lucid's by family pair."""
    print(
        "\nH100 per pair (predicted r: LOPO / LOFO; verdict: what predict prints with the LOFO prediction):\n"
    )
    print(
        "| pair | mode | measured r A, B | predicted r A, B (LOPO) | predicted r A, B (LOFO) | measured STP "
        "| predicted STP (LOPO / LOFO) | verdict measured | verdict printed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for d in ("h100-ts", "h100-mps"):
        for lopo, lofo in zip(results[(d, "LOPO")], results[(d, "LOFO")]):
            p = lopo["pair"]
            print(
                f"| {p.label} | {p.mode} | {p.measured[0]:.2f}, {p.measured[1]:.2f} | {lopo['pred'][0]:.2f}, "
                f"{lopo['pred'][1]:.2f} | {lofo['pred'][0]:.2f}, {lofo['pred'][1]:.2f} | {p.measured_stp:.2f} | "
                f"{lopo['stp']:.2f} / {lofo['stp']:.2f} | {truth(p.measured_stp)} | {lofo['verdict']} |"
            )
    print("\nLucid by family pair (LOFO):\n")
    print(
        "| families | pairs | measured r (mean) | predicted r (mean) | MAPE r % | measured STP (mean) | predicted STP (mean) |"
    )
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, ...], list[dict]] = {}
    for r in results[("lucid", "LOFO")]:
        groups.setdefault(tuple(sorted(r["pair"].families)), []).append(r)
    for fams, rows in sorted(groups.items()):
        meas = [m for r in rows for m in r["pair"].measured]
        pred = [x for r in rows for x in r["pred"]]
        print(
            f"| {' + '.join(fams)} | {len(rows)} | {sum(meas) / len(meas):.2f} | {sum(pred) / len(pred):.2f} | "
            f"{mape(pred, meas):.1f} | {sum(r['pair'].measured_stp for r in rows) / len(rows):.2f} | "
            f"{sum(r['stp'] for r in rows) / len(rows):.2f} |"
        )


def fit_every(pairs: list[Pair], datasets: dict[str, str]) -> Fitter:
    """Each GPU's constants fitted on all its pairs, printed; the Fitter whose folds start from them."""
    # each GPU's constants fitted on all its pairs: time slicing first, then MPS on the GPU's time-slicing fit
    # a GPU other than the H100 starts from UNCALIBRATED (two turns a step), as `--from-pairs` fits it there
    fitter = Fitter(pairs, {"lucid": UNCALIBRATED})
    every = {d: frozenset(i for i, p in enumerate(pairs) if p.dataset == d) for d in datasets}
    ts = {d: fitter.fit(every[d], TIMESLICE, d) for d in ("h100-ts", "lucid")}
    fitter = Fitter(
        pairs, {"h100-ts": ts["h100-ts"], "h100-mps": ts["h100-ts"], "lucid": ts["lucid"]}
    )
    mps = fitter.fit(every["h100-mps"], MPS, "h100-mps")
    print(
        "\nConstants fitted on every pair of a dataset (the GPU's own; the H100's ship as predict_model.FITTED):"
    )
    for name, c in (("h100-ts", ts["h100-ts"]), ("h100-mps", mps), ("lucid", ts["lucid"])):
        print(
            f"  {name}: slice {1e3 * c.slice_s:g} ms, switch {1e3 * c.switch_s:g} ms, util_scale {c.util_scale:g}, "
            f"sm_fill {c.sm_fill:g}"
        )
    return fitter


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--h100", type=Path, default=SHARED / "h100" / "experiments")
    parser.add_argument("--lucid", type=Path, default=SHARED / "lucid")
    parser.add_argument(
        "--calibration",
        type=Path,
        metavar="DIR",
        default=PROBED,
        help="a `gpumon calibrate` directory ($GPUMON_CALIBRATION) holding the H100's: its pairs are "
        "also predicted with the constants measured there, nothing fitted (scheme 'calibrate'; default: the "
        "H100's of 2026-11-26, docs/validation-h100-2026-11-26/calibration)",
    )
    return parser


def main() -> int:
    parser = arguments()
    args = parser.parse_args()
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("q4_contention.tgz", "modes.tgz"):
            with tarfile.open(args.h100 / name) as tar:
                tar.extractall(tmp, filter="data")
        pairs = load_h100(Path(tmp)) + load_lucid(args.lucid, Path(tmp) / "lucid")
    datasets = {"h100-ts": H100_DEVICE, "h100-mps": H100_DEVICE + ", MPS", "lucid": LUCID_DEVICE}
    print("Datasets:")
    for name, device in datasets.items():
        print(f"  {name}: {sum(p.dataset == name for p in pairs)} pairs; {device}")

    fitter = fit_every(pairs, datasets)

    schemes = {
        "h100-ts": ("LOPO", "LOFO", "LODO"),
        "h100-mps": ("LOPO", "LOFO"),
        "lucid": ("LOFO", "LODO"),
    }
    results = {(d, s): score(pairs, fitter, s, d) for d, ss in schemes.items() for s in ss}
    probed = None
    if args.calibration:  # the H100's pairs with the constants its probes measured, nothing fitted
        os.environ[calibration.ENV] = str(args.calibration)
        measured = calibration.load(H100_GPU)
        if measured is None:
            parser.error(f"--calibration {args.calibration}: no calibration of {H100_GPU} there")
        probed = dataclasses.replace(
            UNCALIBRATED, **measured.constants
        )  # a GPU with probe constants alone
        print(
            f"  gpumon calibrate {measured.measured_at} ({calibration.path_for(H100_GPU)}): "
            + ", ".join(f"{k} {v:.4g}" for k, v in measured.constants.items())
        )
        for d in ("h100-ts", "h100-mps"):
            results[(d, "calibrate")] = [
                judge(p, probed, True, probed=True) for p in pairs if p.dataset == d
            ]
            schemes[d] = (*schemes[d], "calibrate")
    print(
        "\n| dataset | scheme | predictor | MAPE r % | MAPE STP % | Spearman rho STP | measured r inside interval "
        "| measured STP inside interval | verdict: measured (printed) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for d in datasets:
        for s in schemes[d]:
            print("\n".join(summary(results[(d, s)], s)))
        print("\n".join(baselines(results[(d, schemes[d][0])])))

    error_terms(pairs, fitter, results)
    per_pair_tables(results)
    out_of_fold(pairs, fitter, probed if args.calibration else None)
    print(f"\n{time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
