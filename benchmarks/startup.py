"""Parent start-up: time and memory of gpumon's entry points against a bare interpreter, and proof
that the parent never imports torch. Prints figures measured in this run; asserts nothing."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

REPEATS = 7
PROBE = (
    "import resource, sys; {code}; "
    "print(__import__('json').dumps({{'torch': 'torch' in sys.modules, "
    "'maxrss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))"
)
CASES = {
    "python -c pass": "pass",
    "import gpumon.cli": "import gpumon.cli",
    "gpumon run parser + plan": (
        "from gpumon.cli import build_parser; from gpumon.frontends.plan import make_plan; "
        "from gpumon.core.capture.session import SessionConfig; "
        "make_plan(['fcn', 'lstm'], [], session=SessionConfig(), label=None, duration_s=1, stagger_s=0)"
    ),
    "gpumon session (no NVML)": (
        "from gpumon.core.capture.session import Session, SessionConfig; s = Session(SessionConfig(nvml=False)); "
        "s.start(); s.shutdown()"
    ),
    "import torch (what children pay)": "import torch",
}


def measure(code: str) -> tuple[float, dict]:
    times, last = [], {}
    for _ in range(REPEATS):
        began = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", PROBE.format(code=code)],
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(time.perf_counter() - began)
        last = json.loads(out.stdout.strip().splitlines()[-1])
    return statistics.median(times), last


def main() -> None:
    results = {name: measure(code) for name, code in CASES.items()}
    base = results["python -c pass"][0]
    print(f"{'case':<36} {'median s':>9} {'x python':>9} {'max RSS MiB':>12}  torch imported")
    for name, (seconds, info) in results.items():
        print(
            f"{name:<36} {seconds:9.3f} {seconds / base:9.1f} {info['maxrss_mib']:12.0f}  {info['torch']}"
        )


if __name__ == "__main__":
    main()
