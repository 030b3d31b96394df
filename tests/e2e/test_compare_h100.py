"""`gpumon compare` on real H100 captures: resnet50 and vgg19 alone, then sharing the GPU.

tests/data/h100/ holds trimmed copies (scripts/trim_run.py) of runs recorded on one H100 80GB
HBM3 on 2026-11-23 (before the GPM columns existed). The expected numbers below were computed
once with `gpumon compare --json` on the untrimmed runs; the trimmed ones must agree within
TOLERANCE (relative), and give the same verdict. They are a regression guard; the last test derives
the same figures from the trimmed steps.csv by hand (pandas, none of gpumon's functions), so a
wrong rate cannot hide behind a golden value recorded with the same mistake.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers import gpumon

H100 = Path(__file__).parents[1] / "data" / "h100"
RESNET50, VGG19 = H100 / "20261123-032320-x-resnet50", H100 / "20261123-032346-x-vgg19"
SHARED = H100 / "20261123-032439-s-r50-vgg"
TOLERANCE = 0.01
# Untrimmed: resnet50 alone 12.1 s of steps, vgg19 alone 14.5 s, together a 26.9 s overlap.
UNTRIMMED = {
    "A": {"spec": "resnet50", "exclusive_rate": 40.21, "shared_rate": 21.93, "slowdown": 1.834},
    "B": {"spec": "vgg19", "exclusive_rate": 29.41, "shared_rate": 13.48, "slowdown": 2.182},
}
UNTRIMMED_STP, UNTRIMMED_VERDICT = 1.0036, "cannot tell"  # STP 95 % interval [0.988, 1.020]


@pytest.fixture(scope="module")
def result() -> dict:
    done = gpumon(
        "compare",
        "--exclusive",
        str(RESNET50),
        "--exclusive",
        str(VGG19),
        "--shared",
        str(SHARED),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("slot", ["A", "B"])
def test_slowdowns_match_the_untrimmed_h100_runs(result: dict, slot: str) -> None:
    got, want = result["workloads"][slot], UNTRIMMED[slot]
    assert got["spec"] == want["spec"]
    for key in ("exclusive_rate", "shared_rate"):
        assert got[key] == pytest.approx(want[key], rel=TOLERANCE), key
    slowdown = got["slowdown"]
    assert slowdown["estimate"] == pytest.approx(want["slowdown"], rel=TOLERANCE)
    # Within-run intervals are narrow (vgg19's is ±0.3 %): they need not cover the untrimmed estimate.
    assert slowdown["low"] <= slowdown["estimate"] <= slowdown["high"]


def test_stp_and_verdict_match(result: dict) -> None:
    stp = result["pair"]["stp"]
    assert stp["estimate"] == pytest.approx(UNTRIMMED_STP, rel=TOLERANCE)
    assert stp["low"] < 1 < stp["high"]
    assert result["pair"]["verdict"] == UNTRIMMED_VERDICT
    # Sharing the H100 halved resnet50 and cut vgg19 to less than half: STP ~1, no gain.
    assert 1.0 / UNTRIMMED["A"]["slowdown"] + 1.0 / UNTRIMMED["B"]["slowdown"] == pytest.approx(
        UNTRIMMED_STP, rel=0.005
    )


def test_text_report_reads_the_old_runs() -> None:
    done = gpumon(
        "compare", "--exclusive", str(RESNET50), "--exclusive", str(VGG19), "--shared", str(SHARED)
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert "resnet50" in done.stdout and "vgg19" in done.stdout and "cannot tell" in done.stdout


def _post_warmup(run: Path, slot: str) -> pd.DataFrame:
    steps = pd.read_csv(run / "steps.csv")
    return steps[(steps["process"] == slot) & (steps["warmup"] == 0)].sort_values("t")


def _rate(t0: float, n0: float, t1: float, n1: float) -> float:
    return (n1 - n0) / (t1 - t0)


def test_the_figures_derived_by_hand_from_steps_csv(result: dict) -> None:
    """Exclusive rate: first to last post-warm-up step alone. Shared rate: over the overlap (the later first
    post-warm-up step to the earlier last step), each job's step count at the edges interpolated between its
    steps. r = x / s, STP = 1/r_A + 1/r_B."""
    alone = {
        "A": _post_warmup(RESNET50, "A"),
        "B": _post_warmup(VGG19, "A"),
    }  # each recorded in slot A alone
    x = {
        slot: _rate(s["t"].iloc[0], s["step"].iloc[0], s["t"].iloc[-1], s["step"].iloc[-1])
        for slot, s in alone.items()
    }
    shared = {slot: _post_warmup(SHARED, slot) for slot in ("A", "B")}
    start = max(s["t"].iloc[0] for s in shared.values())
    end = min(s["t"].iloc[-1] for s in shared.values())
    s_rate = {}
    for slot, steps in shared.items():
        n0, n1 = np.interp([start, end], steps["t"], steps["step"])
        s_rate[slot] = _rate(start, n0, end, n1)
    r = {slot: x[slot] / s_rate[slot] for slot in x}
    for slot in ("A", "B"):
        got = result["workloads"][slot]
        assert got["exclusive_rate"] == pytest.approx(x[slot], rel=1e-9), slot
        assert got["shared_rate"] == pytest.approx(s_rate[slot], rel=1e-9), slot
        assert got["slowdown"]["estimate"] == pytest.approx(r[slot], rel=1e-9), slot
        # and the golden values of the untrimmed runs, from the trimmed steps by hand
        assert x[slot] == pytest.approx(UNTRIMMED[slot]["exclusive_rate"], rel=TOLERANCE), slot
        assert s_rate[slot] == pytest.approx(UNTRIMMED[slot]["shared_rate"], rel=TOLERANCE), slot
    stp = 1 / r["A"] + 1 / r["B"]
    assert result["pair"]["stp"]["estimate"] == pytest.approx(stp, rel=1e-9)
    assert stp == pytest.approx(UNTRIMMED_STP, rel=TOLERANCE)
