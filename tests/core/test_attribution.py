"""Why a job slowed down: the rules on trimmed real H100 runs, on real CPU runs, and on edge cases.

The H100 fixtures (tests/data/h100_q4/, cut by its make.py) are 2.5 s of the
q4_contention experiment: each job alone and four pairs, with the cause the
issue's table names for each.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from gpumon.analysis.compare import compare
from gpumon.core.interference.attribution import (
    CPU,
    GPU,
    LINK,
    NO_NVML,
    NONE,
    UNEXPLAINED,
    UNKNOWN,
    Box,
    Job,
    Link,
    Side,
    attribute,
    link_capacity,
)
from gpumon.core.store.trace import load_run
from gpumon.errors import UsageError
from tests.helpers import gpumon

H100 = Path(__file__).resolve().parents[1] / "data" / "h100_q4"
CPU_PAIR = Path(__file__).resolve().parents[1] / "data" / "cpu_same_core"


def h100(*names: str) -> list:
    return [load_run(H100 / n) for n in names]


def compared(a: str, b: str, shared: str):
    exclusive = h100(f"x-{a}") if a == b else h100(f"x-{a}", f"x-{b}")
    return compare(exclusive, h100(shared), n_boot=200)


@pytest.mark.parametrize(
    ("a", "b", "causes"),
    [
        (
            "fcn",
            "fcn",
            (GPU, GPU),
        ),  # the link carried ~0.2 GB/s; copies waited for the other context
        ("h2d", "h2d", (LINK, LINK)),  # the link, saturated by both
        (
            "h2d",
            "gemm",
            (GPU, GPU),
        ),  # h2d's copies ran at full speed; its compute waited for gemm's slices
        (
            "gemm",
            "fcn",
            (GPU, GPU),
        ),  # fcn's per-copy bandwidth fell 3.8 -> 0.09 GB/s on an idle link
    ],
)
def test_h100_pairs_get_the_cause_of_the_issue_table(
    a: str, b: str, causes: tuple[str, str]
) -> None:
    c = compared(a, b, f"s-{a}+{b}")
    for slot, cause in zip("AB", causes):
        why = c.workload(slot).why
        assert why is not None and why.cause == cause, (slot, why)
        assert why.shares[cause] >= 0.5
        assert math.isclose(sum(why.shares.values()), 1.0, abs_tol=1e-9)
        assert "link busy" in why.evidence and "GPU util" in why.evidence


def test_h100_link_busy_counts_the_jobs_own_copies_where_nvml_counters_undercount() -> None:
    """h2d+h2d: NVML's 32-bit RX counters read ~9 GB/s while the two jobs moved ~47 GB/s."""
    why = compared("h2d", "h2d", "s-h2d+h2d").workload("A").why
    assert "the jobs' copies; NVML RX read" in why.evidence
    busy = int(why.evidence.split("link busy ")[1].split("%")[0])
    assert busy >= 70
    assert why.shares[LINK] > why.shares[GPU] > 0


def test_h100_copy_time_that_grows_on_an_idle_link_is_not_blamed_on_the_link() -> None:
    why = compared("fcn", "fcn", "s-fcn+fcn").workload("A").why
    assert why.shares[LINK] == 0
    assert "link busy 0%" in why.evidence


def test_compare_json_carries_cause_shares_and_evidence(tmp_path: Path) -> None:
    args = [
        "compare",
        "--json",
        "--exclusive",
        str(H100 / "x-h2d"),
        "--exclusive",
        str(H100 / "x-gemm"),
        "--shared",
        str(H100 / "s-h2d+gemm"),
    ]
    result = gpumon(*args)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for slot in "AB":
        job = data["workloads"][slot]
        assert job["cause"] == GPU
        assert set(job["shares"]) == {GPU, LINK, CPU, UNEXPLAINED}
        assert job["evidence"]


def _cpu_pair():
    runs = {p.name: load_run(p) for p in CPU_PAIR.iterdir() if p.is_dir()}
    return compare([runs["x-fcn"], runs["x-gemm"]], [runs["s-fcn+gemm"]], n_boot=200)


def test_same_core_cpu_pair_is_short_of_cpu() -> None:
    """A real capture on a 2-core box: fcn and gemm with one thread each, both pinned to core 0."""
    c = _cpu_pair()
    for w in c.workloads:
        assert w.slowdown.value > 1.3
        assert w.why.cause == CPU, w.why
        assert "cores oversubscribed: 1 core" in w.why.evidence
        assert w.why.shares[GPU] == 0 and w.why.shares[LINK] == 0


def test_runs_from_different_devices_are_refused(tmp_path: Path) -> None:
    cpu_run = tmp_path / "x-fcn"
    shutil.copytree(CPU_PAIR / "x-fcn", cpu_run)
    with pytest.raises(UsageError, match="different devices.*cpu .x-fcn.; cuda NVIDIA H100"):
        compare([load_run(cpu_run), *h100("x-gemm")], h100("s-gemm+fcn"))
    other_gpu = tmp_path / "x-gemm"
    shutil.copytree(H100 / "x-gemm", other_gpu)
    meta = json.loads((other_gpu / "run.json").read_text())
    meta["gpu"]["name"] = "NVIDIA A100-SXM4-40GB"
    (other_gpu / "run.json").write_text(json.dumps(meta))
    result = gpumon(
        "compare",
        "--exclusive",
        str(other_gpu),
        "--exclusive",
        str(H100 / "x-fcn"),
        "--shared",
        str(H100 / "s-gemm+fcn"),
    )
    assert result.returncode == 2
    assert result.stderr.startswith("gpumon: error: runs come from different devices")
    assert "Traceback" not in result.stderr


def test_a_shared_run_given_as_exclusive_is_refused() -> None:
    result = gpumon(
        "compare", "--exclusive", str(H100 / "s-fcn+fcn"), "--shared", str(H100 / "s-fcn+fcn")
    )
    assert result.returncode == 2
    assert result.stderr.startswith("gpumon: error: ")
    assert "not an exclusive run (mode shared in run.json); give it with --shared" in result.stderr


def test_a_gpu_pair_without_nvml_data_says_it_cannot_tell(tmp_path: Path) -> None:
    runs = []
    for name in ("x-gemm", "x-fcn", "s-gemm+fcn"):
        shutil.copytree(H100 / name, tmp_path / name)
        meta = json.loads((tmp_path / name / "run.json").read_text())
        meta["nvml"] = {"available": False, "reason": "unavailable: disabled (--no-nvml)"}
        meta["gpu"] = None
        (tmp_path / name / "run.json").write_text(json.dumps(meta))
        header = (tmp_path / name / "device.csv").read_text().splitlines()[0]
        (tmp_path / name / "device.csv").write_text(header + "\n")
        runs.append(load_run(tmp_path / name))
    c = compare(runs[:2], runs[2:], n_boot=200)
    fcn = c.workload("B").why
    assert fcn.cause == UNKNOWN and fcn.phrase == NO_NVML
    assert "no NVML data" in fcn.evidence
    assert any(w.startswith("no NVML data in x-gemm, x-fcn, s-gemm+fcn") for w in c.warnings)


# -- the rules on hand-made evidence ------------------------------------------------------------

GPU_BOX = Box("cuda:0", True, Link(63e9, "PCIe Gen5 x16"), host_cpus=16)


def test_a_job_that_does_not_slow_down_has_nothing_to_explain() -> None:
    job = Job("A", Side(0.010, cpu_pct=100, gpu_util=50), Side(0.0102, cpu_pct=100, gpu_util=90))
    assert attribute(job, None, GPU_BOX).cause == NONE


def test_cpu_that_falls_while_cores_are_free_is_a_symptom_not_the_cause() -> None:
    """A job blocking on a time-sliced GPU uses less CPU; with 16 free cores the CPU is not why."""
    a = Job(
        "A",
        Side(0.010, cpu_pct=100, gpu_util=60),
        Side(0.020, cpu_pct=50, gpu_util=100),
        frozenset(range(16)),
    )
    b = Job(
        "B",
        Side(0.010, cpu_pct=100, gpu_util=60),
        Side(0.020, cpu_pct=50, gpu_util=100),
        frozenset(range(16)),
    )
    why = attribute(a, b, GPU_BOX)
    assert why.cause == GPU and why.shares[CPU] == 0


def test_cpu_explains_exactly_what_the_lost_cpu_costs() -> None:
    a = Job("A", Side(0.010, cpu_pct=100), Side(0.030, cpu_pct=50), frozenset({0}))
    b = Job("B", Side(0.010, cpu_pct=100), Side(0.030, cpu_pct=50), frozenset({0}))
    why = attribute(a, b, Box("cpu", False, host_cpus=2))
    assert why.shares[CPU] == pytest.approx(0.5)  # 10 ms of the 20 ms extra
    assert why.shares[UNEXPLAINED] == pytest.approx(0.5)
    assert why.cause == CPU and why.phrase == "mostly short of CPU"


def test_different_cores_are_not_contention() -> None:
    a = Job("A", Side(0.010, cpu_pct=100), Side(0.015, cpu_pct=80), frozenset({0}))
    b = Job("B", Side(0.010, cpu_pct=100), Side(0.015, cpu_pct=80), frozenset({1}))
    why = attribute(a, b, Box("cpu", False, host_cpus=2))
    assert why.shares[CPU] == 0 and why.cause == UNEXPLAINED


def test_gpm_tells_time_slices_from_a_full_gpu() -> None:
    slices = Job("A", Side(0.01, gpu_util=60, sm_active=40), Side(0.02, gpu_util=100, sm_active=55))
    full = Job("A", Side(0.01, gpu_util=99, sm_active=97), Side(0.02, gpu_util=100, sm_active=98))
    assert "not full: time slices" in attribute(slices, None, GPU_BOX).evidence
    assert "(full)" in attribute(full, None, GPU_BOX).evidence
    assert attribute(full, None, GPU_BOX).cause == GPU
    assert attribute(full, None, GPU_BOX).phrase == "mostly waiting for the GPU, which was full"
    assert (
        attribute(slices, None, GPU_BOX).phrase
        == "mostly waiting for time slices on a GPU that was not full"
    )


def test_under_mps_the_gpu_share_is_competing_for_sms_not_time_slices() -> None:
    job = Job("A", Side(0.01, gpu_util=60, sm_active=40), Side(0.02, gpu_util=100, sm_active=70))
    mps = Box("cuda:0", True, Link(63e9, "PCIe Gen5 x16"), host_cpus=16, share="mps")
    why = attribute(job, None, mps)
    assert why.cause == GPU and why.phrase == "mostly competing for the GPU's SMs (MPS)"
    assert "time slices" not in why.evidence


def test_link_share_grows_with_how_busy_the_link_was() -> None:
    def link_share(other_bytes_per_step: float) -> float:
        a = Job(
            "A",
            Side(0.002, copy_s=0.001, copy_bytes=50e6, gpu_util=90),
            Side(0.004, copy_s=0.003, copy_bytes=50e6, gpu_util=100),
        )
        b = Job("B", Side(0.002), Side(0.004, copy_bytes=other_bytes_per_step, copy_s=0.003))
        return attribute(a, b, GPU_BOX).shares[LINK]

    idle, half, busy = link_share(0.0), link_share(60e6), link_share(200e6)
    assert idle == 0 and 0 < half < busy and busy == pytest.approx(1.0)


def test_link_capacity_sources_in_order() -> None:
    assert link_capacity(64e9, 54e9, 5, 16).source == "NVML max generation x width"
    assert link_capacity(None, 54e9, 5, 16) == Link(54e9, "h2d alone on this box")
    assert link_capacity(None, None, 5, 16).capacity_bps == pytest.approx(63.008e9)
    assert math.isnan(link_capacity(None, None, None, None).capacity_bps)
