"""Cost of one NVML tick (``sample`` + ``process_metrics``) against the fake libnvidia-ml, and the
CPU the NVML source uses at 10 Hz. Prints figures measured in this run; asserts nothing.

    python benchmarks/nvml_tick.py [--ticks N] [--seconds S]

The measured code runs in a child whose LD_LIBRARY_PATH points at the fake (pynvml loads the
library by name). The fake's own C work is a few table look-ups per call, so the figures are
essentially pynvml + ctypes + gpumon's NvmlSource.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakenvml import build as fake  # noqa: E402

CHILD = r"""
import json, statistics, sys, threading, time
from gpumon.core.sources.nvml import NvmlSource

ticks, seconds, pids = int(sys.argv[1]), float(sys.argv[2]), [int(p) for p in sys.argv[3:]]
source = NvmlSource()
assert source.open().available
for _ in range(200):
    source.sample(0.0)
    source.process_metrics(pids)
costs, cpu_costs = [], []
for i in range(ticks):
    began, cpu_began = time.perf_counter_ns(), time.thread_time_ns()
    source.sample(float(i))
    source.process_metrics(pids)
    cpu_costs.append(time.thread_time_ns() - cpu_began)
    costs.append(time.perf_counter_ns() - began)
costs.sort()
cpu_costs.sort()
stop, n = threading.Event(), 0
wall0, cpu0 = time.monotonic(), time.process_time()
next_tick = wall0
while time.monotonic() - wall0 < seconds:
    source.sample(time.monotonic() - wall0)
    source.process_metrics(pids)
    n += 1
    next_tick += 0.1
    stop.wait(max(0.0, next_tick - time.monotonic()))
wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
print(json.dumps({
    "ticks": ticks,
    "median_us": costs[len(costs) // 2] / 1000,
    "p99_us": costs[int(len(costs) * 0.99)] / 1000,
    "max_us": costs[-1] / 1000,
    "mean_us": statistics.fmean(costs) / 1000,
    "cpu_median_us": cpu_costs[len(cpu_costs) // 2] / 1000,
    "cpu_p99_us": cpu_costs[int(len(cpu_costs) * 0.99)] / 1000,
    "rate_ticks": n,
    "rate_wall_s": wall,
    "rate_cpu_s": cpu,
    "pcie_method": source.device_info()["pcie_method"],
}))
"""

SCENARIO = """
    driver 550.54.15
    device name="NVIDIA Fake A100" mem_total_mib=40960 gpu_util=70 mem_util=30 mem_used_mib=2048 power_w=200 temp_c=60 sm_clock_mhz=1410 pcie_rx_bps=2e9 pcie_tx_bps=1e9
    proc pid={a} mem_mib=1024 sm_util=45
    proc pid={b} mem_mib=2048 sm_util=35
    proc pid={foreign} mem_mib=4096 sm_util=20
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=5000, help="timed back-to-back ticks (default 5000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the 10 Hz run (default 10)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = fake.build(Path(tmp))
        sleepers = [subprocess.Popen(["sleep", str(args.seconds + 120)]) for _ in range(3)]
        try:
            a, b, foreign = (p.pid for p in sleepers)
            scenario = fake.write_scenario(Path(tmp) / "scenario.txt", SCENARIO.format(a=a, b=b, foreign=foreign))
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.ticks), str(args.seconds), str(a), str(b)],
                env=fake.environment(lib, scenario), capture_output=True, text=True, check=True,
            )
        finally:
            for p in sleepers:
                p.kill()
                p.wait()
    r = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, PCIe via {r['pcie_method']}")
    print(f"one tick (sample + process_metrics for 2 of 3 GPU processes), {r['ticks']} ticks back to back:")
    print(f"  median {r['median_us']:.1f} µs   p99 {r['p99_us']:.1f} µs   mean {r['mean_us']:.1f} µs"
          f"   max {r['max_us']:.1f} µs   (wall clock)")
    print(f"  median {r['cpu_median_us']:.1f} µs   p99 {r['cpu_p99_us']:.1f} µs   (thread CPU time: without preemption)")
    print(f"  load average while measuring: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    share = r["rate_cpu_s"] / r["rate_wall_s"] * 100
    print(f"at 10 Hz for {r['rate_wall_s']:.1f} s ({r['rate_ticks']} ticks): CPU {r['rate_cpu_s'] * 1000:.1f} ms"
          f" = {share:.2f} % of one core ({r['rate_cpu_s'] / r['rate_ticks'] * 1e6:.0f} µs CPU per tick)")


if __name__ == "__main__":
    main()
