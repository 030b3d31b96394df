"""Wall time of one experiment spec run sequentially and with ``--ray`` (a local cluster), in one run.

    python benchmarks/ray_fanout.py [--spec SPEC] [--device cpu]

Default spec: four single-job cells of the tiny preset (each pinned to a core under Ray). Prints
each wall time and the speed-up; on N cores (or GPUs) the ideal is N, less the cluster's start-up.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
[experiment]
name = "fanout"
title = "Fan-out benchmark"
question = "How long does a sweep take?"
analysis = "sweep"

[run]
workloads = ["gemm", "fcn"]
options = { preset = "tiny", threads = 1 }
sweep = { batch = [16, 32] }
seconds = 5
startup = 120
"""


def timed(argv: list[str]) -> float:
    began = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--spec", type=Path, default=None, help="a spec file (default: four tiny cells)"
    )
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = args.spec or Path(tmp) / "fanout.toml"
        if args.spec is None:
            spec.write_text(SPEC)
        base = [sys.executable, "-m", "gpumon", "experiment", str(spec), "--device", args.device]
        sequential = timed([*base, "--out", f"{tmp}/seq"])
        fanned = timed([*base, "--out", f"{tmp}/ray", "--ray"])
    print(f"spec {spec.name}, device {args.device}")
    print(f"sequential  {sequential:7.1f} s")
    print(f"--ray       {fanned:7.1f} s   (local cluster start-up included)")
    print(f"speed-up    {sequential / fanned:7.2f}x")


if __name__ == "__main__":
    main()
