"""``gpumon run JOB --partner-phase S`` on the CPU: the real command, its real jobs (the phase means little on a
CPU, but its mechanics are the GPU's: the job alone, then the standard partner beside it for the last S seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import gpumon


@pytest.mark.parametrize(
    "args, says",
    [
        (["fcn:preset=tiny", "--partner-phase", "5"], "needs --duration longer than S"),
        (["fcn:preset=tiny", "--partner-phase", "5", "--duration", "5"], "needs --duration"),
        (
            ["fcn:preset=tiny", "lstm:preset=tiny", "--partner-phase", "2", "--duration", "9"],
            "one job",
        ),
        (
            ["fcn:preset=tiny", "--partner-phase", "2", "--duration", "9", "--stagger", "3"],
            "sets the stagger itself",
        ),
    ],
)
def test_bad_partner_phase_is_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str):
    done = gpumon("run", *args, "--headless", "--device", "cpu", env={"GPUMON_RUNS": str(tmp_path)})
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*/run.json"))


def test_the_partner_joins_for_the_last_seconds_and_predict_reads_the_solo_part(tmp_path: Path):
    runs = tmp_path / "runs"
    done = gpumon(
        "run", "fcn:preset=tiny", "--partner-phase", "6", "--duration", "14", "--headless",
        "--device", "cpu", env={"GPUMON_RUNS": str(runs)}, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run,) = runs.glob("*/run.json")
    meta = json.loads(run.read_text())
    assert meta["stagger_s"] == 8
    assert [w["spec"] for w in meta["workloads"]] == ["fcn:preset=tiny", "gemm:preset=tiny"]
    got = gpumon(
        "predict", "--exclusive", str(run.parent), "--json", env={"GPUMON_RUNS": str(runs)}
    )
    assert got.returncode == 0, got.stderr
    shown = json.loads(got.stdout)
    # the phase run stands for the job's solo capture: one job, paired with itself, on its cores
    assert shown["share"] == "cpu" and shown["workloads"]["A"]["spec"] == "fcn:preset=tiny"
