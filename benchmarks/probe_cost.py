"""Cost of the child-side probe: ns per ``probe.step()`` off, with its rendezvous and nobody attached, and with a
monitor's pipe; and import time.

Run: ``python benchmarks/probe_cost.py [--calls 200000] [--starts 15]``. Prints figures, asserts nothing.
Each loop runs in a fresh child process (the probe reads its environment once per process):
"off" has no monitor and ``GPUMON_RENDEZVOUS=off``; "rendezvous" has no monitor, so the probe keeps its
history ring and listens in a private runtime directory made for the run, nobody attaching; "pipe"
children write to a pipe that a reader thread here drains and parses, as the monitor does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

LOOPS = r"""
import json, sys, time
from gpumon.core.probing import probe

def timed(body, calls):
    best = None
    for _ in range(3):
        began = time.perf_counter_ns()
        body(calls)
        elapsed = time.perf_counter_ns() - began
        best = elapsed if best is None else min(best, elapsed)
    return best / calls

def empty(calls):
    for _ in range(calls):
        pass

def step(calls):
    for _ in range(calls):
        probe.step(64, iter_s=0.01, warmup=False)

def step_and_copy(calls):
    for _ in range(calls):
        with probe.copy(4096):
            pass
        probe.step(64, iter_s=0.01, warmup=False)

calls = int(sys.argv[1])
print(json.dumps({"enabled": probe.enabled(), "empty": timed(empty, calls), "step": timed(step, calls),
                  "step_and_copy": timed(step_and_copy, calls)}))
"""


@dataclass
class Drain:
    """Reads a probe pipe to EOF in a thread, counting the step rows and drops it reports."""

    fd: int
    rows: int = 0
    dropped: int = 0

    def run(self) -> None:
        pending = b""
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    message = json.loads(line)
                    if message["type"] == "steps":
                        self.rows += len(message["rows"])
                        self.dropped += message.get("dropped", 0)


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMON_")}
    return {**env, **extra}


def measure_loops(calls: int, mode: str) -> tuple[dict[str, float], Drain | None]:
    """ns per call of each loop in a fresh child: ``mode`` "off", "rendezvous" (nobody attached) or "pipe"."""
    if mode != "pipe":
        argv = [sys.executable, "-c", LOOPS, str(calls)]
        with tempfile.TemporaryDirectory() as runtime:
            extra = (
                {"GPUMON_RENDEZVOUS": "off"}
                if mode == "off"
                else {"GPUMON_RUNTIME_DIR": f"{runtime}/gpumon"}
            )
            out = subprocess.run(
                argv, env=child_env(**extra), capture_output=True, text=True, check=True
            )
        return json.loads(out.stdout), None
    read_fd, write_fd = os.pipe()
    drain = Drain(read_fd)
    reader = threading.Thread(target=drain.run, daemon=True)
    reader.start()
    proc = subprocess.Popen(
        [sys.executable, "-c", LOOPS, str(calls)],
        env=child_env(GPUMON_PROBE_FD=str(write_fd)),
        pass_fds=(write_fd,),
        stdout=subprocess.PIPE,
        text=True,
    )
    os.close(write_fd)
    stdout, _ = proc.communicate()
    reader.join()
    if proc.returncode:
        raise SystemExit(f"benchmark child failed with status {proc.returncode}")
    return json.loads(stdout), drain


def start_seconds(code: str, starts: int) -> float:
    """Median wall time of ``python -c code``."""
    times = []
    for _ in range(starts):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=child_env(), check=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calls", type=int, default=200_000, help="calls per timed loop (best of 3)"
    )
    parser.add_argument(
        "--starts", type=int, default=15, help="interpreter starts per start-up figure"
    )
    args = parser.parse_args()

    python = sys.version.split()[0]
    print(
        f"probe cost, {args.calls:,} calls per loop, best of 3, python {python}, {os.cpu_count()} CPUs"
    )
    modes = (
        ("off (no monitor, GPUMON_RENDEZVOUS=off)", "off"),
        (
            "rendezvous, nobody attached (no monitor: history ring kept, socket listening)",
            "rendezvous",
        ),
        ("pipe (launched by a monitor: drained by a reader thread)", "pipe"),
    )
    for label, mode in modes:
        figures, drain = measure_loops(args.calls, mode)
        empty = figures["empty"]
        print(f"\n{label}: probe enabled={figures['enabled']}")
        print(f"  empty loop            {empty:8.1f} ns/iteration")
        for key, name in (("step", "probe.step()"), ("step_and_copy", "probe.copy() + step()")):
            print(
                f"  {name:<21} {figures[key]:8.1f} ns/call  ({figures[key] / empty:.0f}x the empty loop)"
            )
        if drain is not None:
            sent = 6 * args.calls
            print(
                f"  rows received {drain.rows:,} of {sent:,} sent, {drain.dropped:,} reported dropped"
            )

    bare = start_seconds("pass", args.starts)
    with_probe = start_seconds("import gpumon.core.probing.probe", args.starts)
    print(
        f"\nstart-up (median of {args.starts}): python -c pass {bare * 1e3:.1f} ms, "
        f"python -c 'import gpumon.core.probing.probe' {with_probe * 1e3:.1f} ms (+{(with_probe - bare) * 1e3:.1f} ms)"
    )


if __name__ == "__main__":
    main()
