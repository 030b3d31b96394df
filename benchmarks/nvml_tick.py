"""What NVML costs gpumon's monitor, on the fake libnvidia-ml with the H100's per-call CPU costs.

    python benchmarks/nvml_tick.py [--seconds S] [--calls N] [--foreign 0,2,10] [--gpus 1,4] [--before DIR]

Prints, measured in this run:
  1. the fake's CPU per call with FAKENVML_COSTS=h100 beside the H100's measured medians (the
     table below, copied from tests/fakenvml/h100/nvml-call-costs.txt and gpm.txt), both
     through pynvml, as thread CPU time;
  2. the tick-cost table: the real Sampler at the default settings (100 ms interval, two
     workloads) for S seconds, every NVML call it made -> calls/s -> µs/call -> % of one core,
     with GPM on (an H100 on a saturated Gen5 link) and GPM off (the same link read through its
     wrapping 32-bit counters), and the whole monitor process's CPU beside it.
  3. with --foreign: the same GPM-on monitor with 0, 2, 10... other processes on the GPU (real
     sleepers the fake lists, with memory and SM samples), for this checkout and, with --before
     DIR, for another gpumon tree (e.g. `git archive <commit> | tar -x -C DIR`), in this one run.
  4. with --gpus: the monitor as the TUI runs it (the overview of every GPU on) on a box of 1, 4...
     fake H100s, the jobs on GPU 0 and two other processes on each other GPU, for this checkout
     and, with --before DIR, the other tree (one that has no overview reads GPU 0 only), in this run.
The measured code runs in a child whose LD_LIBRARY_PATH points at the fake (pynvml loads the
library by name). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakenvml import build as fake  # noqa: E402

SCENARIO = ROOT / "tests" / "fakenvml" / "scenarios" / "gen5_58GBps.txt"
NO_GPM = "fail nvmlGpmQueryDeviceSupport NOT_SUPPORTED"

# Median thread CPU µs per call on one H100 80GB HBM3, driver 580.159.04, through pynvml, with two
# jobs training (tests/fakenvml/h100/nvml-call-costs.txt) or a copy job running (gpm.txt).
H100_US = {
    "GetUtilizationRates": 1.254,
    "GetMemoryInfo": 5.79,
    "GetPowerUsage": 1.255,
    "GetTemperature": 1.42,
    "GetClockInfo SM": 1.46,
    "GetFieldValues PCIe x1": 158.5,  # gpm.txt: 155-162
    "GetFieldValues PCIe x2": 263.176,
    "GetPcieThroughput": 815.269,
    "GetComputeRunningProcesses": 61.526,
    "GetGraphicsRunningProcesses": 17.193,
    "GetProcessUtilization": 2310.971,
    "GpmSampleGet (busy)": 400.0,
    "GpmMetricsGet 20+21+2+3+10": 8.5,  # gpm.txt: 7-10
    "GpmMetricsGet 1+2+3+5+10+20+21": 1756.0,
}

PER_CALL = r"""
import json, statistics, sys, time
import pynvml as nv
calls = int(sys.argv[1])
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)
samples = [nv.nvmlGpmSampleAlloc() for _ in range(2)]
nv.nvmlGpmSampleGet(h, samples[0])
nv.nvmlGpmSampleGet(h, samples[1])

def metrics(ids):
    g = nv.c_nvmlGpmMetricsGet_t()
    g.version, g.numMetrics, g.sample1, g.sample2 = nv.NVML_GPM_METRICS_GET_VERSION, len(ids), samples[0], samples[1]
    for i, m in enumerate(ids):
        g.metrics[i].metricId = m
    nv.nvmlGpmMetricsGet(g)

def utilization():
    try:
        nv.nvmlDeviceGetProcessUtilization(h, 0)
    except (nv.NVMLError_NotFound, nv.NVMLError_InsufficientSize):  # none new; or one more arrived meanwhile
        pass

CASES = {
    "GetUtilizationRates": lambda: nv.nvmlDeviceGetUtilizationRates(h),
    "GetMemoryInfo": lambda: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2),
    "GetPowerUsage": lambda: nv.nvmlDeviceGetPowerUsage(h),
    "GetTemperature": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
    "GetClockInfo SM": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
    "GetFieldValues PCIe x1": lambda: nv.nvmlDeviceGetFieldValues(h, [198]),
    "GetFieldValues PCIe x2": lambda: nv.nvmlDeviceGetFieldValues(h, [198, 197]),
    "GetPcieThroughput": lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES),
    "GetComputeRunningProcesses": lambda: nv.nvmlDeviceGetComputeRunningProcesses(h),
    "GetGraphicsRunningProcesses": lambda: nv.nvmlDeviceGetGraphicsRunningProcesses(h),
    "GetProcessUtilization": utilization,
    "GpmSampleGet (busy)": lambda: nv.nvmlGpmSampleGet(h, samples[1]),
    "GpmMetricsGet 20+21+2+3+10": lambda: metrics([20, 21, 2, 3, 10]),
    "GpmMetricsGet 1+2+3+5+10+20+21": lambda: metrics([1, 2, 3, 5, 10, 20, 21]),
}
out = {}
for name, fn in CASES.items():
    n = max(5, calls if "ProcessUtilization" not in name and "1+2" not in name else calls // 10)
    costs = []
    for _ in range(n):
        began = time.thread_time_ns()
        fn()
        costs.append((time.thread_time_ns() - began) / 1000)
    out[name] = statistics.median(costs)
print(json.dumps(out))
"""

MONITOR = r"""
import functools, json, sys, time
import pynvml as nv

seconds, pids = float(sys.argv[1]), [int(p) for p in sys.argv[2:]]
spent, depth = {}, [0]

def timed(name, fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if depth[0]:  # a pynvml wrapper calling another (TemperatureV -> TemperatureV1): count the outer one
            return fn(*args, **kwargs)
        depth[0] += 1
        began = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            n, ns = spent.get(name, (0, 0))
            spent[name] = (n + 1, ns + time.thread_time_ns() - began)
    return call

for name in dir(nv):
    if (name.startswith("nvmlDevice") or name.startswith("nvmlGpm")) and callable(getattr(nv, name)):
        setattr(nv, name, timed(name[4:], getattr(nv, name)))

# gpumon calls some C functions itself (the per-process utilisation read, in one call where pynvml makes two)
function_pointer = nv._nvmlGetFunctionPointer
nv._nvmlGetFunctionPointer = lambda name: function_pointer(name) if depth[0] else timed(name[4:], function_pointer(name))

from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.capture.sampler import Sampler
from gpumon.core.sources.host import HostSource
from gpumon.core.sources.nvml import NvmlSource

import gpumon, inspect, os
source = NvmlSource()
assert source.open().available
info = source.device_info()
spent.clear()
# GPUMON_OVERVIEW=1: the TUI's sampler, which reads every GPU of the box (a tree without it reads GPU 0 only)
tui = os.environ.get("GPUMON_OVERVIEW") == "1" and "overview" in inspect.signature(Sampler).parameters
sampler = Sampler(Bus(), RunClock.start(), HostSource(), source, 0.1, lambda: {"A": pids[0], "B": pids[1]},
                  **({"overview": True} if tui else {}))
cpu0, wall0 = time.process_time(), time.monotonic()
sampler.start()
time.sleep(seconds)
sampler.stop()
sampler.join()
cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
print(json.dumps({"info": info, "spent": spent, "wall": wall, "cpu": cpu, "ticks": sampler.ticks,
                  "gpumon": gpumon.__file__}))
"""


def run_child(
    code: str, lib: Path, scenario: Path, *argv: str, tree: Path = ROOT, overview: bool = False
) -> dict:
    env = fake.environment(lib, scenario)
    env["FAKENVML_COSTS"] = "h100"
    env["GPUMON_OVERVIEW"] = "1" if overview else "0"
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    # cwd=tree: `python -c` puts the working directory first on sys.path, ahead of PYTHONPATH, so a child run
    # from another checkout would import that checkout's gpumon, not ``tree``'s
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True, cwd=tree
    )
    if done.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "gpumon" in result and not Path(result["gpumon"]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"benchmark child imported {result['gpumon']}, not the gpumon of {tree}")
    return result


def print_per_call(costs: dict[str, float]) -> None:
    print(
        "1. CPU per call, fake with FAKENVML_COSTS=h100 vs the H100 (median thread CPU µs, through pynvml)"
    )
    print(f"   {'call':34} {'H100':>9} {'fake':>9} {'fake/H100':>9}")
    for name, h100 in H100_US.items():
        print(f"   {name:34} {h100:9.1f} {costs[name]:9.1f} {costs[name] / h100:9.2f}")


def print_budget(title: str, r: dict) -> float:
    info = r["info"]
    poll = f", counters polled every {info['pcie_poll_ms']} ms" if info["pcie_poll_ms"] else ""
    print(
        f"   {title}: PCIe via {info['pcie_method']}{poll}; GPM metrics: {', '.join(info['gpm_metrics']) or 'none'}"
    )
    print(f"   {'call':34} {'calls/s':>8} {'µs/call':>9} {'% core':>7}")
    total = 0.0
    for name, (n, ns) in sorted(r["spent"].items(), key=lambda kv: -kv[1][1]):
        share = ns / 1e9 / r["wall"] * 100
        total += share
        print(f"   {name:34} {n / r['wall']:8.1f} {ns / n / 1000:9.1f} {share:7.3f}")
    whole = r["cpu"] / r["wall"] * 100
    print(f"   {'all NVML calls':34} {'':8} {'':9} {total:7.3f}")
    print(
        f"   whole monitor process (sampler, psutil host/process reads, NVML): {whole:.3f} % of one core,"
        f" {r['ticks']} ticks in {r['wall']:.1f} s"
    )
    return total


def nvml_share(r: dict) -> float:
    """% of one core spent in NVML calls over the run."""
    return sum(ns for _, ns in r["spent"].values()) / 1e9 / r["wall"] * 100


@dataclass(frozen=True)
class Bench:
    """What each measured monitor run shares: the fake library, the scenario (the device and our two jobs), the
    jobs' PIDs, how long each run lasts, the gpumon trees measured, a scratch folder."""

    lib: Path
    scenario: str
    pids: tuple[int, int]
    seconds: float
    trees: dict[str, Path]
    tmp: Path


def measure_row(
    bench: Bench,
    n: int,
    n_sleepers: int,
    extra: Callable[[list[subprocess.Popen]], str],
    **kw: bool,
) -> dict[str, dict]:
    """Each tree's monitor once on the bench's scenario plus ``extra(sleepers)`` (n_sleepers real processes it may
    list), printed as the table's row ``n``."""
    sleepers = [
        subprocess.Popen(["sleep", str(len(bench.trees) * bench.seconds + 300)])
        for _ in range(n_sleepers)
    ]
    try:
        written = fake.write_scenario(bench.tmp / f"row_{n}.txt", bench.scenario + extra(sleepers))
        row = {
            name: run_child(
                MONITOR,
                bench.lib,
                written,
                str(bench.seconds),
                *map(str, bench.pids),
                tree=tree,
                **kw,
            )
            for name, tree in bench.trees.items()
        }
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    print(
        f"   {n:6d} "
        + " ".join(
            f"{nvml_share(r):16.3f} {r['cpu'] / r['wall'] * 100:16.3f}" for r in row.values()
        )
    )
    return row


def foreign_costs(bench: Bench, counts: list[int]) -> None:
    """Section 3: the GPM-on monitor with N other GPU processes, for each gpumon tree, in this run."""
    print(
        f"3. the same monitor (GPM on) with other processes on the GPU, {bench.seconds:.0f} s each"
    )
    print_header("others", bench.trees)
    rows: dict[int, dict[str, dict]] = {}
    for n in counts:

        def others(sleepers: list[subprocess.Popen]) -> str:
            return "".join(
                f"proc pid={p.pid} mem_mib={512 * (i + 1)} sm_util={1 + i % 5}\n"
                for i, p in enumerate(sleepers)
            )

        rows[n] = measure_row(bench, n, n, others)
    print_ratio(rows, bench.trees, "others")


def gpu_costs(bench: Bench, counts: list[int]) -> None:
    """Section 4: the TUI's monitor (overview on, GPM on) on a box of N GPUs, for each gpumon tree, in this run."""
    print(
        f"4. the TUI's monitor (overview of every GPU on, GPM on) on a box of N GPUs, {bench.seconds:.0f} s each;"
        " two other processes on each GPU that is not the jobs'"
    )
    print_header("GPUs", bench.trees)
    device = next(line for line in bench.scenario.splitlines() if line.startswith("device "))
    rows: dict[int, dict[str, dict]] = {}
    for n in counts:

        def more_gpus(sleepers: list[subprocess.Popen], n: int = n) -> str:
            return "".join(
                device.replace("uuid=GPU-fake5h100-", f"uuid=GPU-fake5h10{k}-")
                + "\n"
                + "".join(
                    f"proc pid={p.pid} mem_mib=4096 sm_util=30\n"
                    for p in sleepers[2 * (k - 1) : 2 * k]
                )
                for k in range(1, n)
            )

        rows[n] = measure_row(bench, n, 2 * (n - 1), more_gpus, overview=True)
    print_ratio(rows, bench.trees, "GPUs")
    most, after = max(rows), list(bench.trees)[-1]
    print_budget(f"{after}, {most} GPUs, every call summed over the GPUs", rows[most][after])


def print_header(what: str, trees: dict[str, Path]) -> None:
    """The column titles of a table of rows by ``what`` (others, GPUs): each tree's NVML % and process %."""
    print(
        f"   {what:>6} "
        + " ".join(f"{name + ' NVML %':>16} {name + ' proc %':>16}" for name in trees)
    )


def print_ratio(rows: dict[int, dict[str, dict]], trees: dict[str, Path], what: str) -> None:
    """With two trees: the after tree's NVML share over the before tree's, row by row."""
    if len(trees) == 2:
        before, after = trees
        print(
            f"   ratio {after}/{before} of NVML % of one core: "
            + ", ".join(
                f"{n} {what} {nvml_share(r[after]) / nvml_share(r[before]):.2f}"
                for n, r in rows.items()
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="length of each monitoring run (default 20)"
    )
    parser.add_argument(
        "--calls", type=int, default=200, help="calls timed per NVML function (default 200)"
    )
    parser.add_argument(
        "--foreign",
        default=None,
        metavar="N,N,...",
        help="also measure with this many other GPU processes (e.g. 0,2,10)",
    )
    parser.add_argument(
        "--gpus",
        default=None,
        metavar="N,N,...",
        help="also measure the TUI's monitor on a box of this many GPUs (e.g. 1,4; at most 8)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --foreign or --gpus: a second gpumon tree to measure the same way (the code before"
        " a change)",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.foreign.split(",")] if args.foreign else []
    gpus = [int(n) for n in args.gpus.split(",")] if args.gpus else []
    trees = {"before": args.before, "after": ROOT} if args.before else {"this": ROOT}
    with tempfile.TemporaryDirectory() as tmp:
        lib = fake.build(Path(tmp))
        sleepers = [subprocess.Popen(["sleep", str(2 * args.seconds + 300)]) for _ in range(2)]
        try:
            a, b = (p.pid for p in sleepers)
            procs = f"proc pid={a} mem_mib=1024 sm_util=45\nproc pid={b} mem_mib=2048 sm_util=35\n"
            lines = (
                SCENARIO.read_text()
                .replace("gpu_util=100", "gpu_util=90")
                .splitlines(keepends=True)
            )
            base = "".join(
                line for line in lines if not line.startswith("proc ")
            )  # our two sleepers instead
            gpm_on = fake.write_scenario(Path(tmp) / "gpm_on.txt", base + procs)
            gpm_off = fake.write_scenario(Path(tmp) / "gpm_off.txt", base + procs + NO_GPM)
            costs = run_child(PER_CALL, lib, gpm_on, str(args.calls))
            on = run_child(MONITOR, lib, gpm_on, str(args.seconds), str(a), str(b))
            off = run_child(MONITOR, lib, gpm_off, str(args.seconds), str(a), str(b))
            header = (
                f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, fake libnvidia-ml with H100"
                f" costs; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
            )
            if counts or gpus:
                print(header)
            bench = Bench(lib, base + procs, (a, b), args.seconds, trees, Path(tmp))
            if counts:
                foreign_costs(bench, counts)
            if gpus:
                gpu_costs(bench, gpus)
        finally:
            for p in sleepers:
                p.kill()
                p.wait()
    print(
        f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, fake libnvidia-ml with H100 costs;"
        f" load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print_per_call(costs)
    print(
        "2. NVML CPU per second of monitoring, default settings (100 ms interval, 2 workloads),"
        f" {args.seconds:.0f} s each"
    )
    gpm = print_budget("GPM on (H100, Gen5 x16 at 58 GB/s)", on)
    counters = print_budget("GPM off (same link, 32-bit counters)", off)
    before = 3.68  # tests/fakenvml/h100/nvml-call-costs.txt: gpumon 9ea01fb at ~10 Hz on the H100
    print(
        f"   NVML % of one core: GPM on {gpm:.2f}, GPM off {counters:.2f}; gpumon 9ea01fb on the H100: {before:.2f}"
    )


if __name__ == "__main__":
    main()
