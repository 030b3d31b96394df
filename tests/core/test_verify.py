"""The verdicts of `gpumon doctor --verify`, judged on numbers recorded on a real H100.

The judges are pure functions of a few numbers; the H100 capture of `h2d` alone
(tests/data/h100/20261123-032413-x-h2d, trimmed) was recorded before gpumon read the 32-bit
PCIe counters right, so its PCIe RX must fail, while the same job's PID, utilisation and
NVML's own PCIe figures measured beside it (dmon, GPM) must pass.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from gpumon.checks import verify
from gpumon.core.store.trace import load_run
from gpumon.checks.doctor import FAIL, OK, WARN
from gpumon.checks.verify import (
    LiveEvidence,
    RunEvidence,
    evidence_from_run,
    judge,
    judge_job_pid,
    judge_monitor_cpu,
)

H100 = Path(__file__).parents[1] / "data" / "h100"
H2D = H100 / "20261123-032413-x-h2d"
# From the untrimmed H100 capture (the shared H100 data, run 20261123-032413-x-h2d, 19.8 s of steps; trimmed copy in tests/data/h100/):
UNTRIMMED_PROBE_BPS = 47.66e9  # bytes the job copied ÷ wall time
UNTRIMMED_NVML_BPS = 8.46e9  # what gpumon's device.csv said (the 32-bit counters aliased)
DMON_RX_BPS = 52.0e9  # nvidia-smi dmon rxpci over the same seconds (MB/s × 1e6, mean of 20 s)
GPM_RX_BPS, GPM_PAYLOAD_BPS = (
    56.4e9,
    52.5e9,
)  # driver/gpm.txt: GPM PCIE_RX vs a copy loop's own bytes


@pytest.fixture(scope="module")
def h2d() -> RunEvidence:
    return evidence_from_run(load_run(H2D))


def with_(ev: RunEvidence, **changes) -> RunEvidence:
    return dataclasses.replace(ev, **changes)


def test_evidence_from_the_h100_h2d_capture(h2d: RunEvidence) -> None:
    assert h2d.device == "cuda:0" and h2d.job_pid == 604 and h2d.exit_status == 0
    assert h2d.busy_s > 1.0
    # The trimmed seconds copy at the rate of the whole run (within 2 %), and NVML said ~1/5 of it.
    assert h2d.probe_rx_bps == pytest.approx(UNTRIMMED_PROBE_BPS, rel=0.02)
    assert h2d.nvml_rx_bps == pytest.approx(UNTRIMMED_NVML_BPS, rel=0.10)
    assert 0.5 < h2d.rx_coverage < 1.0  # the negative differences were dropped as NaN
    assert h2d.idle_util == 0.0 and h2d.busy_util > 80
    assert h2d.job_gpu_mem_mib == 676.0


def test_the_aliased_h100_pcie_rx_fails(h2d: RunEvidence) -> None:
    check = verify.judge_pcie_rx(h2d)
    assert check.level == FAIL
    assert check.detail["ratio"] == pytest.approx(0.19, abs=0.02)
    assert "ratio 0.19" in check.summary and "not within 10%" in check.notes[-1]


@pytest.mark.parametrize(
    "nvml_bps, probe_bps",
    [(DMON_RX_BPS, UNTRIMMED_PROBE_BPS), (GPM_RX_BPS, GPM_PAYLOAD_BPS)],
    ids=["dmon-vs-probe", "gpm-vs-payload"],
)
def test_nvmls_own_figures_beside_the_h100_copy_pass(
    h2d: RunEvidence, nvml_bps: float, probe_bps: float
) -> None:
    check = verify.judge_pcie_rx(with_(h2d, nvml_rx_bps=nvml_bps, probe_rx_bps=probe_bps))
    assert check.level == OK, check.summary
    assert check.detail["ratio"] == pytest.approx(nvml_bps / probe_bps)


def test_pcie_rx_edges(h2d: RunEvidence) -> None:
    just_out = with_(h2d, nvml_rx_bps=h2d.probe_rx_bps * 1.11)
    assert verify.judge_pcie_rx(just_out).level == FAIL
    assert verify.judge_pcie_rx(with_(h2d, nvml_rx_bps=h2d.probe_rx_bps * 1.09)).level == OK
    # Other processes on the link explain a mismatch: a warning that says so, not a failure.
    busy = verify.judge_pcie_rx(just_out, frozenset({4242}))
    assert busy.level == WARN and "1 other GPU process(es) (4242)" in busy.notes[0]
    # No RX value at all, too few samples, nothing copied, a CPU job.
    assert verify.judge_pcie_rx(with_(h2d, nvml_rx_bps=math.nan)).level == WARN
    assert (
        verify.judge_pcie_rx(with_(h2d, nvml_rx_bps=h2d.probe_rx_bps, rx_coverage=0.2)).level
        == WARN
    )
    assert verify.judge_pcie_rx(with_(h2d, busy_s=0.0)).level == FAIL
    cpu = verify.judge_pcie_rx(with_(h2d, device="cpu"))
    assert cpu.level == WARN and "ran on the CPU" in cpu.notes[0]


def test_job_pid() -> None:
    assert judge_job_pid(604, 676.0, frozenset({604})).level == OK
    hidden = judge_job_pid(604, math.nan, frozenset({604}))
    assert hidden.level == WARN and "no memory" in hidden.summary
    # NVML lists host PIDs that do not exist here: a PID namespace; the note says --pid=host.
    container = judge_job_pid(17, math.nan, frozenset({3001, 3002}), visible=lambda pid: False)
    assert container.level == WARN and "--pid=host" in container.notes[0]
    nothing = judge_job_pid(17, math.nan, frozenset())
    assert nothing.level == WARN and "no permission" in nothing.notes[0]
    elsewhere = judge_job_pid(17, math.nan, frozenset({1}), visible=lambda pid: True)
    assert elsewhere.level == WARN and "not among the 1 listed" in elsewhere.summary
    assert judge_job_pid(None, math.nan, frozenset()).level == FAIL


def test_utilisation(h2d: RunEvidence) -> None:
    assert verify.judge_utilisation(h2d).level == OK
    stuck = with_(h2d, idle_util=2.0, busy_util=5.0)
    assert verify.judge_utilisation(stuck).level == FAIL
    shared = with_(h2d, idle_util=95.0, busy_util=97.0)
    busy = verify.judge_utilisation(shared, frozenset({1, 2}))
    assert busy.level == WARN and "2 other GPU process(es) (1, 2)" in busy.notes[0]
    hidden = verify.judge_utilisation(shared)  # busy before, by processes NVML does not list
    assert hidden.level == WARN and "does not list" in hidden.notes[0]
    assert verify.judge_utilisation(with_(h2d, idle_util=math.nan)).level == WARN


def test_monitor_cpu() -> None:
    # gpumon --headless beside two trainers on the H100: 2.5 % of a core (driver/README).
    headless = judge_monitor_cpu(0.75, 30.0)
    assert headless.level == OK and "2.5 % of one core" in headless.summary
    assert judge_monitor_cpu(3.0, 30.0).level == WARN
    assert judge_monitor_cpu(math.nan, 30.0).level == WARN
    assert judge_monitor_cpu(1.0, 0.0).level == WARN


def test_a_job_that_failed_before_stepping_says_why(h2d: RunEvidence) -> None:
    crashed = with_(
        h2d,
        exit_status=1,
        busy_s=0.0,
        tail="Traceback ...\nRuntimeError: CUDA error: out of memory\n",
    )
    checks = judge(crashed, LiveEvidence())
    assert checks[0].name == "job" and checks[0].level == FAIL
    assert checks[0].summary.endswith("RuntimeError: CUDA error: out of memory")
    assert [c.name for c in checks[1:]] == list(verify.NAMES)


def test_json_is_strict() -> None:
    plain = verify._plain({"a": math.nan, "b": frozenset({3, 1}), "c": [1.5, math.nan]})
    assert json.loads(json.dumps(plain, allow_nan=False)) == {
        "a": None,
        "b": [1, 3],
        "c": [1.5, None],
    }
