"""How long ``gpumon predict`` takes on two hour-long solo captures, as a user runs it.

Writes two synthetic hour-long exclusive captures (run.json of the trimmed H100 fcn and gemm runs in
tests/data/h100_q4; steps.csv at RATE steps/s for an hour, device.csv at 10 Hz, processes.csv and
host.csv at 2 Hz), then times ``python -m gpumon predict --exclusive A --exclusive B --share all``
(interpreter start included): first with steps.csv only (what a first reader finds), then again with
the caches that first read left. Prints figures measured in this run; asserts nothing.

    python benchmarks/predict_speed.py [--rate 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
    steps = np.column_stack([np.zeros(n), np.full(n, 1000), np.arange(n), t, np.full(n, 1 / rate), np.full(n, 64),
                             (np.arange(n) < 20).astype(int), np.full(n, 201216), np.full(n, 5e-5)])
    # the process column is text: written as 0, then replaced by the slot name
    np.savetxt(dst / "steps.csv", steps, delimiter=",", fmt="%.9g", comments="",
               header="process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s")
    text = (dst / "steps.csv").read_text().splitlines()
    (dst / "steps.csv").write_text("\n".join([text[0]] + ["A" + line[1:] for line in text[1:]]) + "\n")
    td = np.arange(0.1, HOUR, 0.1)
    device = np.column_stack([td, np.full(len(td), util), np.zeros(len(td)), np.full(len(td), 1000.0),
                              np.full(len(td), 81559.0), np.full(len(td), 1e8), np.full(len(td), 1e6),
                              np.full(len(td), 300.0), np.full(len(td), 50.0), np.full(len(td), 1980.0)])
    np.savetxt(dst / "device.csv", device, delimiter=",", fmt="%.9g", comments="",
               header="t,gpu_util,mem_util,mem_used_mib,mem_total_mib,pcie_rx_bps,pcie_tx_bps,power_w,temp_c,sm_clock_mhz")
    th = np.arange(0.5, HOUR, 0.5)
    (dst / "processes.csv").write_text("t,process,pid,cpu_pct,rss_mib,threads,gpu_mem_mib,gpu_sm_util\n" + "".join(
        f"{x:.3f},A,1000,100.0,400.0,16,,\n" for x in th))
    (dst / "host.csv").write_text("t,cpu_pct,mem_used_mib,mem_total_mib\n" + "".join(
        f"{x:.3f},12.0,900.0,128887.0\n" for x in th))
    return n


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gpumon", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="steps per second of each job (default 200)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = [write_capture(DATA / name, root / name, args.rate, util) for name, util in (("x-fcn", 70.0), ("x-gemm", 99.0))]
        command = ["predict", "--exclusive", str(root / "x-fcn"), "--exclusive", str(root / "x-gemm"), "--share", "all"]
        cold, warm = [], []
        for _ in range(args.repeats):
            for name in ("x-fcn", "x-gemm"):  # back to steps.csv only
                for extra in (root / name).iterdir():
                    if extra.name not in ("run.json", "steps.csv", "device.csv", "processes.csv", "host.csv"):
                        shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
            cold.append(timed(command))
            warm.append(timed(command))
        print(f"two hour-long captures, {rows[0]:,} + {rows[1]:,} step rows")
        print("gpumon predict --share all, first read (steps.csv only): " + ", ".join(f"{x:.2f} s" for x in cold))
        print("gpumon predict --share all, again (caches left by the first): " + ", ".join(f"{x:.2f} s" for x in warm))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
