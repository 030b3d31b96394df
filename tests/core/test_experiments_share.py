"""The experiments' ``share`` dimension: time-sliced and MPS cells, and their STPs side by side."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpumon.core.jobs.interpreter import choose
from gpumon.experiments.runner.cells import Cell, expand
from gpumon.experiments.runner.manifest import OK, CellRecord, Manifest
from gpumon.experiments.study.pairwise import better_mode
from gpumon.experiments.study.report import write_results
from gpumon.experiments.study.results import Context
from gpumon.experiments.runner.cellrun import CellScheduler, cell_argv
from gpumon.analysis.slowdown import Estimate
from tests.core.test_experiments import NO_CUDA, PAIRWISE, error_of, spec_of
from tests.tracegen import Job, write_run

TWO_MODES = PAIRWISE.replace(
    'pairs = "distinct"', 'pairs = "distinct"\nshare = ["timeslice", "mps:threads=50,50"]'
)
# shared step time as a multiple of the exclusive one: time slicing halves each job, MPS costs a quarter
SHARED_STEP = {"timeslice": 2.0, "mps:threads=50,50": 1.25}


def test_each_pair_runs_once_per_share_mode_against_one_set_of_exclusive_runs(
    tmp_path: Path,
) -> None:
    spec = spec_of(TWO_MODES.replace("repeats = 2", "repeats = 1"), tmp_path)
    cells = expand(spec, spec.presets["tiny"], "cuda")
    assert [(c.id, c.share) for c in cells] == [
        ("x-fcn-r1", "timeslice"),
        ("x-gemm-r1", "timeslice"),
        ("s-fcn+gemm-r1", "timeslice"),
        ("s-fcn+gemm-mps-threads-50-50-r1", "mps:threads=50,50"),
    ]
    argv = cell_argv(cells[3], tmp_path / "runs", tmp_path / "scratch", choose())
    assert argv[argv.index("--share") + 1] == "mps:threads=50,50"
    assert "--share" not in cell_argv(cells[2], tmp_path / "runs", tmp_path / "scratch", choose())
    assert "share" not in cells[2].config() and cells[3].config()["share"] == "mps:threads=50,50"


def test_bad_share_modes_name_the_key(tmp_path: Path) -> None:
    bad = PAIRWISE.replace('pairs = "distinct"', 'pairs = "distinct"\nshare = ["timeslice", "mig"]')
    assert "[run] share: expected share modes timeslice, mps" in error_of(bad, tmp_path)
    twice = PAIRWISE.replace('pairs = "distinct"', 'pairs = "distinct"\nshare = ["mps", "mps"]')
    assert "distinct share modes" in error_of(twice, tmp_path)


def fake_run(directory: Path, cell: Cell) -> str:
    step = 0.1 * (SHARED_STEP[cell.share] if cell.mode == "shared" else 1.0)
    jobs = [
        Job(slot=s, spec=j.spec, phases=((12.0, step),), start=i * 1.0, seed=i)
        for i, (s, j) in enumerate(zip("AB", cell.jobs))
    ]
    return str(write_run(directory / "runs" / cell.id, jobs, label=cell.id).relative_to(directory))


def test_report_puts_the_stp_of_each_mode_side_by_side(tmp_path: Path) -> None:
    spec = spec_of(TWO_MODES.replace("repeats = 2", "repeats = 1"), tmp_path)
    cells = expand(spec, spec.presets["tiny"], "cpu")
    out = tmp_path / "exp"
    manifest = Manifest.open(out, {"name": spec.name})

    def execute(cell: Cell, progress: object) -> CellRecord:
        return CellRecord(
            id=cell.id, status=OK, config=cell.config(), run=fake_run(out, cell), elapsed_s=1.0
        )

    CellScheduler(manifest, lambda: NO_CUDA, execute=execute, stream=open("/dev/null", "w")).run(
        cells
    )
    ctx = Context(
        spec, spec.presets["tiny"], "tiny", "cpu", cells, Manifest.open(out, {"name": spec.name})
    )
    text = write_results(ctx).read_text()
    assert (
        "## System throughput per pair (timeslice)" in text
        and "## System throughput per pair (mps:threads=50,50)" in text
    )
    assert "## Share modes side by side" in text
    by_share = pd.read_csv(out / "stp_by_share.csv")
    assert by_share["pair"].tolist() == ["fcn+gemm"]
    assert by_share["stp_timeslice"].round(2).tolist() == [1.0]
    assert by_share["stp_mps:threads=50,50"].round(2).tolist() == [1.6]
    for name in (
        "stp_by_share.png",
        "stp-timeslice.png",
        "stp-mps-threads-50-50.png",
        "pairs/fcn+gemm/report.md",
        "pairs/fcn+gemm-mps-threads-50-50/report.md",
    ):
        assert (out / name).is_file(), name
    assert set(pd.read_csv(out / "stp.csv")["share"]) == {"timeslice", "mps:threads=50,50"}


@pytest.mark.parametrize(
    "stps, best",
    [
        ({"timeslice": Estimate(1.0, 0.95, 1.05), "mps": Estimate(1.6, 1.5, 1.7)}, "mps"),
        ({"timeslice": Estimate(1.0, 0.95, 1.05), "mps": Estimate(1.02, 0.97, 1.1)}, "cannot tell"),
        ({"timeslice": Estimate(1.3, 1.25, 1.35), "mps": Estimate(0.9, 0.85, 0.95)}, "timeslice"),
        ({"timeslice": Estimate(1.0), "mps": Estimate(1.6)}, "cannot tell"),
    ],
)
def test_a_mode_is_better_only_when_its_interval_clears_the_others(stps: dict, best: str) -> None:
    assert better_mode(stps) == best
