"""How long ``gpumon predict`` takes on two hour-long solo captures, as a user runs it.

Writes two synthetic hour-long exclusive captures (run.json of the trimmed H100 fcn and gemm runs in
tests/data/h100_q4; steps.csv at RATE steps/s for an hour, device.csv at 10 Hz, processes.csv and
host.csv at 2 Hz), then times ``python -m gpumon predict --exclusive A --exclusive B --share all``
(interpreter start included), REPEATS times each, alternating: with steps.csv only (predict writes no
cache, so this is every predict's cost until another command caches the steps); with the steps.parquet
cache another command left (``gpumon runs`` writes it); and as on the light install (no pyarrow: pandas
parses the steps). Prints the median, least and most wall seconds and the median CPU seconds of each,
and the load average before and after; asserts nothing. Run it under ``flock /tmp/gpumon-bench.lock``.

    python benchmarks/predict_speed.py [--rate 200] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "h100_q4"
HOUR = 3600.0


def write_capture(src: Path, dst: Path, rate: float, util: float) -> int:
    """An hour of ``src``'s job at ``rate`` steps/s; returns the step rows written."""
    dst.mkdir(parents=True)
    meta = json.loads((src / "run.json").read_text())
    meta["duration_s"] = HOUR
    (dst / "run.json").write_text(json.dumps(meta))
    t = np.arange(1, int(HOUR * rate) + 1) / rate
    n = len(t)
    steps = np.column_stack(
        [
            np.zeros(n),
            np.full(n, 1000),
            np.arange(n),
            t,
            np.full(n, 1 / rate),
            np.full(n, 64),
            (np.arange(n) < 20).astype(int),
            np.full(n, 201216),
            np.full(n, 5e-5),
        ]
    )
    # the process column is text: written as 0, then replaced by the slot name
    np.savetxt(
        dst / "steps.csv",
        steps,
        delimiter=",",
        fmt="%.9g",
        comments="",
        header="process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s",
    )
    text = (dst / "steps.csv").read_text().splitlines()
    (dst / "steps.csv").write_text(
        "\n".join([text[0]] + ["A" + line[1:] for line in text[1:]]) + "\n"
    )
    td = np.arange(0.1, HOUR, 0.1)
    device = np.column_stack(
        [
            td,
            np.full(len(td), util),
            np.zeros(len(td)),
            np.full(len(td), 1000.0),
            np.full(len(td), 81559.0),
            np.full(len(td), 1e8),
            np.full(len(td), 1e6),
            np.full(len(td), 300.0),
            np.full(len(td), 50.0),
            np.full(len(td), 1980.0),
        ]
    )
    np.savetxt(
        dst / "device.csv",
        device,
        delimiter=",",
        fmt="%.9g",
        comments="",
        header="t,gpu_util,mem_util,mem_used_mib,mem_total_mib,pcie_rx_bps,pcie_tx_bps,power_w,temp_c,sm_clock_mhz",
    )
    th = np.arange(0.5, HOUR, 0.5)
    (dst / "processes.csv").write_text(
        "t,process,pid,cpu_pct,rss_mib,threads,gpu_mem_mib,gpu_sm_util\n"
        + "".join(f"{x:.3f},A,1000,100.0,400.0,16,,\n" for x in th)
    )
    (dst / "host.csv").write_text(
        "t,cpu_pct,mem_used_mib,mem_total_mib,per_core\n"
        + "".join(f"{x:.3f},12.0,900.0,128887.0,{' '.join(['12.0'] * 16)}\n" for x in th)
    )
    return n


NO_PYARROW = "import sys; sys.modules['pyarrow'] = None; from gpumon.cli import console; sys.argv[0] = 'gpumon'; console()"


def timed(args: list[str], light: bool = False) -> tuple[float, float]:
    """Wall and CPU seconds of one ``gpumon`` command (a child process)."""
    before = os.times()
    start = time.perf_counter()
    command = (
        [sys.executable, "-c", NO_PYARROW, *args]
        if light
        else [sys.executable, "-m", "gpumon", *args]
    )
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    elapsed = time.perf_counter() - start
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return elapsed, (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def _summary(name: str, runs: list[tuple[float, float]]) -> str:
    wall = [w for w, _ in runs]
    return (
        f"{name}: median {statistics.median(wall):.2f} s (least {min(wall):.2f}, most {max(wall):.2f}), "
        f"CPU median {statistics.median(c for _, c in runs):.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rate", type=float, default=200.0, help="steps per second of each job (default 200)"
    )
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = [
            write_capture(DATA / name, root / name, args.rate, util)
            for name, util in (("x-fcn", 70.0), ("x-gemm", 99.0))
        ]
        command = [
            "predict",
            "--exclusive",
            str(root / "x-fcn"),
            "--exclusive",
            str(root / "x-gemm"),
            "--share",
            "all",
        ]
        load = os.getloadavg()
        cold: list[tuple[float, float]] = []
        cached: list[tuple[float, float]] = []
        light: list[tuple[float, float]] = []
        for _ in range(args.repeats):
            for name in ("x-fcn", "x-gemm"):  # back to steps.csv only
                (root / name / "steps.parquet").unlink(missing_ok=True)
            cold.append(timed(command))
            light.append(timed(command, light=True))
            timed(
                ["runs", str(root)]
            )  # as any reader of the whole steps table, it leaves steps.parquet
            cached.append(timed(command))
        print(
            f"two hour-long captures, {rows[0]:,} + {rows[1]:,} step rows; load average "
            f"{load[0]:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)"
        )
        print(_summary("gpumon predict --share all, steps.csv only", cold))
        print(
            _summary(
                "gpumon predict --share all, with the steps cache another command wrote", cached
            )
        )
        print(
            _summary(
                "gpumon predict --share all, light install (no pyarrow), steps.csv only", light
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
