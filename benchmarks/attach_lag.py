"""How far behind a detached run its viewer is: each step's time on the viewer's bus minus the step's own time.

    python benchmarks/attach_lag.py                    # fcn + gemm on the CPU, 30 s
    python benchmarks/attach_lag.py --seconds 60 --jobs resnet50 vgg19 --device cuda

Starts ``gpumon run JOBS --detach`` (a real runner with real jobs), follows its run directory with
the viewer's own source (``gpumon.core.sources.follow.FollowSource``, the same polls as ``gpumon
attach``, without drawing), and for every step that arrives after the history notes how long after
the step itself (its monotonic time, stamped in the job) the viewer had it. That is the whole chain:
the job's probe batching, the runner's listener, the recorder's flush, the viewer's poll; it bounds
from above how far the viewer is behind what the runner knows. Prints the median, 95th percentile
and maximum, then stops the run with ``gpumon stop``. Nothing is asserted.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpumon.core.records.bus import Bus  # noqa: E402
from gpumon.core.records.model import StepBatch  # noqa: E402
from gpumon.core.sources.follow import FollowSource  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", nargs="+", default=["fcn", "gemm"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--seconds", type=float, default=30.0, help="seconds measured after the first steps"
    )
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="gpumon-lag-"))
    gpumon = [sys.executable, "-m", "gpumon"]
    started = subprocess.run(
        [
            *gpumon,
            "run",
            *args.jobs,
            "--device",
            args.device,
            "--out",
            str(runs),
            "--detach",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    run_dir = Path(json.loads(started.stdout)["run"])
    lags: list[float] = []
    source = FollowSource(run_dir, Bus())
    t0 = int(source.run.meta.t0_monotonic_ns)
    measuring = False

    def on_item(item: object) -> None:
        if measuring and isinstance(item, StepBatch):
            now = (time.monotonic_ns() - t0) / 1e9
            lags.extend(now - step.t for step in item.steps)

    source.bus.subscribe(on_item)
    try:
        deadline = time.monotonic() + 120
        while (
            time.monotonic() < deadline
            and not (run_dir / "steps.csv").read_bytes().count(b"\n") > 20
        ):
            time.sleep(0.2)
        source.poll()  # the history: not a lag
        measuring = True
        source.start()
        time.sleep(args.seconds)
    finally:
        source.stop()
        subprocess.run([*gpumon, "stop", str(run_dir)], capture_output=True, text=True)
    lags.sort()
    print(
        f"machine: {os.cpu_count()} CPUs; jobs {' + '.join(args.jobs)} on {args.device}; {len(lags)} steps over "
        f"{args.seconds:g} s; viewer poll {source.poll_s:g} s"
    )
    if lags:
        p95 = lags[min(len(lags) - 1, int(0.95 * len(lags)))]
        print(
            f"step → viewer: median {statistics.median(lags):.3f} s, p95 {p95:.3f} s, max {lags[-1]:.3f} s"
        )


if __name__ == "__main__":
    main()
