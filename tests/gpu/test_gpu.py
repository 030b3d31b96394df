"""On a real NVIDIA GPU: doctor, PCIe RX against the bytes `h2d` copied, and a shared pair compared.

Marked ``gpu``: skipped with the reason where there is no GPU with CUDA torch (tests/conftest.py).
Every run stops on an event (enough status lines with a rate), never after a guessed time.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from gpumon.core.store.trace import load_run
from gpumon.checks.verify import RX_TOLERANCE, evidence_from_run
from tests.helpers import GPUMON, gpumon, only_run

pytestmark = pytest.mark.gpu
CAP_S = 300  # --duration: a cap only


def run_until_running(out: Path, label: str, *workloads: str, lines: int) -> Path:
    """`gpumon run --headless --json` until every job has printed ``lines`` running status lines; Ctrl-C."""
    proc = subprocess.Popen(
        [
            *GPUMON,
            "run",
            *workloads,
            "--headless",
            "--json",
            "--duration",
            str(CAP_S),
            "--out",
            str(out),
            "--label",
            label,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    running = {slot: 0 for slot in "AB"[: len(workloads)]}
    for line in proc.stdout:
        status = json.loads(line) if line.startswith("{") else {}
        if status.get("state") == "running" and status.get("iter_per_s"):
            running[status["process"]] += 1
            if min(running.values()) >= lines:
                proc.send_signal(signal.SIGINT)
                break
    _, err = proc.communicate(timeout=120)
    assert min(running.values()) >= lines, err
    assert proc.returncode == 128 + signal.SIGINT, err
    return only_run(out)


def test_doctor_is_ok_on_the_gpu() -> None:
    done = gpumon("doctor", "--json", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["gpu"]["level"] in ("ok", "warn") and "nvml" not in checks
    assert checks["torch"]["level"] == "ok" and checks["torch"]["detail"]["cuda_available"]
    assert checks["gpu"]["detail"]["pcie_method"] is not None


def test_h2d_alone_pcie_rx_matches_the_bytes_copied(tmp_path: Path) -> None:
    run = load_run(run_until_running(tmp_path, "h2d", "h2d", lines=8))
    ev = evidence_from_run(run)
    assert ev.device.startswith("cuda") and ev.busy_s > 4
    assert ev.rx_coverage >= 0.9, ev
    # NVML counts the link's protocol overhead too (~7 % on an H100): within 10 % of the payload.
    assert ev.nvml_rx_bps == pytest.approx(ev.probe_rx_bps, rel=RX_TOLERANCE), ev


def test_doctor_verify_passes_on_the_gpu() -> None:
    done = gpumon("doctor", "--verify", "--json", timeout=400)
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["verified"] and report["device"].startswith("cuda")
    assert checks["pcie_rx"]["level"] == "ok", checks["pcie_rx"]
    assert checks["job_pid"]["level"] == "ok", checks["job_pid"]
    assert checks["utilisation"]["level"] == "ok", checks["utilisation"]
    assert done.returncode == 0 and report["ok"]


def test_resnet50_and_vgg19_shared_compared_with_their_exclusive_runs(tmp_path: Path) -> None:
    runs = {
        label: run_until_running(tmp_path / label, label, *jobs, lines=10)
        for label, jobs in (
            ("r50", ("resnet50",)),
            ("vgg", ("vgg19",)),
            ("pair", ("resnet50", "vgg19")),
        )
    }
    done = gpumon(
        "compare",
        "--exclusive",
        str(runs["r50"]),
        "--exclusive",
        str(runs["vgg"]),
        "--shared",
        str(runs["pair"]),
        "--json",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for slot in ("A", "B"):
        slowdown = result["workloads"][slot]["slowdown"]
        # Sharing cannot make a job much faster than alone; 0.9 allows run-to-run noise.
        assert (
            slowdown["estimate"] >= 0.9
            and slowdown["low"] <= slowdown["estimate"] <= slowdown["high"]
        )
    stp = result["pair"]["stp"]["estimate"]
    assert 0.3 < stp < 2.5 and result["pair"]["verdict"]
