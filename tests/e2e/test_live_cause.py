"""The cause on the live interference line of a real headless run (--baseline)."""

from __future__ import annotations

import json
from pathlib import Path

from gpumon.core.records.rates import BARELY_BELOW
from tests.helpers import gpumon, headless_cpu

H100 = Path(__file__).resolve().parents[1] / "data" / "h100_q4"
CPU_PAIR = Path(__file__).resolve().parents[1] / "data" / "cpu_same_core"
CAUSES = {"gpu", "link", "cpu", "unexplained", "none", "unknown"}


def interference_lines(stdout: str) -> list[dict]:
    return [e for e in map(json.loads, stdout.splitlines()) if "slowdown" in e]


def test_live_line_carries_each_jobs_cause_and_words(tmp_path: Path) -> None:
    """Two real CPU jobs against real CPU baselines: every interference line names a cause per job."""
    result = gpumon(
        # 10 s each: the line has r and causes once the overlap holds MIN_OVERLAP_S (whatever the machine's speed)
        *headless_cpu(
            tmp_path / "runs",
            "fcn:threads=1,cpus=0,duration=10",
            "gemm:threads=1,cpus=0,duration=10",
            "--json",
            "--baseline",
            f"A={CPU_PAIR / 'x-fcn'}",
            "--baseline",
            f"B={CPU_PAIR / 'x-gemm'}",
        ),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    entries = [e for e in interference_lines(result.stdout) if all(e["slowdown"].values())]
    assert entries, result.stdout
    for entry in entries:
        assert set(entry["cause"]) == {"A", "B"}
        for why in entry["cause"].values():
            assert why["cause"] in CAUSES
            if why["cause"] not in ("none", "unknown"):
                assert abs(sum(why["shares"].values()) - 1) < 1e-3 and why["evidence"]
        assert entry["words"].startswith("fcn ") and "; gemm " in entry["words"]


def test_a_gpu_baseline_on_a_cpu_run_cannot_tell_live(tmp_path: Path) -> None:
    result = gpumon(
        *headless_cpu(
            tmp_path / "runs",
            "fcn:duration=10",
            "gemm:duration=10",
            "--json",
            "--baseline",
            f"A={H100 / 'x-fcn'}",
        ),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    entries = [e for e in interference_lines(result.stdout) if e["cause"]]
    assert entries, result.stdout
    assert (
        entries[-1]["cause"]["A"]["phrase"]
        == "cannot tell: baseline x-fcn ran on cuda:0, this run on cpu"
    )
    if (
        entries[-1]["slowdown"]["A"] >= BARELY_BELOW
    ):  # "runs N× slower (why)"; a fast CPU may even beat the H100's fcn
        assert (
            "(cannot tell: baseline x-fcn ran on cuda:0, this run on cpu)" in entries[-1]["words"]
        )
