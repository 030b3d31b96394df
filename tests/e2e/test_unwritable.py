"""A destination gpumon cannot write (even as root: /sys refuses new entries) is one line and exit status 1, with
nothing else written: ``run --out``, ``export``, ``compare --report``, ``experiment --out``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import gpumon
from tests.tracegen import Job, write_run

UNWRITABLE = Path("/sys/gpumon-test-unwritable")

pytestmark = pytest.mark.skipif(
    not Path("/sys/kernel").is_dir(), reason="needs /sys (a folder no one may create entries in)"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "xa": write_run(root / "xa", [Job("A", "fcn:preset=tiny", phases=((12, 0.1),))]),
        "xb": write_run(root / "xb", [Job("A", "gemm:preset=tiny", phases=((12, 0.05),))]),
        "ab": write_run(
            root / "ab",
            [
                Job("A", "fcn:preset=tiny", phases=((12, 0.2),)),
                Job("B", "gemm:preset=tiny", phases=((12, 0.1),)),
            ],
        ),
    }


def commands(runs: dict[str, Path]) -> dict[str, list[str]]:
    out = str(UNWRITABLE / "x")
    return {
        "run": ["run", "fcn:preset=tiny", "--headless", "--duration", "1", "--out", out],
        "export": ["export", str(runs["xa"]), "--csv", out],
        "compare": [
            "compare",
            *("--exclusive", str(runs["xa"]), "--exclusive", str(runs["xb"])),
            *("--shared", str(runs["ab"]), "--report", out),
        ],
        "experiment": ["experiment", "q2_pairwise", "--device", "cpu", "--out", out],
    }


@pytest.mark.parametrize("name", ["run", "export", "compare", "experiment"])
def test_an_unwritable_destination_is_one_line_and_exit_1(runs, name, tmp_path):
    done = gpumon(
        *commands(runs)[name],
        env={"GPUMON_PYTHON": sys.executable, "GPUMON_RUNS": str(tmp_path / "runs")},
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpumon: error: ") and str(UNWRITABLE) in last, done.stderr
    assert not UNWRITABLE.exists()
