"""`gpumon doctor --verify` as a real CLI: on a box without a GPU (the ``no_gpu`` fixture), and on the fake
driver with a real h2d child.

On the fake, the job runs with `--device cpu` (this box has no GPU), so the PCIe and utilisation
checks cannot agree with it; these tests check the path end to end (a real child through the
Session, a real capture, every check present, one line each, no traceback) and the checks whose
facts the fake can script: the job's PID and memory, other processes, a hidden process list.
The verdicts on real numbers are in tests/core/test_verify.py.
"""

from __future__ import annotations

from pathlib import Path
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpumon.checks.verify import NAMES
from tests.fakenvml import build as fake
from tests.helpers import GPUMON

TIMEOUT_S = 300
DEVICE = 'device name="NVIDIA Fake H100 80GB HBM3" mem_total_mib=81559 pcie_gen=5 pcie_width=16'
SCENARIOS = {
    # Our job is found with its memory (the fake attributes 676 MiB to each child of gpumon).
    "found": f"{DEVICE} gpu_util=0 pcie_rx_bps=1e6\nproc children_of=self mem_mib=676 sm_util=90",
    # The GPU is busy with another process before and while the job runs.
    "busy": f"{DEVICE} gpu_util=97 pcie_rx_bps=3e9\nproc pid=1 mem_mib=30000 sm_util=97",
    # The driver refuses the process lists (no permission to read other PIDs).
    "no_permission": (
        f"{DEVICE} gpu_util=0\nproc children_of=self mem_mib=676\n"
        "fail nvmlDeviceGetComputeRunningProcesses_v3 NO_PERMISSION\n"
        "fail nvmlDeviceGetGraphicsRunningProcesses_v3 NO_PERMISSION\n"
        "fail nvmlDeviceGetProcessUtilization NO_PERMISSION"
    ),
}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*GPUMON, "doctor", *args], env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, no_gpu: dict[str, str]
) -> dict[str, subprocess.CompletedProcess]:
    """Every case at once (each fake case trains h2d on the CPU for a few seconds)."""
    tmp = tmp_path_factory.mktemp("verify")
    jobs = {
        "cpu_text": (["--verify"], no_gpu),
        "cpu_json": (["--verify", "--json"], no_gpu),
        "cpu_pipeline": (["--verify", "--device", "cpu"], no_gpu),
    }
    if fake.compiler() is not None:
        lib = fake.build(tmp / "lib")
        for case, text in SCENARIOS.items():
            script = fake.write_scenario(tmp / f"{case}.txt", text)
            jobs[case] = (["--verify", "--json", "--device", "cpu"], fake.environment(lib, script))
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(_run, *job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def _checks(run: subprocess.CompletedProcess) -> dict[str, dict]:
    assert "Traceback" not in run.stderr, run.stderr
    report = json.loads(run.stdout)
    return {c["name"]: c for c in report["checks"]}


def docs_sample(after: str) -> list[str]:
    """The lines of the first code block in docs/verify.md after ``after``."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "verify.md").read_text()
    block = text[text.index(after) :].split("```\n", 2)[1]
    return block.splitlines()


def test_the_no_gpu_output_is_the_one_docs_verify_shows(runs) -> None:
    assert runs["cpu_text"].stdout.splitlines() == docs_sample("Where it cannot check, it says so")


def test_device_cpu_without_nvml_runs_the_job_and_checks_the_pipeline(runs) -> None:
    """What docs/verify.md says --device cpu does: the job runs on the CPU; its steps reach the capture and the monitor's
    cost is measured; NVML's checks say they were not made; the last line does not claim NVML's numbers hold."""
    run = runs["cpu_pipeline"]
    assert run.returncode == 0 and run.stderr == "", run.stderr
    lines = run.stdout.splitlines()
    shown = docs_sample("job needs torch in the workloads' Python")
    assert len(lines) == len(shown)
    for line, doc in zip(lines, shown):  # the same lines; the measured figures differ run to run
        assert line.split(":")[0] == doc.split(":")[0], (line, doc)
    assert any(
        line.startswith("  [ok]   capture: ") and "copied (memcpy on the CPU)" in line
        for line in lines
    )
    assert any(
        line.startswith("  [ok]   monitor CPU cost: ")
        or line.startswith("  [warn] monitor CPU cost: ")
        for line in lines
    )
    assert lines[-1].startswith(
        "gpumon's pipeline holds on the CPU; NVML's numbers are not verified (no GPU here)"
    )


def test_cpu_only_text_says_what_it_cannot_check_and_exits_0(runs) -> None:
    run = runs["cpu_text"]
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and run.stderr == ""
    lines = run.stdout.splitlines()
    assert lines[0] == "gpumon doctor --verify"
    assert any(line.startswith("  [warn] NVML unavailable:") for line in lines)
    for title in NAMES.values():
        assert (
            sum(f"[warn] {title}: not checked (no NVML, see above)" in line for line in lines) == 1
        ), title
    assert lines[-1].startswith("nothing verified: no GPU to check here")


def test_cpu_only_json(runs) -> None:
    run = runs["cpu_json"]
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] is True and report["verified"] is False and report["job"] == "h2d"
    checks = _checks(run)
    assert checks["nvml"]["level"] == "warn"
    assert all(checks[name]["detail"]["checked"] is False for name in NAMES)


needs_cc = pytest.mark.skipif(
    fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml"
)


@needs_cc
def test_on_the_fake_a_real_job_is_captured_and_every_check_has_a_line(runs) -> None:
    run = runs["found"]
    assert run.returncode == 0, run.stdout + run.stderr  # --device cpu: warnings, no failure
    report = json.loads(run.stdout)
    assert report["verified"] is True and report["device"] == "cpu"
    evidence = report["evidence"]
    assert evidence["busy_s"] >= 2.0 and evidence["probe_rx_bps"] > 0
    assert evidence["nvml_rx_bps"] == pytest.approx(1e6, rel=0.01)  # the fake's scripted RX
    checks = _checks(run)
    assert set(NAMES) <= set(checks) and checks["gpu"]["level"] == "ok"
    assert checks["job_pid"]["level"] == "ok" and "676 MiB" in checks["job_pid"]["summary"]
    assert checks["job_pid"]["detail"]["pid"] == evidence["job_pid"]
    for name in ("pcie_rx", "utilisation"):
        assert checks[name]["level"] == "warn" and "ran on the CPU" in checks[name]["notes"][0]
    cpu = checks["monitor_cpu"]["detail"]
    assert 0 < cpu["pct_of_core"] < 100 and cpu["wall_s"] > evidence["busy_s"]


@needs_cc
def test_a_gpu_busy_with_another_process_is_named(runs) -> None:
    run = runs["busy"]
    assert run.returncode == 0, run.stdout + run.stderr
    checks = _checks(run)
    util = checks["utilisation"]
    assert util["level"] == "warn" and "1 other GPU process(es) (1)" in util["notes"][0]
    assert (
        checks["job_pid"]["level"] == "warn"
        and "not among the 1 listed" in checks["job_pid"]["summary"]
    )


@needs_cc
def test_no_permission_to_list_processes_is_one_line(runs) -> None:
    run = runs["no_permission"]
    assert run.returncode == 0, run.stdout + run.stderr
    checks = _checks(run)
    pid = checks["job_pid"]
    assert (
        pid["level"] == "warn"
        and "no process at all" in pid["summary"]
        and "no permission" in pid["notes"][0]
    )


def test_device_without_verify_is_a_usage_error() -> None:
    done = subprocess.run(
        [*GPUMON, "doctor", "--device", "cpu"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stderr.startswith(
        "gpumon: error: --device only applies with --verify"
    )


def test_bad_device_is_a_usage_error() -> None:
    done = subprocess.run(
        [*GPUMON, "doctor", "--verify", "--device", "tpu"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.strip() == (
        "gpumon: error: bad --device 'tpu' (choose auto, cpu, cuda or cuda:N)"
    ), done.stderr
