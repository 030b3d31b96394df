"""The sampler's own CPU while two jobs train, on the fake libnvidia-ml with the H100's per-call costs.

    python benchmarks/sampler_wakeups.py [--ticks N] [--pairs P] [--before DIR]

Two CPU jobs (fcn, gemm) train the whole time, so every tick wakes on cores the jobs hold (what the runner's and
the TUI's sampler meet; benchmarks/nvml_tick.py measures the same calls without them). In a child whose
LD_LIBRARY_PATH points at the fake, the real Sampler ticks N times at its 100 ms interval, in the same thread, and
prints its thread CPU a second and the mean CPU of a tick: the process ticks (1 in 10: processes, host,
per-process utilisation) apart from the others. With --before DIR, the same for another gpumon tree (e.g. a
``git worktree add DIR <commit>``), the trees alternating P times in this one run, then the after ÷ before ratio
of the medians. Asserts nothing.
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

ROOT = Path(__file__).resolve().parents[1]

CHILD = "GPUMON_SAMPLER_WAKEUPS_CHILD"


def child(ticks: int) -> None:
    """In the child: the jobs, the sampler's ticks, one JSON line."""
    from gpumon.core.capture.sampler import Sampler
    from gpumon.core.records.bus import Bus
    from gpumon.core.records.clock import RunClock
    from gpumon.core.sources.host import HostSource
    from gpumon.core.sources.nvml import NvmlSource

    jobs = [
        subprocess.Popen(
            [sys.executable, "-m", "gpumon.workloads", name, "--device", "cpu"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in ("fcn", "gemm")
    ]
    try:
        time.sleep(6)  # the jobs past their start
        bus = Bus()
        bus.subscribe(lambda item: None)
        nvml = NvmlSource()
        assert nvml.open().available, "the fake did not open"
        pids = {"A": jobs[0].pid, "B": jobs[1].pid}
        sampler = Sampler(bus, RunClock.start(), HostSource(), nvml, 0.1, lambda: pids)
        process, other = [], []
        started = time.thread_time()
        for _ in range(ticks):
            before = time.thread_time()
            process_tick = sampler.ticks % sampler.process_every == 0
            sampler.tick()
            (process if process_tick else other).append(time.thread_time() - before)
            sampler.ticks += 1
            time.sleep(sampler.interval_s)
        spent = time.thread_time() - started
        print(
            json.dumps(
                {
                    "ms_per_s": spent * 1000 / (ticks * sampler.interval_s),
                    "process_tick_us": statistics.mean(process) * 1e6,
                    "other_tick_us": statistics.mean(other) * 1e6,
                }
            )
        )
    finally:
        for job in jobs:
            job.kill()
            job.wait()


def measure(tree: Path, ticks: int, env: dict[str, str]) -> dict[str, float]:
    """One child on ``tree``'s gpumon."""
    out = subprocess.run(
        [sys.executable, __file__, "--ticks", str(ticks)],
        env={**env, CHILD: "1", "PYTHONPATH": str(tree)},  # the child's gpumon is the tree's
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ticks", type=int, default=150, help="ticks per measurement (default 150)"
    )
    parser.add_argument(
        "--pairs", type=int, default=2, help="measurements of each tree (default 2)"
    )
    parser.add_argument("--before", type=Path, help="another gpumon tree, measured alternately")
    args = parser.parse_args()
    if os.environ.get(CHILD):
        child(args.ticks)
        return
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # tests.fakenvml, observer_cost
    from observer_cost import FakeDriver

    with tempfile.TemporaryDirectory() as work:
        env = FakeDriver(Path(work)).environment(dict(os.environ), None)
        trees = [("before", args.before), ("after", ROOT)] if args.before else [("this", ROOT)]
        found: dict[str, list[float]] = {name: [] for name, _ in trees}
        print(f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f}")
        for _ in range(args.pairs):
            for name, tree in trees:
                got = measure(tree, args.ticks, env)
                found[name].append(got["ms_per_s"])
                print(
                    f"  {name:6s} {got['ms_per_s']:5.2f} ms of CPU a second ({got['ms_per_s'] / 10:.3f} % of a core);"
                    f" a process tick {got['process_tick_us']:5.0f} µs, another tick {got['other_tick_us']:4.0f} µs"
                )
        if args.before:
            ratio = statistics.median(found["after"]) / statistics.median(found["before"])
            print(f"after ÷ before (medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
