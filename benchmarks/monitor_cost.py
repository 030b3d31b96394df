"""CPU cost of the headless monitor itself (not its children) while two tiny workloads train.

Runs `gpumon run fcn gemm --headless` for DURATION seconds at the default 100 ms sampling
interval, and reads the monitor's own CPU time (user + system) from psutil just before it exits.
Prints figures measured in this run; asserts nothing.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

import psutil

DURATION_S = 20


def main() -> None:
    with tempfile.TemporaryDirectory() as runs:
        cmd = [
            sys.executable,
            "-m",
            "gpumon",
            "run",
            "fcn",
            "gemm",
            "--headless",
            "--device",
            "cpu",
            "--duration",
            str(DURATION_S),
            "--out",
            runs,
            "--no-nvml",
        ]
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        monitor = psutil.Process(proc.pid)
        cpu = monitor.cpu_times()
        while proc.poll() is None:
            try:
                cpu = monitor.cpu_times()
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        wall = time.perf_counter() - began
        own = cpu.user + cpu.system
        print(f"headless monitor, 2 CPU workloads, {DURATION_S} s at 100 ms sampling:")
        print(
            f"  monitor CPU time {own:.2f} s over {wall:.1f} s wall = {100 * own / wall:.2f} % of one core"
        )
        print(
            "  (includes interpreter start-up, psutil/NVML sampling, probe parsing and CSV writing)"
        )


if __name__ == "__main__":
    main()
