"""``gpumon experiment --ray``: cells fanned out on a real Ray cluster, one per pinned core.

The same spec runs sequentially and on Ray; the cells, statuses and result tables must agree
(numbers within noise), every Ray cell must have run on a core of its own, a cell whose
``gpumon run`` is killed is recorded failed while the sweep goes on, and an interrupted sweep
resumes. The first Ray sweep starts its own local cluster (``--ray``); the others join one that
``ray start --head`` made on loopback (``--ray ADDRESS``), with a token, as Ray 2.59+ clusters want.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Iterator

import pandas as pd
import psutil
import pytest

from tests.helpers import GPUMON, gpumon, interrupt_once, solo_core_share, wait_for

pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'gpumon[ray]')")

SPEC = """\
[experiment]
name = "four"
title = "Four cells"
question = "How fast is each alone?"
analysis = "sweep"

[run]
workloads = ["gemm", "fcn"]
options = { preset = "tiny", threads = 1 }
sweep = { batch = [16, 32] }
seconds = 3
startup = 90
"""


def cells(out: Path) -> dict[str, dict]:
    path = out / "cells.json"
    if not path.exists():
        return {}
    try:
        return {c["id"]: c for c in json.loads(path.read_text())["cells"]}
    except (ValueError, KeyError):
        return {}  # mid-write


def experiment(
    spec: Path, out: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen:
    return subprocess.Popen(
        [*GPUMON, "experiment", str(spec), "--device", "cpu", "--out", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def cell_process(label: str) -> psutil.Process | None:
    """The ``gpumon run`` of the cell labelled ``label``, once it has recorded steps."""
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info["cmdline"] or []
        if "run" in argv and "--label" in argv and argv[argv.index("--label") + 1] == label:
            out = Path(argv[argv.index("--out") + 1])
            if any(p.stat().st_size > 200 for p in out.glob("*/steps.csv")):
                return proc
    return None


def rates(out: Path) -> dict[str, float]:
    """Each cell's steps per second of the CPU its job had (steady steps / time, over its CPU share from
    processes.csv; the plain rate where no CPU sample fell in its steps): what a cell pinned to a core another
    process also runs on and one with a core of its own agree on, where their rates alone differ 2x."""
    found = {}
    for cell_id, record in cells(out).items():
        steps = pd.read_csv(out / record["run"] / "steps.csv")
        steady = steps[steps.warmup == 0]
        rate = (len(steady) - 1) / (steady.t.iloc[-1] - steady.t.iloc[0])
        share = solo_core_share(out / record["run"])
        found[cell_id] = rate / share if share > 0 else rate
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray cluster on loopback as ``ray start --head`` makes one: its address and the environment a driver
    needs to join it (token authentication with a token of this test's own, not ~/.ray's)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    log = tmp_path_factory.mktemp("cluster") / "head.log"
    with open(log, "w") as out:
        head = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ray.scripts.scripts",
                "start",
                "--head",
                "--node-ip-address=127.0.0.1",
                f"--port={port}",
                "--include-dashboard=false",
                "--disable-usage-stats",
                "--block",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **env},
        )
    try:
        wait_for(
            lambda: head.poll() is not None or "will now block" in log.read_text(),
            timeout=180,
            what="the Ray head started",
        )
        assert head.poll() is None, log.read_text()[-3000:]
        yield f"127.0.0.1:{port}", env
    finally:
        # `ray start --block` drains the node and stops what it started (~3 s); SIGTERM to its whole group
        # would stop the GCS first and leave it waiting 30 s for it
        head.terminate()
        try:
            head.wait(60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)  # anything of the group left behind
            head.wait()


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "four.toml"
    path.write_text(SPEC)
    return path


def test_ray_matches_sequential_pins_cores_and_survives_a_killed_cell(
    spec: Path, tmp_path: Path, cluster: tuple[str, dict[str, str]]
) -> None:
    sequential = gpumon(
        "experiment", str(spec), "--device", "cpu", "--out", str(tmp_path / "seq"), timeout=900
    )
    assert sequential.returncode == 0, sequential.stderr

    ray_out = tmp_path / "ray"
    driver = experiment(spec, ray_out, "--ray")
    try:
        victim = wait_for(
            lambda: cell_process("x-fcn-batch32-r1"),
            timeout=300,
            interval=0.2,
            what="the fcn batch 32 cell training on a Ray worker",
        )
        victim.kill()
        stdout, stderr = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, stderr
    assert "gpumon: Ray workers: core " in stderr
    first = cells(ray_out)
    assert set(first) == set(cells(tmp_path / "seq"))
    assert first["x-fcn-batch32-r1"]["status"] == "failed"
    assert "gpumon run ended with status -9" in first["x-fcn-batch32-r1"]["reason"]
    assert all(c["status"] == "ok" for i, c in first.items() if i != "x-fcn-batch32-r1")

    address, env = cluster  # the failed cell again, on a cluster that was there before the sweep
    again = gpumon(
        "experiment",
        str(spec),
        "--device",
        "cpu",
        "--out",
        str(ray_out),
        "--ray",
        address,
        "--retry-failed",
        timeout=600,
        env=env,
    )
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("done earlier") == 3
    final, seq = cells(ray_out), cells(tmp_path / "seq")
    assert {i: c["status"] for i, c in final.items()} == {i: c["status"] for i, c in seq.items()}

    # each Ray cell ran pinned to one core, and cells that overlapped in time had different cores
    spans = []
    for record in final.values():
        meta = json.loads((ray_out / record["run"] / "run.json").read_text())
        assert meta["status"] == "complete", (
            record
        )  # stopped when measured, not killed after the grace
        (core,) = meta["host"]["cpu_affinity"]
        started = datetime.fromisoformat(meta["started_at"].replace("Z", "+00:00")).timestamp()
        t = pd.read_csv(ray_out / record["run"] / "steps.csv")["t"]
        spans.append((started + t.min(), started + t.max(), core))
    for a in spans:
        for b in spans:
            if a is not b and a[0] < b[1] and b[0] < a[1]:
                assert a[2] != b[2], (a, b)
    # the same result tables, numbers within the noise of a shared 2-core box (per CPU-second: other processes on the
    # box take different shares of a pinned cell's core and of an unpinned one's)
    ray_rates, seq_rates = rates(ray_out), rates(tmp_path / "seq")
    for cell_id, rate in seq_rates.items():
        assert 0.5 < ray_rates[cell_id] / rate < 2.0, (cell_id, ray_rates[cell_id], rate)
    table = [
        line
        for line in (ray_out / "results.md").read_text().splitlines()
        if line.startswith("| x-")
    ]
    assert len(table) == len(
        [
            line
            for line in (tmp_path / "seq" / "results.md").read_text().splitlines()
            if line.startswith("| x-")
        ]
    )


def test_an_interrupted_ray_sweep_resumes(
    spec: Path, tmp_path: Path, cluster: tuple[str, dict[str, str]]
) -> None:
    address, env = cluster
    out = tmp_path / "ray"
    driver = experiment(spec, out, "--ray", address, env=env)
    stderr = interrupt_once(
        driver,
        lambda: any(c["status"] == "ok" for c in cells(out).values()),
        300,
        "a first cell done",
        120,
    )
    assert driver.returncode == 130, stderr
    assert "interrupted; run the same command again to resume" in stderr
    done = {i for i, c in cells(out).items() if c["status"] == "ok"}
    assert done and len(done) < 4
    resumed = gpumon(
        "experiment",
        str(spec),
        "--device",
        "cpu",
        "--out",
        str(out),
        "--ray",
        address,
        timeout=600,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.count("done earlier") == len(done)
    assert all(c["status"] == "ok" for c in cells(out).values()) and len(cells(out)) == 4


def test_without_ray_the_flag_is_one_line(tmp_path: Path, spec: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ray.py").write_text(
        'raise ImportError("no module named ray (shadowed by the test)")\n'
    )
    env = {"PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}
    result = gpumon(
        "experiment", str(spec), "--device", "cpu", "--out", str(tmp_path / "out"), "--ray", env=env
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "gpumon: error: --ray needs Ray: pip install 'gpumon[ray]'"
    assert not (tmp_path / "out").exists()
