"""``gpumon experiment --predict`` on the CPU: predicted.md from the exclusive cells, then predicted beside measured."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.helpers import gpumon, solo_core_share, tiny_pairs_spec

SPEC = tiny_pairs_spec(
    "tiny_predict",
    "Tiny predicted pair",
    "Does the predicted pair match the measured one?",
    2,
    cpus="0",
)


def test_predict_fills_the_pairs_first_then_puts_predicted_beside_measured(tmp_path):
    spec = tmp_path / "tiny_predict.toml"
    spec.write_text(SPEC)
    out = tmp_path / "exp"
    done = gpumon(
        "experiment", str(spec), "--out", str(out), "--device", "cpu", "--predict", timeout=240
    )
    assert done.returncode == 0, done.stderr
    # predicted.md was written after the exclusive cells and before the shared one ran
    assert done.stderr.index("predicted from the exclusive cells") < done.stderr.index(
        "s-fcn+gemm-r1: running"
    )
    before = (out / "predicted.md").read_text()
    assert "| fcn+gemm |" in before and "not run yet" in before and "same cores" in before
    results = (out / "results.md").read_text()
    assert "## Predicted from the exclusive runs alone" in results and "MAPE of r" in results
    table = pd.read_csv(out / "predicted.csv")
    row = table.iloc[0]
    alone = {
        slot: next((out / "runs").glob(f"*-x-{name}-r1"))
        for slot, name in (("A", "fcn"), ("B", "gemm"))
    }
    for slot, partner in (
        ("A", "B"),
        ("B", "A"),
    ):  # both pinned to core 0: 2 on an idle core, 1 + the partner's share
        physics = 1 + solo_core_share(alone[partner])
        assert abs(row[f"r_{slot}_predicted"] - physics) <= 0.1, (
            slot,
            row[f"r_{slot}_predicted"],
            physics,
        )
        assert row[f"r_{slot}_error"] == pytest.approx(
            (row[f"r_{slot}_predicted"] - row[f"r_{slot}_measured"]) / row[f"r_{slot}_measured"]
        )
    # each verdict is the one its STP interval implies: pays wholly above 1, loses wholly below, else cannot tell
    measured = pd.read_csv(out / "stp.csv").set_index("pair").loc["fcn+gemm"]
    assert row["verdict_measured"] == implied_verdict(measured["low"], measured["high"]), (
        measured.to_dict()
    )
    assert row["verdict_predicted"] == implied_verdict(row["stp_low"], row["stp_high"]), (
        row.to_dict()
    )


def implied_verdict(low: float, high: float) -> str:
    return "pays" if low > 1 else "loses" if high < 1 else "cannot tell"
