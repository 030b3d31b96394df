"""What watching costs: gpumon's runner, its viewer and its TUI against nvitop, each measured alone.

    python benchmarks/observer_cost.py                       # this box: CPU jobs, fake NVML with H100 costs
    python benchmarks/observer_cost.py --jobs fcn gemm       # the same with jobs at hundreds of steps a second
    python benchmarks/observer_cost.py --device cuda --nvml real   # a GPU box: resnet50 + vgg19, real driver
    python benchmarks/observer_cost.py --only detached --only 'nvitop --interval' --before /tmp/old   # a before/after

Two workloads train the whole time (on the CPU: ``CPU_JOBS``, at about the H100 pair's step rate) while each monitor runs, one after the other, for --seconds
after --warmup; a terminal program gets its own pty (120x40 unless --cols/--rows):

- ``gpumon run A B`` (the TUI; it launches and watches the two jobs itself, step events included)
- ``gpumon run A B --headless`` (status lines; the same runner ``--detach`` starts)
- both again with ``--interval 250``: NVML read at nvitop@0.25 s's own rate, for a like-for-like row, and the TUI
  with ``--interval 100`` (gpumon's default before it chose one from what NVML can read: 200 ms on a GPM GPU)
- ``gpumon run A B --detach``: its runner alone (no terminal, nobody attached), then with one
  ``gpumon attach`` in a pty: the viewer, the runner while watched, and the two together
- ``nvitop --interval 0.25`` and ``nvitop`` (default 2 s), watching the same two jobs started here

For each it prints the monitor's own CPU as % of one core (children excluded), its RSS and the
bytes per second it wrote to the terminal, for gpumon also each thread's CPU and wake-ups and the
steps per second its capture recorded meanwhile (what the listener and recorder handle), then
each gpumon row ÷ nvitop@0.25 s, all from this one run. Issue 41's targets: the TUI at most 0.5, the runner
nobody watches at most 0.25 (issue 26's: one viewer at most 1.0, headless 0.5). Nothing is asserted. ``--before DIR``
measures each gpumon row from another source tree too (e.g. ``git worktree add DIR main``), just
before this checkout's.

``--nvml fake`` (the default with ``--device cpu``) builds tests/fakenvml and points gpumon AND
nvitop at it (``LD_LIBRARY_PATH``) with ``FAKENVML_COSTS=h100``, so both pay the H100's measured
per-call CPU costs; its scenario is an H100 on a Gen5 x16 link with the two jobs as its compute
processes. ``--nvml real`` loads the system's libnvidia-ml (needs nvitop: ``pip install
'gpumon[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fakenvml
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpumon.core.store.trace import load_run  # noqa: E402
from pty_monitor import (  # noqa: E402
    PtyCost,
    PtyProgram,
    cost_between,
    rss_mib,
    run_in_pty,
    snapshot,
    thread_names,
)

CTRL_C = b"\x03"
# Issue 41: the TUI at most half of nvitop@0.25 s, the runner nobody watches at most a quarter; issue 26: a viewer
# at most nvitop's cost, a headless run at most half.
RUNNER, VIEWER, WATCHED, BOTH = (
    "gpumon runner (detached, nobody attached)",
    "gpumon attach (viewer)",
    "gpumon runner while attached",
    "gpumon runner + viewer",
)
# The CPU jobs step at about the pair's rate on the H100 (resnet50 + vgg19: 32 steps/s together in its observer run,
# docs/validation-h100-2026-11-26/observer-cost.log): ~31 steps/s on the 2-core VM, so the steps' share of a
# monitor's cost is the H100's as the fake's NVML costs are. ``--jobs fcn gemm``: the tiny presets, 500+ steps/s.
CPU_JOBS = ["fcn:batch=1536", "gemm:batch=6144"]
TARGETS = {"gpumon TUI": 0.5, "gpumon --headless": 0.5, RUNNER: 0.25, VIEWER: 1.0}
H100_SCENARIO = """\
driver 580.159.04
cuda_driver 13000
device name="NVIDIA H100 80GB HBM3" uuid=GPU-bench-h100 mem_total_mib=81559 gpu_util=100 mem_util=52 mem_used_mib=11378 power_w=517 temp_c=49 sm_clock_mhz=1980 pcie_rx_bps=8.7e8 pcie_tx_bps=2.4e8 pcie_gen=5 pcie_width=16 pcie_counter_bits=32 pcie_counter_step_ms=20 gpm=1 sm_active_pct=62 sm_occupancy_pct=14 dram_bw_pct=24 tensor_active_pct=40
"""


@dataclass(frozen=True)
class Monitor:
    """One observer: how to start it, how to quit it, whether it launches the jobs itself."""

    name: str
    argv: list[str]
    quit_keys: bytes
    launches_jobs: bool
    tree: str | None = None  # gpumon from this source tree (PYTHONPATH) instead of this checkout
    detached: bool = False  # argv starts a detached run: its runner, then a viewer, are measured (``measure_detached``)

    @property
    def names(self) -> tuple[str, ...]:
        """The rows it gives."""
        if not self.detached:
            return (self.name,)
        suffix = self.name.removeprefix("gpumon --detach")
        return tuple(f"{row}{suffix}" for row in (RUNNER, VIEWER, WATCHED, BOTH))


def workload_argv(spec: str, device: str) -> list[str]:
    """``fcn:preset=tiny`` as a harness command line (what gpumon itself would start)."""
    name, _, options = spec.partition(":")
    argv = [sys.executable, "-m", "gpumon.workloads", name, "--device", device]
    for option in filter(None, options.split(",")):
        argv += ["--opt", option]
    return argv


def monitors(
    jobs: list[str], device: str, runs: str, nvml: bool, before: str | None = None
) -> list[Monitor]:
    """Every observer, in the order measured; with ``before``, each gpumon row first from that tree, then from this one."""
    gpumon = [sys.executable, "-P", "-m", "gpumon", "run", *jobs, "--device", device, "--out", runs]
    if not nvml:
        gpumon.append("--no-nvml")
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).with_name("nvitop"))
    ours = [
        Monitor("gpumon TUI", gpumon, b"q", True),
        Monitor("gpumon --headless", [*gpumon, "--headless"], CTRL_C, True),
        Monitor("gpumon TUI --interval 100", [*gpumon, "--interval", "100"], b"q", True),
        Monitor("gpumon TUI --interval 250", [*gpumon, "--interval", "250"], b"q", True),
        Monitor(
            "gpumon --headless --interval 250",
            [*gpumon, "--headless", "--interval", "250"],
            CTRL_C,
            True,
        ),
        Monitor("gpumon --detach", [*gpumon, "--detach", "--json"], b"q", True, detached=True),
    ]
    measured = []
    for monitor in ours:
        if before is not None:
            measured.append(replace(monitor, name=f"{monitor.name} (before)", tree=before))
        measured.append(monitor)
    return [
        *measured,
        Monitor("nvitop --interval 0.25", [nvitop, "--interval", "0.25"], b"q", False),
        Monitor("nvitop (default 2 s)", [nvitop], b"q", False),
    ]


class FakeDriver:
    """The fake libnvidia-ml with the H100's per-call costs; one scenario file per monitor."""

    def __init__(self, work: Path) -> None:
        from tests.fakenvml import build as fake

        self.fake = fake
        self.lib_dir = fake.build(work / "fakenvml")
        self.work = work

    def environment(self, base: dict[str, str], job_pids: list[int] | None) -> dict[str, str]:
        """gpumon's jobs are its children (``children_of=self``); nvitop's are named by PID."""
        procs = [
            f"proc pid={pid} mem_mib=4276 sm_util=40 mem_util=10 type=compute"
            for pid in job_pids or []
        ]
        if job_pids is None:
            procs = ["proc children_of=self mem_mib=4276 sm_util=40 mem_util=10 type=compute"]
        scenario = self.fake.write_scenario(
            self.work / f"scenario-{len(procs)}-{os.getpid()}.txt", H100_SCENARIO + "\n".join(procs)
        )
        env = self.fake.environment(self.lib_dir, scenario, base=base)
        env["FAKENVML_COSTS"] = "h100"
        return env


def start_jobs(jobs: list[str], device: str, env: dict[str, str]) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            workload_argv(spec, device),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for spec in jobs
    ]


def stop_jobs(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(
    monitor: Monitor, args: argparse.Namespace, fake: FakeDriver | None, runs: str
) -> dict[str, PtyCost]:
    """The monitor's rows, each name to its cost."""
    base = {**os.environ, "GPUMON_RUNS": runs}
    tree = monitor.tree or str(ROOT)
    # the tree first: never the installed gpumon, nor the working directory's (-P; cwd too, for --detach); what the
    # caller's PYTHONPATH held after it (a GPU box's textual and nvitop may live only there)
    base["PYTHONPATH"] = os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p)
    jobs: list[subprocess.Popen] = []
    try:
        if not monitor.launches_jobs:
            jobs = start_jobs(args.jobs, args.device, base)
        env = (
            fake.environment(base, None if monitor.launches_jobs else [p.pid for p in jobs])
            if fake
            else base
        )
        if monitor.detached:
            return measure_detached(monitor, args, env, tree)
        return {
            monitor.name: run_in_pty(
                monitor.argv,
                env,
                args.warmup,
                args.seconds,
                monitor.quit_keys,
                args.cols,
                args.rows,
                cwd=tree,
            )
        }
    finally:
        stop_jobs(jobs)


def measure_detached(
    monitor: Monitor, args: argparse.Namespace, env: dict[str, str], tree: str
) -> dict[str, PtyCost]:
    """A detached run: its runner alone for --seconds after --warmup, then with one ``gpumon attach`` in a pty for as
    long after the viewer's own warm-up; ``gpumon stop`` ends it."""
    started = subprocess.run(
        monitor.argv, env=env, cwd=tree, capture_output=True, text=True, check=True, timeout=120
    )
    out = json.loads(started.stdout)
    run_dir, runner = out["run"], int(out["runner_pid"])
    names = dict(zip((RUNNER, VIEWER, WATCHED, BOTH), monitor.names))
    try:
        time.sleep(args.warmup)
        runner_threads = thread_names(runner)
        time.sleep(1.0)
        before = snapshot(runner)
        time.sleep(args.seconds)
        alone = _cost(before, snapshot(runner), runner_threads)
        viewer = PtyProgram(
            [sys.executable, "-P", "-m", "gpumon", "attach", run_dir],
            env,
            args.cols,
            args.rows,
            tree,
        )
        try:
            seen, (runner0, runner1) = viewer.measure(args.warmup, args.seconds, also=runner)
            watched = _cost(runner0, runner1, runner_threads)
        finally:
            exit_status = viewer.quit(b"q")
        seen = replace(seen, exit_status=exit_status)
        both = replace(
            watched,
            cpu_pct=watched.cpu_pct + seen.cpu_pct,
            rss_mib=watched.rss_mib + seen.rss_mib,
            bytes_per_s=seen.bytes_per_s,
            threads=(),
        )
    finally:
        subprocess.run(
            [sys.executable, "-P", "-m", "gpumon", "stop", run_dir],
            env=env,
            cwd=tree,
            capture_output=True,
            timeout=120,
        )
    return {names[RUNNER]: alone, names[VIEWER]: seen, names[WATCHED]: watched, names[BOTH]: both}


def _cost(before, after, thread_names: dict[int, str]) -> PtyCost:
    cpu, seconds, threads = cost_between(before, after, thread_names)
    return PtyCost(
        cpu, rss_mib(after.pid), seconds, 0.0, "running", "", threads, (before.wall, after.wall)
    )


def steps_per_s(runs: str, window: tuple[float, float]) -> float:
    """Steps recorded per second in the newest run under ``runs`` between two monotonic times (NaN: none)."""
    dirs = sorted(Path(runs).glob("*/run.json"), key=lambda p: p.stat().st_mtime)
    if not dirs or math.isnan(window[0]):
        return math.nan
    run = load_run(dirs[-1].parent)
    start, end = ((w * 1e9 - run.meta.t0_monotonic_ns) / 1e9 for w in window)
    return sum(start <= float(t) < end for t in run.columns("steps")["t"]) / (end - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--device", default="cpu", help="where the two jobs train: cpu (default) or cuda"
    )
    parser.add_argument(
        "--nvml",
        choices=("fake", "real", "off"),
        help="fake (default on cpu), real (default on cuda), or off",
    )
    parser.add_argument(
        "--jobs",
        nargs=2,
        metavar="SPEC",
        help=f"the two workloads (default {' '.join(CPU_JOBS)} on cpu, resnet50 vgg19 on cuda; "
        "fcn gemm: tiny CPU jobs at hundreds of steps a second)",
    )
    parser.add_argument(
        "--warmup", type=float, default=15.0, help="seconds before measuring (default 15)"
    )
    parser.add_argument(
        "--seconds", type=float, default=30.0, help="seconds measured per monitor (default 30)"
    )
    parser.add_argument("--cols", type=int, default=120)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument(
        "--only",
        action="append",
        metavar="REGEX",
        help="measure only monitors whose name matches this (re.search; repeatable)",
    )
    parser.add_argument(
        "--before",
        metavar="DIR",
        help="also measure each gpumon row from this source tree "
        "(e.g. `git worktree add DIR <commit>`), just before this checkout's, in this one run",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every monitor this many times, round after round "
        "(a busy box's load moves between monitors); the ratios are each round's, then their median",
    )
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    args.nvml = args.nvml or ("real" if cuda else "fake")
    args.jobs = args.jobs or (["resnet50", "vgg19"] if cuda else CPU_JOBS)

    print(
        f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f} at start; jobs {' + '.join(args.jobs)} "
        f"on {args.device}; NVML {args.nvml}{' (tests/fakenvml, FAKENVML_COSTS=h100)' if args.nvml == 'fake' else ''}; "
        f"pty {args.cols}x{args.rows}, {args.warmup:g} s warm-up, {args.seconds:g} s measured each"
    )
    rounds: list[dict[str, PtyCost]] = []
    with tempfile.TemporaryDirectory(prefix="gpumon-observer-") as work:
        fake = FakeDriver(Path(work)) if args.nvml == "fake" else None
        runs = str(Path(work) / "runs")
        for number in range(1, args.rounds + 1):
            if args.rounds > 1:
                print(
                    f"round {number} of {args.rounds} (load average {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
            rounds.append(measure_round(args, fake, runs))
    for number, results in enumerate(rounds, 1):
        if args.rounds > 1:
            print(f"round {number}:")
        for name, ratio in ratios(results).items():
            target = TARGETS.get(name.removesuffix(" (before)"))
            print(
                f"  {name} ÷ nvitop@0.25 s = {ratio:.2f}"
                + (f" (target <= {target})" if target is not None else "")
            )
    if args.rounds > 1:
        print(f"median of {args.rounds} rounds:")
        for name in ratios(rounds[0]):
            values = [ratios(results)[name] for results in rounds]
            cpu = statistics.median(results[name].cpu_pct for results in rounds)
            print(
                f"  {name}: CPU {cpu:.2f} % of one core, ÷ nvitop@0.25 s = {statistics.median(values):.2f} "
                f"({', '.join(f'{v:.2f}' for v in values)})"
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


def measure_round(
    args: argparse.Namespace, fake: FakeDriver | None, runs: str
) -> dict[str, PtyCost]:
    """Every monitor asked for, once, printed as it is measured."""
    results: dict[str, PtyCost] = {}
    for monitor in monitors(args.jobs, args.device, runs, args.nvml != "off", args.before):
        if args.only and not any(
            re.search(pattern, name) for pattern in args.only for name in monitor.names
        ):
            continue
        for name, cost in measure(monitor, args, fake, runs).items():
            results[name] = cost
            steps = (
                f"   {steps_per_s(runs, cost.window):5.0f} steps/s" if monitor.launches_jobs else ""
            )
            print(
                f"  {name:42} CPU {cost.cpu_pct:5.2f} % of one core   RSS {cost.rss_mib:4.0f} MiB   "
                f"terminal {cost.bytes_per_s / 1024:6.1f} KiB/s   exit {cost.exit_status}{steps}",
                flush=True,
            )
            if cost.exit_status not in (0, None) and math.isnan(
                cost.rss_mib
            ):  # gone before it was measured: why
                print(
                    "      " + "\n      ".join(cost.last_output.strip().splitlines()[-5:]),
                    flush=True,
                )
            for thread in (
                cost.threads if monitor.launches_jobs else ()
            ):  # where gpumon's CPU goes, thread by thread
                if thread.cpu_pct >= 0.005:
                    print(
                        f"      {thread.name:22} {thread.cpu_pct:5.2f} %  {thread.wakeups_per_s:5.1f} wake-ups/s  "
                        f"{thread.us_per_wakeup:6.0f} µs each",
                        flush=True,
                    )
    return results


def ratios(results: dict[str, PtyCost]) -> dict[str, float]:
    """Each gpumon row's CPU ÷ nvitop@0.25 s's, from one round ({} without nvitop@0.25 s)."""
    fast = results.get("nvitop --interval 0.25")
    if fast is None or not fast.cpu_pct > 0:
        return {}
    return {
        name: cost.cpu_pct / fast.cpu_pct
        for name, cost in results.items()
        if name.startswith("gpumon")
    }


if __name__ == "__main__":
    main()
