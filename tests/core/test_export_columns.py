"""What ``gpumon export`` gives a notebook (issue 43): a step's duration named ``step_s``, the wall clock, the job's
name and what a step is, host.per_core as numbers, run.json beside the tables; pandas reads it as-is."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from gpumon.core.store.exportcolumns import export_columns
from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store.trace import export, load_run
from tests.tracegen import exclusive

STARTED = "2026-11-27T18:00:00.000Z"  # 1795802400 s after the Unix epoch


def test_a_notebook_reads_the_export_as_is(tmp_path: Path) -> None:
    root = exclusive(tmp_path / "run", "A", 20.0, "cmd:python train.py")
    meta = json.loads((root / "run.json").read_text())
    meta["started_at"] = STARTED
    meta["workloads"][0]["meta"] = {"counts": "optimizer steps", "micro_batches": 4}
    (root / "run.json").write_text(json.dumps(meta))
    (root / "host.csv").write_text(
        "t,cpu_pct,mem_used_mib,mem_total_mib,per_core\n1.0,50.0,1000,24000,12.5 97.0\n"
    )
    written = export(load_run(root), tmp_path / "out")
    assert [p.name for p in written][-1] == "run.json"
    steps = pd.read_csv(tmp_path / "out" / "steps.csv")
    assert "iter_s" not in steps and steps["step_s"].dtype == float
    assert set(steps["job"]) == {"cmd:python train.py"} and set(steps["slot"]) == {"A"}
    assert set(steps["counts"]) == {"optimizer steps"}
    assert "tokens_per_sample" not in steps, "no job said its tokens: no column"
    assert (steps["wall_epoch_s"] - steps["t"]).round(3).eq(1795802400.0).all()
    host = pd.read_csv(tmp_path / "out" / "host.csv")
    assert host[["core0_pct", "core1_pct"]].iloc[0].tolist() == [12.5, 97.0]
    assert "per_core" not in host
    back = json.loads((tmp_path / "out" / "run.json").read_text())
    assert back["started_at"] == STARTED


def test_steps_carry_the_tokens_per_sample_a_callback_said(tmp_path: Path) -> None:
    """Issue 43: a notebook gets tokens from samples × tokens_per_sample, for the job that said it (A), not B."""
    root = exclusive(tmp_path / "run", "A", 20.0, "cmd:python train.py")
    meta = json.loads((root / "run.json").read_text())
    meta["workloads"][0]["meta"] = {"counts": "optimizer steps", "tokens_per_sample": 12.0}
    other = {**meta["workloads"][0], "process": "B", "meta": {}}
    meta["workloads"].append(other)
    (root / "run.json").write_text(json.dumps(meta))
    export(load_run(root), tmp_path / "out")
    steps = pd.read_csv(tmp_path / "out" / "steps.csv")
    columns = list(steps.columns)
    assert columns.index("tokens_per_sample") == columns.index("samples") + 1
    assert set(steps["tokens_per_sample"]) == {12.0}
    frame = pd.DataFrame({"process": ["A", "B"], "t": [1.0, 1.0], "samples": [4.0, 4.0]})
    out = export_columns(RunMeta.from_json(meta), "steps", frame)
    assert out["tokens_per_sample"].iloc[0] == 12.0 and math.isnan(out["tokens_per_sample"].iloc[1])


@given(st.lists(st.lists(st.floats(0, 100, allow_nan=False), max_size=6), min_size=1, max_size=8))
def test_per_core_becomes_one_number_per_core(rows) -> None:
    texts = [" ".join(repr(v) for v in row) for row in rows]
    frame = pd.DataFrame({"t": [float(i) for i in range(len(rows))], "per_core": texts})
    out = export_columns(RunMeta.from_json({"schema": 1, "workloads": []}), "host", frame)
    width = max(len(row) for row in rows)
    assert [c for c in out.columns if c.startswith("core")] == [
        f"core{i}_pct" for i in range(width)
    ]
    for i, row in enumerate(rows):
        got = [out[f"core{j}_pct"].iloc[i] for j in range(width)]
        assert got[: len(row)] == row and all(math.isnan(v) for v in got[len(row) :])
    assert out["wall_epoch_s"].isna().all(), "no started_at: no wall clock, never a wrong one"
