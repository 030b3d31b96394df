"""``gpumon snapshot`` (issue 43, like ``nvitop -1``): the GPUs, gpumon's recording runs and every GPU process once,
with the fake NVML and with no driver at all (then the host's top CPU consumers)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fakenvml import build as fake
from tests.helpers import GPUMON, gpumon, headless_cpu, wait_for

BUSY = "import time\nwhile True:\n    pass\n"


@pytest.fixture
def busy():
    """A process of ours that uses a whole core until the test ends."""
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    yield proc
    proc.kill()
    proc.wait()


def test_without_a_driver_it_says_why_and_lists_the_hosts_cpu_consumers(tmp_path, busy):
    env = fake.environment(None)
    done = gpumon("snapshot", "--json", "--top", "100000", "--runs-dir", str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    assert snap["devices"] == [] and snap["nvml"]["available"] is False and snap["nvml"]["reason"]
    assert snap["processes_are"] == "host top cpu"
    (mine,) = [p for p in snap["processes"] if p["pid"] == busy.pid]
    assert mine["cpu_pct"] > 0 and "while True" in mine["command"]
    text = gpumon("snapshot", "--runs-dir", str(tmp_path), env=env)
    assert text.returncode == 0 and text.stdout.startswith("no GPU: NVML "), text.stdout


@pytest.mark.skipif(fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml")
def test_with_a_gpu_it_lists_the_device_and_every_gpu_process(tmp_path, busy):
    lib = fake.build(tmp_path / "lib")
    scenario = fake.write_scenario(
        tmp_path / "scenario.txt",
        f"""
        driver 550.54.15
        device name="NVIDIA Fake A100" uuid=GPU-snap mem_total_mib=40960 gpu_util=77 mem_used_mib=1234 power_w=150 temp_c=66
        proc pid={busy.pid} mem_mib=321 sm_util=42
        """,
    )
    env = fake.environment(lib, scenario)
    done = gpumon("snapshot", "--json", "--runs-dir", str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    (device,) = snap["devices"]
    assert device["name"] == "NVIDIA Fake A100" and device["gpu_util"] == 77
    assert snap["processes_are"] == "gpu"
    (proc,) = snap["processes"]
    assert (
        proc["pid"] == busy.pid and proc["gpu_mem_mib"] == 321 and "while True" in proc["command"]
    )
    text = gpumon("snapshot", "--runs-dir", str(tmp_path), env=env).stdout.splitlines()
    assert text[0].startswith("GPU 0  NVIDIA Fake A100  util 77%")
    assert any(f" {busy.pid} " in line and "321 MiB" in line for line in text), text


def test_a_run_recording_now_is_listed_by_name(tmp_path):
    runs = tmp_path / "runs"
    run = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                runs,
                "--cmd",
                "sleep 120",
                "--label",
                "sleeper",
            ),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        run_dir = wait_for(
            lambda: next(runs.glob("*/runner.lock"), None), what="the run recording"
        ).parent
        done = gpumon("snapshot", "--json", "--no-nvml", "--runs-dir", str(runs))
        assert done.returncode == 0, done.stderr
        (listed,) = json.loads(done.stdout)["runs"]
        assert listed["run"] == run_dir.name and listed["jobs"] == {"A": "cmd:sleep 120"}
    finally:
        run.terminate()
        run.wait(60)
    after = gpumon("snapshot", "--json", "--no-nvml", "--runs-dir", str(runs))
    assert json.loads(after.stdout)["runs"] == [], "a finished run is not recording"


def test_bad_input_is_one_line_and_status_2(tmp_path):
    done = gpumon("snapshot", "--top", "0", "--no-nvml", "--runs-dir", str(tmp_path))
    assert done.returncode == 2 and done.stderr.strip() == (
        "gpumon: error: --top 0: give a number of processes, 1 or more"
    )
