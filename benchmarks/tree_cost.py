"""What reading the jobs' process trees costs the sampler, per process tick (0.5 s), with jobs of many threads.

    python benchmarks/tree_cost.py [--threads 34] [--ticks 400]

Two real processes with --threads threads each (34: what each training job of the H100 captures
had, processes.csv's threads column), each with one child forked by its main thread; the real
HostSource reads both trees the way the sampler does (every thread's children file once every
FULL_TREE_EVERY process ticks, each main thread's between) and, for comparison in the same run,
through every thread at every tick (gpumon before). Prints thread-CPU µs per process tick and
% of one core at two process ticks a second; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpumon.core.capture.sampler import FULL_TREE_EVERY, PROCESS_PERIOD_S  # noqa: E402
from gpumon.core.sources.host import HostSource  # noqa: E402

JOB = """
import subprocess, sys, threading, time
for _ in range({threads} - 1):
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
print(child.pid, flush=True)
time.sleep(3600)
"""


def cost(source: HostSource, roots: list[int], ticks: int, cadence: bool) -> float:
    """Thread-CPU µs per process tick reading every root's tree."""
    began = time.thread_time_ns()
    for tick in range(ticks):
        every_thread = not cadence or tick % FULL_TREE_EVERY == 0
        for root in roots:
            source.tree_pids(root, every_thread)
    return (time.thread_time_ns() - began) / 1000 / ticks


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=34, help="threads of each job (default 34)")
    parser.add_argument(
        "--ticks", type=int, default=400, help="process ticks measured per way (default 400)"
    )
    args = parser.parse_args()
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", JOB.format(threads=args.threads)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    children: list[int] = []
    try:
        children += [int(job.stdout.readline()) for job in jobs]
        roots = [job.pid for job in jobs]
        source = HostSource()
        assert [source.tree_pids(r) for r in roots] == [[r, c] for r, c in zip(roots, children)]
        per_s = 1 / PROCESS_PERIOD_S
        every = cost(source, roots, args.ticks, cadence=False)
        paced = cost(source, roots, args.ticks, cadence=True)
        print(
            f"two jobs of {args.threads} threads, {args.ticks} process ticks each way, {per_s:g} process ticks/s:"
        )
        print(
            f"  every thread, every tick (before):      {every:7.1f} µs a tick = {every * per_s / 1e4:.3f} % of one core"
        )
        print(
            f"  every thread every {FULL_TREE_EVERY}th tick, else main: {paced:7.1f} µs a tick = "
            f"{paced * per_s / 1e4:.3f} % of one core ({paced / every:.2f} x)"
        )
    finally:
        for job in jobs:
            job.kill()
            job.wait()
        for child in children:
            os.kill(child, signal.SIGKILL)


if __name__ == "__main__":
    main()
