"""NvmlSource and `gpumon doctor` against the scripted fake libnvidia-ml, through the real pynvml.

pynvml loads libnvidia-ml.so.1 by name, so every NVML check runs in a child interpreter
whose LD_LIBRARY_PATH points at the fake; most children step the fake's clock themselves
(FAKENVML_CLOCK), which makes time-dependent values exact and needs no sleeping.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpumon.core.records.model import GPM_COLUMNS
from gpumon.checks import doctor
from gpumon.core.sources.nvml import pid_namespace_hint
from tests.fakenvml import build as fake
from tests.helpers import nvml_library_installed

needs_cc = pytest.mark.skipif(
    fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml"
)
CHILD_TIMEOUT_S = 60

SCRIPTS = (
    Path(__file__).resolve().parents[1] / "scripts"
)  # the children's files (tests/scripts/nvml_*.py)
# A child given as a few lines (``run_child``) starts with what every child has (tests/scripts/nvml_prelude.py)
PRELUDE = f"""
import ctypes, dataclasses, json, logging, math, os, sys
sys.path.insert(0, {str(SCRIPTS)!r})
from nvml_prelude import NvmlSource, clock, emit, fake, pynvml, row
"""

# What a child that calls pynvml itself starts with: the library up and ``h``, GPU 0's handle; ``PER_PROCESS`` adds
# ``ours``, gpumon's per-process utilisation reader.
HANDLE = """
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
"""
PER_PROCESS = (
    HANDLE
    + """
from gpumon.core.sources.nvmlquery import process_utilization
ours = process_utilization(pynvml)
"""
)

DEVICE = (
    'device name="NVIDIA Fake A100-SXM4-40GB" uuid=GPU-11111111-2222-3333-4444-555555555555 '
    "mem_total_mib=40960 pcie_gen=4 pcie_width=16 util_period_ms=100"
)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if fake.compiler() is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml")
    out = tmp_path_factory.mktemp("fakenvml")
    return fake.build_all(out)


def run_child(
    tmp_path: Path, lib: Path | None, scenario: str | None, code: str, **env: str
) -> dict:
    """Run PRELUDE + code in a child that loads ``lib``; return what it emit()-ed."""
    return _child(tmp_path, lib, scenario, [sys.executable, "-c", PRELUDE + code], env)


def run_opened(
    tmp_path: Path, lib: Path, scenario: str, code: str, gpu: int | None = None, **env: str
) -> dict:
    """``run_child`` of ``code`` with ``s``, an ``NvmlSource(gpu)`` already opened (``status``: what open() said)."""
    return run_child(
        tmp_path, lib, scenario, f"s = NvmlSource({gpu})\nstatus = s.open()\n" + code, **env
    )


def run_script(
    tmp_path: Path, lib: Path, scenario: str, name: str, *args: object, **env: str
) -> dict:
    """Run tests/scripts/``name`` with ``args`` in a child that loads ``lib``; return what it emit()-ed."""
    argv = [sys.executable, str(SCRIPTS / name), *map(str, args)]
    return _child(tmp_path, lib, scenario, argv, env)


def _child(
    tmp_path: Path, lib: Path | None, scenario: str | None, argv: list[str], env: dict[str, str]
) -> dict:
    script = (
        fake.write_scenario(tmp_path / "scenario.txt", scenario) if scenario is not None else None
    )
    clock = tmp_path / "clock"
    fake.Clock(clock)
    environ = fake.environment(lib, script, clock)
    environ.update(env)
    done = subprocess.run(
        argv, env=environ, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
    )
    results = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (
        f"child failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    return json.loads(results[-1])


@pytest.fixture
def sleepers() -> list[subprocess.Popen]:
    """Real processes whose PIDs a scenario can list as ours or foreign."""
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    yield procs
    for p in procs:
        p.kill()
        p.wait(timeout=10)


# -- device metrics ---------------------------------------------------------------------------


@needs_cc
def test_scripted_values_come_back(libs: dict[str, Path], tmp_path: Path) -> None:
    scenario = f"""
        driver 550.54.15
        {DEVICE} gpu_util=50 mem_util=20 mem_used_mib=1000 power_w=123.4 temp_c=61 sm_clock_mhz=1410
        at 0.5 gpu_util=80 mem_used_mib=2048.5 power_w=250 temp_c=70 sm_clock_mhz=1980 pcie_gen=3 pcie_width=8
    """
    out = run_opened(
        tmp_path,
        libs["full"],
        scenario,
        """
first = s.sample(1.0)
clock(0.6)
soon = s.sample(1.6)  # memory, power and temperature are read once a second: this tick carries the first reading
emit(status=dataclasses.asdict(status), first=row(first), soon=row(soon), second=row(s.sample(2.0)),
     info=s.device_info())
""",
    )
    assert out["status"]["available"] is True and out["status"]["name"] == "nvml"
    first, second = out["first"], out["second"]
    assert first["t"] == 1.0
    assert (first["gpu_util"], first["mem_util"], first["mem_used_mib"]) == (50.0, 20.0, 1000.0)
    assert first["mem_total_mib"] == 40960.0
    assert first["power_w"] == pytest.approx(123.4)
    assert (first["temp_c"], first["sm_clock_mhz"]) == (61.0, 1410.0)
    assert math.isnan(first["pcie_rx_bps"]) and math.isnan(
        first["pcie_tx_bps"]
    )  # first counter reading
    soon = out["soon"]
    assert (soon["gpu_util"], soon["sm_clock_mhz"]) == (80.0, 1980.0)  # fast: read every tick
    assert (soon["mem_used_mib"], soon["temp_c"]) == (1000.0, 61.0)
    assert soon["power_w"] == pytest.approx(123.4)
    assert (second["gpu_util"], second["mem_used_mib"], second["power_w"]) == (80.0, 2048.5, 250.0)
    assert (second["temp_c"], second["sm_clock_mhz"]) == (70.0, 1980.0)
    assert out["info"] == {
        "index": 0,
        "name": "NVIDIA Fake A100-SXM4-40GB",
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "driver": "550.54.15",
        "compute_mode": None,
        "pcie_gen": 3,
        "pcie_width": 8,
        "mem_total_mib": 40960.0,
        "pcie_method": "counters",
        "pcie_max_bps": 1.969e9 * 16,
        "pcie_counter_bits": 32,
        "pcie_poll_ms": 81.6,
        "gpm_metrics": [],
        "gpm_reason": "GPM not supported on this GPU (Hopper or newer only)",
        "unsupported": [],
    }


@needs_cc
def test_64bit_pcie_counters_are_differenced_over_the_interval(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = f"""
        {DEVICE} pcie_rx_bps=3e9 pcie_tx_bps=1.5e9 pcie_counter_bits=64 pcie_counter_step_ms=50
        at 1.0 pcie_rx_bps=6e9 pcie_tx_bps=0
    """
    out = run_opened(
        tmp_path,
        libs["full"],
        scenario,
        """
rows = []
for t in (0.2, 0.45, 0.9, 1.3):
    clock(t)
    rows.append(row(s.sample(t)))
from gpumon.core.capture.sampler import auto_interval_ms
emit(rows=rows, method=s.device_info()["pcie_method"], poll=s.pcie_poll_period_s, auto=auto_interval_ms(s))
""",
    )
    first, steady, _, across = out["rows"]
    assert (
        out["method"] == "counters" and out["poll"] is None
    )  # 64-bit counters never wrap: no polling
    assert out["auto"] == 100, "the counters give PCIe bytes each tick"
    assert math.isnan(first["pcie_rx_bps"])
    # Counters are whole bytes: a difference is exact to one byte per interval.
    assert steady["pcie_rx_bps"] == pytest.approx(3e9, abs=1 / 0.25)
    assert steady["pcie_tx_bps"] == pytest.approx(1.5e9, abs=1 / 0.25)
    assert across["pcie_rx_bps"] == pytest.approx((3e9 * 0.1 + 6e9 * 0.3) / 0.4, abs=1 / 0.4)
    assert across["pcie_tx_bps"] == pytest.approx(1.5e9 * 0.1 / 0.4, abs=1 / 0.4)


@needs_cc
def test_throughput_fallback_when_counters_are_not_supported(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = f"""
        {DEVICE} pcie_rx_bps=4194304 pcie_tx_bps=1048576
        fail field:198 NOT_SUPPORTED
        fail field:197 NOT_SUPPORTED
    """
    out = run_opened(
        tmp_path,
        libs["full"],
        scenario,
        """
from gpumon.core.capture.sampler import auto_interval_ms
emit(sample=row(s.sample(0.0)), info=s.device_info(), auto=auto_interval_ms(s))
""",
    )
    assert out["info"]["pcie_method"] == "throughput"
    assert out["auto"] == 200, (
        "PCIe once a second: a tick between reads only utilisation and the SM clock"
    )
    assert out["sample"]["pcie_rx_bps"] == 4194304.0  # KB/s × 1024
    assert out["sample"]["pcie_tx_bps"] == 1048576.0
    assert out["info"]["unsupported"] == []


@needs_cc
def test_no_pcie_at_all_is_nan_and_listed(libs: dict[str, Path], tmp_path: Path) -> None:
    scenario = f"""
        {DEVICE} gpu_util=33
        fail nvmlDeviceGetFieldValues NOT_SUPPORTED
        fail nvmlDeviceGetPcieThroughput NOT_SUPPORTED
    """
    out = run_opened(
        tmp_path,
        libs["full"],
        scenario,
        """
emit(sample=row(s.sample(0.0)), info=s.device_info())
""",
    )
    assert out["info"]["pcie_method"] is None
    assert {"pcie_rx_bps", "pcie_tx_bps"} <= set(out["info"]["unsupported"])
    assert math.isnan(out["sample"]["pcie_rx_bps"]) and out["sample"]["gpu_util"] == 33.0


@needs_cc
def test_not_supported_fields_are_nan_logged_once_and_the_rest_still_there(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = f"""
        {DEVICE} gpu_util=50 mem_used_mib=100 power_w=200 temp_c=60 sm_clock_mhz=1500
        fail nvmlDeviceGetPowerUsage NOT_SUPPORTED
        fail nvmlDeviceGetTemperatureV NOT_SUPPORTED
        fail nvmlDeviceGetClockInfo NO_PERMISSION
    """
    out = run_child(
        tmp_path,
        libs["full"],
        scenario,
        """
records = []
handler = logging.Handler()
handler.emit = records.append
logging.getLogger("gpumon").addHandler(handler)
logging.getLogger("gpumon").setLevel(logging.INFO)
s = NvmlSource()
s.open()
before = s.device_info()["unsupported"]
rows = [row(s.sample(float(i))) for i in range(5)]
emit(rows=rows, before=before, info=s.device_info(), messages=[r.getMessage() for r in records])
""",
    )
    last = out["rows"][-1]
    assert (
        math.isnan(last["power_w"])
        and math.isnan(last["temp_c"])
        and math.isnan(last["sm_clock_mhz"])
    )
    assert (last["gpu_util"], last["mem_used_mib"]) == (50.0, 100.0)
    assert (
        out["before"] == out["info"]["unsupported"] == ["power_w", "sm_clock_mhz", "temp_c"]
    )  # known at open()
    power_logs = [m for m in out["messages"] if m.startswith("nvml: power not available")]
    assert len(power_logs) == 1, out["messages"]


@needs_cc
def test_gpu_lost_turns_the_source_unavailable_without_raising(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = f"""
        {DEVICE} gpu_util=10
        proc pid=4242 mem_mib=10 sm_util=5
        lost_at 0.5
    """
    out = run_opened(
        tmp_path,
        libs["full"],
        scenario,
        """
before = row(s.sample(0.2))
clock(0.6)
during = row(s.sample(0.6))
after = [row(s.sample(0.7)), s.process_metrics([4242]), sorted(s.all_gpu_pids())]
status = dataclasses.asdict(s.status)
s.close()
emit(before=before, during=during, after=after, status=status, info=s.device_info())
""",
    )
    assert out["before"]["gpu_util"] == 10.0
    assert out["during"] is None
    assert out["after"] == [None, {}, []]
    assert (
        out["status"]["available"] is False and out["status"]["reason"] == "unavailable: GPU lost"
    )
    assert out["info"]["name"] == "NVIDIA Fake A100-SXM4-40GB" and out["info"]["pcie_width"] == 16


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("DRIVER_NOT_LOADED", "unavailable: NVIDIA driver not loaded"),
        ("LIB_RM_VERSION_MISMATCH", "unavailable: driver/library version mismatch"),
        ("UNKNOWN", "unavailable: nvmlInit failed: Unknown Error"),
    ],
)
@needs_cc
def test_init_failure_is_unavailable_with_a_reason(
    libs: dict[str, Path], tmp_path: Path, code: str, reason: str
) -> None:
    scenario = f"""
        {DEVICE}
        fail nvmlInit {code}
    """
    out = run_opened(
        tmp_path,
        libs["full"],
        scenario,
        """
emit(status=dataclasses.asdict(status), sample=row(s.sample(0.0)), procs=s.process_metrics([1]), info=s.device_info())
""",
    )
    assert out["status"]["available"] is False
    assert out["status"]["reason"].startswith(reason)
    assert out["sample"] is None and out["procs"] == {} and out["info"] == {}


@pytest.mark.skipif(
    nvml_library_installed(), reason="the dynamic linker finds a libnvidia-ml of its own here"
)
def test_no_library_at_all(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run_child(
        tmp_path,
        empty,
        None,
        """
s = NvmlSource()
emit(status=dataclasses.asdict(s.open()), sample=row(s.sample(0.0)))
""",
    )
    assert out["status"] == {
        "name": "nvml",
        "available": False,
        "detail": {"nvml_error": 12},
        "reason": "unavailable: libnvidia-ml.so.1 not found (no NVIDIA driver installed)",
    }
    assert out["sample"] is None


@needs_cc
def test_gpu_selection_by_index_and_cuda_visible_devices(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = f"""
        {DEVICE}
        device name="Second" uuid=GPU-second mem_total_mib=8192
    """
    out = run_child(
        tmp_path,
        libs["full"],
        scenario,
        """
missing = NvmlSource(3)
second = NvmlSource(1)
by_env = NvmlSource()
emit(missing=missing.open().reason, second=(second.open().available, second.device_info()["name"]),
     by_env=(by_env.open().available, by_env.device_info()["index"]))
""",
        CUDA_VISIBLE_DEVICES="GPU-second",
    )
    assert out["missing"] == "unavailable: no GPU with index 3 (2 found)"
    assert out["second"] == [True, "Second"]
    assert out["by_env"] == [True, 1]


# -- the box's other GPUs (the overview) ------------------------------------------------------

# The calls the overview may make on a GPU that is not the jobs' (µs each on the H100, or ~80 µs for the
# lists): never PCIe (fields 263 µs, throughput 815 µs), GPM (400 µs) or per-process utilisation (2,311 µs).
CHEAP_CALLS = {
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTemperatureV1",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
}
COUNT_CALLS = """
import collections, functools
calls = collections.Counter()
index = pynvml.nvmlDeviceGetIndex
def counted(name, fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if args and isinstance(args[0], pynvml.c_nvmlDevice_t):  # a call on a device: on which one
            calls[(name, index(args[0]))] += 1
        return fn(*args, **kwargs)
    return call
for name in dir(pynvml):
    if name.startswith(("nvmlDevice", "nvmlGpm")) and callable(getattr(pynvml, name)):
        setattr(pynvml, name, counted(name, getattr(pynvml, name)))
"""


def four_gpus(lost_at: str = "") -> str:
    return "\n".join(
        f'device name="GPU number {k}" uuid=GPU-box-{k} gpu_util={20 * k} mem_util={k} mem_used_mib={1000 * k} '
        f"mem_total_mib=81559 power_w={100 + k} temp_c={30 + k} sm_clock_mhz={1000 + k} pcie_rx_bps=9e9 gpm=1"
        + (f"\nlost_at {lost_at}" if k == 3 and lost_at else "")
        + f"\nproc pid={4000 + k} mem_mib=64"
        + f"\nproc pid={4100 + k} mem_mib=64" * (k == 2)
        for k in range(4)
    )


@needs_cc
def test_overview_reads_every_gpu_with_cheap_calls_only(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    out = run_child(
        tmp_path,
        libs["full"],
        four_gpus(),
        COUNT_CALLS
        + """
s = NvmlSource(1)
s.open()
clock(0.4)
s.sample(0.4)
clock(0.5)
sample = s.sample(0.5)  # GPM's PCIe: the mean since the last sample
calls.clear()
gpus = s.overview(0.5, sample, 7)
emit(gpus=[dataclasses.asdict(g) for g in gpus], calls=[[n, i, c] for (n, i), c in calls.items()])
""",
    )
    gpus = out["gpus"]
    assert [g["index"] for g in gpus] == [0, 1, 2, 3] and [g["jobs"] for g in gpus] == [
        False,
        True,
        False,
        False,
    ]
    assert [g["uuid"] for g in gpus] == [f"GPU-box-{k}" for k in range(4)]
    assert gpus[1]["processes"] == 7  # the jobs' GPU: what this tick read, not re-read
    assert gpus[1]["sample"]["pcie_rx_bps"] == pytest.approx(9e9)
    for k in (0, 2, 3):
        sample = gpus[k]["sample"]
        assert gpus[k]["processes"] == (2 if k == 2 else 1) and gpus[k]["name"] == f"GPU number {k}"
        assert (
            sample["gpu_util"],
            sample["mem_util"],
            sample["mem_used_mib"],
            sample["power_w"],
            sample["temp_c"],
            sample["sm_clock_mhz"],
        ) == (20 * k, k, 1000 * k, 100 + k, 30 + k, 1000 + k)
        assert math.isnan(sample["pcie_rx_bps"]) and math.isnan(
            sample["sm_active_pct"]
        )  # jobs' GPU only
    made = {
        (name.removesuffix("_v3").removesuffix("_v2"), index) for name, index, _ in out["calls"]
    }
    assert {index for _, index in made} == {
        0,
        2,
        3,
    }  # nothing on the jobs' GPU: this tick read it already
    assert {name for name, _ in made} <= CHEAP_CALLS, made


@needs_cc
def test_overview_survives_a_lost_gpu_and_is_empty_with_one(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    out = run_opened(
        tmp_path,
        libs["full"],
        four_gpus(lost_at="1.0"),
        """
before = s.overview(0.5, s.sample(0.5), 1)
clock(1.5)
after = s.overview(1.5, s.sample(1.5), 1)
emit(before=[g.sample is not None for g in before], after=[g.sample is not None for g in after],
     processes=[g.processes for g in after], available=s.status.available, sample=s.sample(2.0) is not None)
""",
        gpu=0,
    )
    assert out["before"] == [True] * 4
    assert out["after"] == [True, True, True, False] and out["processes"] == [1, 1, 2, None]
    assert out["available"] and out["sample"]  # another GPU lost: the jobs' GPU is still read
    one = run_opened(
        tmp_path,
        libs["full"],
        DEVICE,
        """
emit(gpus=len(s.overview(0.5, s.sample(0.5), 0)))
""",
    )
    assert one["gpus"] == 0


@needs_cc
def test_sampler_publishes_the_overview_at_the_process_cadence_only(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    out = run_child(
        tmp_path,
        libs["full"],
        four_gpus(),
        """
from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.records.model import DeviceSample, GpuOverview, HostSample
from gpumon.core.capture.sampler import Sampler
from gpumon.core.sources.host import HostSource
counts = {}
for overview in (True, False):
    s = NvmlSource(2)
    s.open()
    bus, seen = Bus(), []
    bus.subscribe(seen.append)
    sampler = Sampler(bus, RunClock.start(), HostSource(), s, 0.1, lambda: {}, overview=overview)
    for tick in range(22):
        sampler.ticks = tick
        sampler.tick()
    counts[str(overview)] = {kind.__name__: sum(isinstance(x, kind) for x in seen)
                             for kind in (DeviceSample, GpuOverview, HostSample)}
    if overview:
        at = max(i for i, x in enumerate(seen) if isinstance(x, GpuOverview))
        last = seen[at]
        device = [x for x in seen[:at] if isinstance(x, DeviceSample)][-1]
        jobs = [g for g in last.gpus if g.jobs]
        same = len(jobs) == 1 and jobs[0].index == 2 and jobs[0].sample is device
    s.close()
emit(counts=counts, same=same)
""",
    )
    # 22 ticks at 100 ms: a device sample each, the host and the overview on ticks 0, 10 and 20
    assert out["counts"]["True"] == {"DeviceSample": 22, "GpuOverview": 3, "HostSample": 3}
    assert out["counts"]["False"] == {
        "DeviceSample": 22,
        "GpuOverview": 0,
        "HostSample": 3,
    }  # headless: not read
    assert out["same"]  # the jobs' GPU in the overview is that tick's device sample


# -- per-process metrics ----------------------------------------------------------------------


@needs_cc
def test_process_metrics_attributed_to_our_pids_only(
    libs: dict[str, Path], tmp_path: Path, sleepers: list[subprocess.Popen]
) -> None:
    a, b, foreign = (p.pid for p in sleepers)
    scenario = f"""
        {DEVICE} gpu_util=100
        proc pid={a} mem_mib=512 sm_util=40
        proc pid={b} mem_mib=256 sm_util=150 type=graphics
        proc pid={foreign} mem_mib=1024 sm_util=50
    """
    out = run_script(tmp_path, libs["full"], scenario, "nvml_process_metrics.py", a, b)
    first = out["first"]
    # Every process on the device, the foreign one included, with its memory and SM share.
    assert set(out["every"]) == {str(a), str(b), str(foreign)}
    assert out["every"][str(foreign)] == {
        "pid": foreign,
        "gpu_mem_mib": 1024.0,
        "gpu_sm_util": 50.0,
    }
    assert set(first) == {
        str(a),
        str(b),
    }  # the foreign PID and 999999 (not on the GPU) are left out
    assert first[str(a)] == {"pid": a, "gpu_mem_mib": 512.0, "gpu_sm_util": 40.0}
    assert first[str(b)]["gpu_mem_mib"] == 256.0 and math.isnan(
        first[str(b)]["gpu_sm_util"]
    )  # 150 % ignored
    assert out["held"][str(a)] == 40.0  # no newer sample: the last one is held
    init = out["init"]
    # The first query asks for the last second, not since 0; later ones for samples after the newest seen.
    assert out["opened"] - 1_100_000 < out["seen"][0] <= out["opened"] - 1_000_000 + 1
    assert out["seen"][1] == init
    assert out["seen"][2] == init + 200_000  # the 100 ms sample at t=0.2
    assert out["all"] == sorted([a, b, foreign])


@pytest.mark.parametrize(
    ("variant", "used_mib"), [("full", 1000.0), ("no_v3", 1300.0), ("v1_only", 1300.0)]
)
@needs_cc
def test_older_driver_symbols_fall_back(
    libs: dict[str, Path],
    tmp_path: Path,
    sleepers: list[subprocess.Popen],
    variant: str,
    used_mib: float,
) -> None:
    pid = sleepers[0].pid
    scenario = f"""
        {DEVICE} mem_used_mib=1000 mem_reserved_mib=300 temp_c=55 gpu_util=50
        proc pid={pid} mem_mib=700 sm_util=20
    """
    out = run_script(tmp_path, libs[variant], scenario, "nvml_older_driver.py", pid)
    assert (out["mem"], out["sm"]) == (700.0, 20.0)
    # memory_v2 excludes reserved memory from "used"; the v1 fallback cannot.
    assert out["sample"]["mem_used_mib"] == used_mib and out["sample"]["temp_c"] == 55.0
    # pynvml alone does not fall back: its unversioned call needs the _v3 symbol.
    assert out["alone"] == ("ok" if variant == "full" else "NVMLLibraryMismatchError")


@needs_cc
def test_children_of_self_lists_the_loading_process_children(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = f"""
        {DEVICE} gpu_util=50
        proc children_of=self mem_mib=64 sm_util=12
    """
    out = run_child(
        tmp_path,
        libs["full"],
        scenario,
        """
import subprocess
child = subprocess.Popen(["sleep", "60"])
s = NvmlSource()
s.open()
metrics = s.process_metrics([child.pid])
child.kill()
child.wait()
emit(metrics={str(k): dataclasses.asdict(v) for k, v in metrics.items()}, pid=child.pid)
""",
    )
    assert out["metrics"] == {
        str(out["pid"]): {"pid": out["pid"], "gpu_mem_mib": 64.0, "gpu_sm_util": 12.0}
    }


@needs_cc
def test_args_lists_every_process_so_started_and_under_only_those_descending_from_a_pid(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    """What lets the fake nvidia-smi, nobody's parent, see the same jobs as gpumon (tests/e2e/test_gpu_validation.py)."""
    code = f"import time; time.sleep(120); tag = {os.getpid()}"
    ours = subprocess.Popen([sys.executable, "-c", code])
    orphan_pid = tmp_path / "orphan.pid"  # started by a shell that exits: no longer our descendant
    subprocess.run(
        [
            "sh",
            "-c",
            f"{shlex.join([sys.executable, '-c', code])} > /dev/null 2>&1 & echo $! > {orphan_pid}",
        ],
        check=True,
        timeout=30,
    )
    orphan = int(orphan_pid.read_text())
    try:
        listed = {}
        for under in ("", f" under={os.getpid()}"):
            out = run_child(
                tmp_path,
                libs["full"],
                f"""
                {DEVICE}
                proc args="-c {code}"{under} mem_mib=42 sm_util=7
            """,
                "s = NvmlSource(); s.open(); emit(pids=sorted(s.all_gpu_pids()))",
            )
            listed[under] = out["pids"]
        assert listed[""] == sorted([ours.pid, orphan])
        assert listed[f" under={os.getpid()}"] == [ours.pid]
    finally:
        ours.kill()
        ours.wait()
        os.kill(orphan, signal.SIGKILL)


# -- PID namespace trap -----------------------------------------------------------------------


def test_pid_namespace_hint() -> None:
    invisible = lambda pid: False  # noqa: E731
    assert pid_namespace_hint([10], [], invisible) is None
    assert pid_namespace_hint([10], [10, 11], invisible) is None
    assert pid_namespace_hint([10], [11], lambda pid: True) is None  # someone else's job on the GPU
    assert "--pid=host" in pid_namespace_hint([10], [11, 12], invisible)
    assert pid_namespace_hint([], [os.getpid()]) is None


# -- gpumon doctor ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def doctor_runs(
    libs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, no_gpu: dict[str, str]
) -> dict[str, subprocess.CompletedProcess]:
    """The real `gpumon doctor`: text on a box without a GPU, --json with the fake; concurrent (each imports torch)."""
    tmp = tmp_path_factory.mktemp("doctor")
    trap = fake.write_scenario(
        tmp / "trap.txt",
        f"""
        driver 550.54.15
        {DEVICE}
        proc pid=3999999 mem_mib=100 sm_util=10
        fail nvmlDeviceGetPowerUsage NOT_SUPPORTED
    """,
    )
    base = {**os.environ, "GPUMON_RUNS": str(tmp / "runs")}
    jobs = {
        "cpu_text": (["doctor"], {**no_gpu, "GPUMON_RUNS": base["GPUMON_RUNS"]}),
        "fake_json": (["doctor", "--json"], fake.environment(libs["full"], trap, base=base)),
    }
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "gpumon", *argv],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name, (argv, env) in jobs.items()
    }
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=240)
        results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return results


@needs_cc
def test_doctor_on_a_cpu_only_machine_warns_and_passes(doctor_runs: dict) -> None:
    run = doctor_runs["cpu_text"]
    assert run.returncode == 0, run.stderr
    assert "[warn] NVML unavailable: libnvidia-ml.so.1 not found" in run.stdout
    assert "torch " in run.stdout and "runs directory" in run.stdout
    assert run.stdout.rstrip().splitlines()[-1].startswith("ready")
    assert "\033[" not in run.stdout  # not a tty: no colour
    assert len(run.stdout.splitlines()) <= 24  # one screen


@needs_cc
def test_doctor_json_with_the_fake_reports_the_gpu_and_the_pid_namespace_trap(
    doctor_runs: dict,
) -> None:
    run = doctor_runs["fake_json"]
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True
    assert {"python", "gpu", "pid_namespace", "torch", "py_spy", "ptrace", "runs_dir"} <= set(
        checks
    )
    gpu = checks["gpu"]
    assert (
        gpu["summary"]
        == "GPU 0: NVIDIA Fake A100-SXM4-40GB, driver 550.54.15, PCIe gen4 x16, 40960 MiB"
    )
    assert gpu["level"] == "warn" and gpu["detail"]["unsupported"] == ["power_w"]
    assert gpu["detail"]["pcie_method"] == "counters"
    assert gpu["notes"][:2] == [
        "PCIe bytes: 32-bit counters sampled every 82 ms",
        "no GPM: GPM not supported on this GPU (Hopper or newer only)",
    ]
    assert "--pid=host" in checks["pid_namespace"]["detail"]["hint"]
    assert checks["torch"]["detail"]["torch"]  # a version string, from the child


def _quick_doctor(
    monkeypatch: pytest.MonkeyPatch, runs: Path, capsys: pytest.CaptureFixture
) -> tuple[int, dict]:
    """run_doctor in this process, --json, with the torch child replaced by a canned answer."""
    import argparse

    monkeypatch.setenv("GPUMON_RUNS", str(runs))
    monkeypatch.setattr(
        doctor, "check_torch", lambda *_: doctor.Check("torch", doctor.OK, "torch (stubbed)")
    )
    code = doctor.run_doctor(argparse.Namespace(gpu=None, json=True))
    return code, json.loads(capsys.readouterr().out)


def test_doctor_fails_when_the_runs_directory_cannot_be_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    blocker = (
        tmp_path / "a-file"
    )  # a directory under a regular file cannot be created, even by root
    blocker.write_text("")
    code, report = _quick_doctor(monkeypatch, blocker / "runs", capsys)
    runs = next(c for c in report["checks"] if c["name"] == "runs_dir")
    assert code == 1 and report["ok"] is False and runs["level"] == "fail"
    code, report = _quick_doctor(monkeypatch, tmp_path / "runs", capsys)
    assert code == 0 and report["ok"] is True


@needs_cc
def test_doctor_fails_for_a_missing_gpu_index(libs: dict[str, Path], tmp_path: Path) -> None:
    out = run_child(
        tmp_path,
        libs["full"],
        DEVICE,
        """
from gpumon.checks import doctor
emit(missing=[dataclasses.asdict(c) for c in doctor.check_nvml(7)],
     default=[dataclasses.asdict(c) for c in doctor.check_nvml(None)])
""",
    )
    missing = out["missing"][0]
    assert (
        missing["level"] == "fail"
        and missing["summary"] == "NVML unavailable: no GPU with index 7 (1 found)"
    )
    assert [c["name"] for c in out["missing"]] == [
        "nvml",
        "mps",
    ]  # the MPS check follows whatever NVML says
    assert out["default"][0]["name"] == "gpu" and out["default"][0]["level"] == "ok"


@needs_cc
def test_doctor_names_the_pcie_path_and_the_gpm_metrics_that_work(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    out = run_child(
        tmp_path,
        libs["full"],
        scenario_file("gen5_58GBps", "fail gpm:5 NOT_SUPPORTED"),
        """
from gpumon.checks import doctor
emit(notes=doctor.check_nvml(None)[0].notes)
""",
    )
    assert out["notes"][:2] == [
        "PCIe bytes: GPM, exact at any interval",
        "GPM metrics: pcie_rx_bps, pcie_tx_bps, sm_active_pct, sm_occupancy_pct, dram_bw_pct",
    ]


def test_doctor_rejects_a_negative_gpu_index() -> None:
    import argparse

    with pytest.raises(doctor.UsageError):
        doctor.run_doctor(argparse.Namespace(gpu=-1, json=False))


def test_doctor_colours_only_when_asked() -> None:
    checks = [doctor.Check("x", doctor.WARN, "something")]
    assert "\033[33m" in doctor.render_text(checks, True, color=True)
    assert "\033[" not in doctor.render_text(checks, True, color=False)


# -- PCIe: 32-bit counters that wrap, GPM, and the choice between them ------------------------

SCENARIOS = Path(__file__).resolve().parents[1] / "fakenvml" / "scenarios"
NO_GPM = "fail nvmlGpmQueryDeviceSupport NOT_SUPPORTED"


def scenario_file(name: str, *extra: str) -> str:
    """A shipped scenario (tests/fakenvml/scenarios/NAME.txt) with ``extra`` lines appended."""
    return "\n".join([(SCENARIOS / f"{name}.txt").read_text(), *extra])


def test_wrap_counters_are_exact_across_wraps_and_refuse_ambiguous_gaps() -> None:
    from gpumon.core.sources.pcie import (
        COUNTER_STEP_S,
        WrapCounters,
        link_capacity_bps,
        poll_period_s,
    )

    gen5 = link_capacity_bps(5, 16)
    assert gen5 == pytest.approx(63.008e9) and link_capacity_bps(4, 16) == pytest.approx(31.504e9)
    assert link_capacity_bps(None, 16) is None and link_capacity_bps(9, 16) is None
    period = poll_period_s(32, gen5)
    wrap_s = 2**32 / gen5
    assert (
        0.02 < period and period + COUNTER_STEP_S < wrap_s
    )  # a read every period never spans a wrap
    assert poll_period_s(64, gen5) is None
    counters = WrapCounters(32, gen5)
    rate, stamp_us, total = 58e9, 1_000_000, 0
    got = []
    for step in range(
        1, 200
    ):  # readings every 20 ms: a 32-bit counter wraps every ~74 ms at 58 GB/s
        stamp_us += 20_000
        total += int(rate * 0.02)
        counters.add(stamp_us, total % 2**32, (total // 10) % 2**32)
        if step % 5 == 0:
            got.append(counters.rates())
    assert all(math.isnan(x) for x in got[0])
    for rx, tx in got[1:]:
        assert rx == pytest.approx(rate, abs=1) and tx == pytest.approx(rate / 10, abs=1)
    counters.add(stamp_us + 80_000, 5, 5)  # a gap long enough to hide a whole wrap
    assert all(math.isnan(x) for x in counters.rates())  # unknowable: NaN, not a wrong number
    counters.add(stamp_us + 100_000, 5 + 10**9, 5)
    assert counters.rates() == (pytest.approx(1e9 / 0.02), 0.0)
    wide = WrapCounters(64, gen5)
    wide.add(0, 100, 100), wide.rates(), wide.add(10_000, 50, 200)  # went backwards: a reset
    assert all(math.isnan(x) for x in wide.rates())


def _median_and_present(values: list[float]) -> tuple[float, float]:
    present = [v for v in values if not math.isnan(v)]
    return (sorted(present)[len(present) // 2] if present else math.nan), len(present) / len(values)


TICK_LOOP = """
interval, seconds, poll = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "poll"
s = NvmlSource()
s.open()
t, rows, polls, periods = 0.0, [], 0, set()
next_poll = math.inf
for i in range(1, int(round(seconds / interval)) + 1):
    tick = round(i * interval, 6)
    period = s.pcie_poll_period_s  # re-read each tick, as the Sampler does: the method can change
    periods.add(period)
    if period is None:
        next_poll = math.inf
    elif next_poll == math.inf:
        next_poll = round(tick - interval + period, 6)
    while poll and next_poll < tick:  # what the Sampler does between ticks
        clock(next_poll)
        s.poll_pcie(next_poll)
        next_poll, polls = round(next_poll + period, 6), polls + 1
    clock(tick)
    rows.append(row(s.sample(tick)))
emit(rows=rows, info=s.device_info(), period=s.pcie_poll_period_s, polls=polls)
"""


def _ticks(
    tmp_path: Path,
    lib: Path,
    scenario: str,
    interval: float,
    seconds: float,
    poll: bool = True,
    **env: str,
) -> dict:
    code = (
        f"sys.argv[1:] = {[str(interval), str(seconds), 'poll' if poll else 'no']!r}\n" + TICK_LOOP
    )
    return run_child(tmp_path, lib, scenario, code, **env)


@pytest.mark.parametrize("interval", [0.1, 0.25])
@pytest.mark.parametrize(("name", "truth"), [("gen5_58GBps", 58e9), ("gen4_25GBps", 25e9)])
@needs_cc
def test_32bit_counters_read_on_their_cadence_are_exact(
    libs: dict[str, Path], tmp_path: Path, name: str, truth: float, interval: float
) -> None:
    out = _ticks(tmp_path, libs["full"], scenario_file(name, NO_GPM), interval, 3.0)
    assert out["info"]["pcie_method"] == "counters" and out["info"]["gpm_metrics"] == []
    median, present = _median_and_present([r["pcie_rx_bps"] for r in out["rows"]])
    assert present >= 0.9 and median == pytest.approx(truth, rel=0.05)
    tx_median, _ = _median_and_present([r["pcie_tx_bps"] for r in out["rows"]])
    assert tx_median == pytest.approx(truth / (58e9 / 5.2e9) if truth == 58e9 else 2.5e9, rel=0.05)
    assert out["polls"] >= 3.0 / out["period"] * 0.8  # the counters were read on their own cadence


@needs_cc
def test_32bit_counters_never_give_a_wrong_number_when_not_polled(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    out = _ticks(
        tmp_path, libs["full"], scenario_file("gen5_58GBps", NO_GPM), 0.25, 2.0, poll=False
    )
    assert all(
        math.isnan(r["pcie_rx_bps"]) for r in out["rows"]
    )  # each 250 ms gap could hide wraps


@pytest.mark.parametrize("interval", [0.1, 1.0])
@needs_cc
def test_gpm_path_is_exact_at_any_interval(
    libs: dict[str, Path], tmp_path: Path, interval: float
) -> None:
    out = _ticks(tmp_path, libs["full"], scenario_file("gen5_58GBps"), interval, 8.0)
    info = out["info"]
    assert info["pcie_method"] == "gpm" and out["period"] is None and out["polls"] == 0
    assert info["gpm_metrics"] == ["pcie_rx_bps", "pcie_tx_bps", *GPM_COLUMNS]
    assert info["pcie_max_bps"] == pytest.approx(3.938e9 * 16)
    rows = out["rows"]
    rx = [r["pcie_rx_bps"] for r in rows]
    assert all(v == pytest.approx(58e9, rel=0.02) for v in rx)
    assert all(r["pcie_tx_bps"] == pytest.approx(5.2e9, rel=0.02) for r in rows)
    assert all(
        (r["sm_active_pct"], r["sm_occupancy_pct"], r["dram_bw_pct"])
        == pytest.approx((0.5, 0.2, 1.6))
        for r in rows
    )
    tensor = [r["tensor_active_pct"] for r in rows]
    first_tensor = next(i for i, v in enumerate(tensor) if not math.isnan(v))
    assert rows[first_tensor]["t"] == pytest.approx(5.0, abs=interval)  # the dear metric: every 5 s
    assert all(v == 0.0 for v in tensor[first_tensor:])


@needs_cc
def test_gpm_metric_that_fails_alone_leaves_the_others(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = scenario_file(
        "gen5_58GBps", "fail gpm:3 NOT_SUPPORTED", "fail gpm:10 UNKNOWN after=0.45"
    )
    out = _ticks(tmp_path, libs["full"], scenario, 0.1, 1.5)
    assert out["info"]["pcie_method"] == "gpm"
    assert (
        "sm_occupancy_pct" not in out["info"]["gpm_metrics"]
        and "sm_active_pct" in out["info"]["gpm_metrics"]
    )
    for r in out["rows"]:
        assert math.isnan(r["sm_occupancy_pct"])
        assert r["sm_active_pct"] == pytest.approx(0.5) and r["pcie_rx_bps"] == pytest.approx(
            58e9, rel=0.02
        )
        # a transient failure from 0.45 s: NaN from the first GPM reading after it (GPM is read once a second,
        # at 0.1 s and 1.1 s), the other metrics of that reading still there
        assert math.isnan(r["dram_bw_pct"]) == (r["t"] >= 1.05)


@needs_cc
def test_gpm_probe_refused_at_open_is_decided_per_metric_while_sampling(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    scenario = scenario_file(
        "gen5_58GBps", "fail nvmlGpmMetricsGet UNKNOWN until=0.05", "fail gpm:3 NOT_SUPPORTED"
    )
    out = _ticks(tmp_path, libs["full"], scenario, 0.1, 1.0)
    assert (
        out["info"]["pcie_method"] == "gpm" and "sm_occupancy_pct" not in out["info"]["gpm_metrics"]
    )
    assert all(r["pcie_rx_bps"] == pytest.approx(58e9, rel=0.02) for r in out["rows"])


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ("fail gpm:21 NOT_SUPPORTED", ""),
        ("", "MIG is enabled"),
        (NO_GPM, "GPM unusable: Not Supported"),
    ],
)
@needs_cc
def test_pcie_falls_back_to_the_wrap_safe_counters_without_gpm_pcie(
    libs: dict[str, Path], tmp_path: Path, extra: str, reason: str
) -> None:
    scenario = scenario_file("gen5_58GBps", extra)
    if reason == "MIG is enabled":
        scenario = scenario.replace(" gpm=1 ", " gpm=1 mig=1 ")
    out = _ticks(tmp_path, libs["full"], scenario, 0.1, 2.0)
    info = out["info"]
    assert info["pcie_method"] == "counters" and info["gpm_reason"].startswith(reason)
    assert (
        info["pcie_poll_ms"] == pytest.approx(out["period"] * 1000, abs=0.1)
        and out["period"] < 0.05
    )
    median, present = _median_and_present([r["pcie_rx_bps"] for r in out["rows"]])
    assert present >= 0.9 and median == pytest.approx(58e9, rel=0.05)
    if extra.startswith("fail gpm:21"):  # the other GPM metrics still come from GPM
        assert "sm_active_pct" in info["gpm_metrics"] and out["rows"][-1][
            "sm_active_pct"
        ] == pytest.approx(0.5)


@pytest.mark.parametrize("switch", ["1", "0"])
@needs_cc
def test_gpumon_no_gpm_forces_the_counter_path_on_a_gpu_with_gpm(
    libs: dict[str, Path], tmp_path: Path, switch: str
) -> None:
    out = _ticks(
        tmp_path, libs["full"], scenario_file("gen5_58GBps"), 0.1, 2.0, GPUMON_NO_GPM=switch
    )
    info = out["info"]
    if switch == "0":  # "0" is off, like unset
        assert info["pcie_method"] == "gpm" and info["gpm_reason"] == ""
        return
    assert info["pcie_method"] == "counters" and info["gpm_metrics"] == []
    assert info["gpm_reason"] == "GPM switched off (GPUMON_NO_GPM=1)"
    assert all(math.isnan(r["sm_active_pct"]) for r in out["rows"])
    median, present = _median_and_present([r["pcie_rx_bps"] for r in out["rows"]])
    assert present >= 0.9 and median == pytest.approx(58e9, rel=0.05)


@needs_cc
def test_gpm_failing_mid_run_hands_pcie_to_the_counters(
    libs: dict[str, Path], tmp_path: Path
) -> None:
    out = _ticks(
        tmp_path,
        libs["full"],
        scenario_file("gen5_58GBps", "fail nvmlGpmSampleGet NOT_SUPPORTED after=1.0"),
        0.1,
        3.0,
    )
    info = out["info"]
    assert info["pcie_method"] == "counters" and info["gpm_metrics"] == []
    assert info["gpm_reason"] == "GPM failed: Not Supported"
    assert all(math.isnan(r["sm_active_pct"]) for r in out["rows"] if r["t"] > 1.0)
    late = [r["pcie_rx_bps"] for r in out["rows"] if r["t"] > 1.3]
    median, present = _median_and_present(late)
    assert present >= 0.9 and median == pytest.approx(58e9, rel=0.05)


@needs_cc
def test_fake_throughput_matches_the_counters(libs: dict[str, Path], tmp_path: Path) -> None:
    out = run_child(
        tmp_path,
        libs["full"],
        scenario_file("gen5_58GBps"),
        """
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
clock(1.0)
emit(rx=pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES),
     values=[(v.valueType, v.timestamp) for v in pynvml.nvmlDeviceGetFieldValues(h, [198, 197])],
     init=fake("fakenvml_init_timestamp", ctypes.c_longlong))
""",
    )
    assert out["rx"] * 1024 == pytest.approx(58e9, rel=1e-6)  # KB/s, 1 KB = 1024 bytes
    assert [v[0] for v in out["values"]] == [1, 1]  # 32-bit, as on the H100's driver
    assert {v[1] - out["init"] for v in out["values"]} == {1_000_000}  # stamped at its 20 ms step


# -- per-process SM utilisation ----------------------------------------------------------------


@needs_cc
def test_process_sm_util_is_the_mean_of_every_sample_read_once_a_second(
    libs: dict[str, Path], tmp_path: Path, sleepers: list[subprocess.Popen]
) -> None:
    a, b, _ = (p.pid for p in sleepers)
    scenario = f"""
        {DEVICE} gpu_util=100
        proc pid={a} mem_mib=100 sm_util=10,90
        proc pid={b} mem_mib=100 sm_util=30
    """
    out = run_script(tmp_path, libs["full"], scenario, "nvml_sm_util_mean.py", a, b)
    assert out["got"] == {
        str(a): 50.0,
        str(b): 30.0,
    }  # ten samples 10, 90, 10, ...: the mean, not the last
    assert out["again"] == out["seen"]


@needs_cc
def test_process_sm_util_never_sums_above_the_device(
    libs: dict[str, Path], tmp_path: Path, sleepers: list[subprocess.Popen]
) -> None:
    a, b, _ = (p.pid for p in sleepers)
    scenario = f"""
        {DEVICE} gpu_util=100
        proc pid={a} mem_mib=100 sm_util=99
        proc pid={b} mem_mib=100 sm_util=33
    """
    out = run_script(tmp_path, libs["full"], scenario, "nvml_sm_shares.py", a, b)
    got = out["ours"]
    assert got[str(a)] + got[str(b)] == pytest.approx(100.0)
    assert got[str(a)] == pytest.approx(99 * 100 / 132) and got[str(b)] == pytest.approx(
        33 * 100 / 132
    )


@needs_cc
def test_clamp_counts_every_process_on_the_device(
    libs: dict[str, Path], tmp_path: Path, sleepers: list[subprocess.Popen]
) -> None:
    a, _, foreign = (p.pid for p in sleepers)
    scenario = f"""
        {DEVICE} gpu_util=100
        proc pid={a} mem_mib=100 sm_util=60
        proc pid={foreign} mem_mib=2048 sm_util=90
    """
    out = run_script(tmp_path, libs["full"], scenario, "nvml_sm_shares.py", a)
    every = out["every"]
    # 60 + 90 = 150 > 100 + tolerance: all listed shares are scaled together, ours and the other's.
    assert every[str(a)] + every[str(foreign)] == pytest.approx(100.0)
    assert every[str(foreign)] == pytest.approx(90 * 100 / 150)
    assert out["ours"] == {str(a): pytest.approx(60 * 100 / 150)}


# -- the fake's H100 cost mode -----------------------------------------------------------------


@needs_cc
def test_cost_mode_burns_the_h100_cpu_per_call(
    libs: dict[str, Path], tmp_path: Path, sleepers: list[subprocess.Popen]
) -> None:
    code = (
        HANDLE
        + """
import time
def cost(fn, n=20):
    fn()
    began = time.thread_time_ns()
    for _ in range(n):
        fn()
    return (time.thread_time_ns() - began) / n / 1000
def util():
    try:
        pynvml.nvmlDeviceGetProcessUtilization(h, 0)
    except pynvml.NVMLError:
        pass
emit(util=cost(util), pcie=cost(lambda: pynvml.nvmlDeviceGetPcieThroughput(h, 1)),
     fields=cost(lambda: pynvml.nvmlDeviceGetFieldValues(h, [198, 197])),
     procs=cost(lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h)))
"""
    )
    scenario = scenario_file(
        "gen5_58GBps", f"proc pid={sleepers[0].pid} sm_util=50"
    )  # two jobs, as measured
    on = run_child(tmp_path, libs["full"], scenario, code, FAKENVML_COSTS="h100")
    off = run_child(tmp_path, libs["full"], scenario, code)
    for call, h100_us in (
        ("util", 2310.971),
        ("pcie", 815.269),
        ("fields", 263.176),
        ("procs", 61.526),
    ):
        assert h100_us * 0.9 <= on[call] <= h100_us * 3, (
            call,
            on[call],
        )  # thread CPU, so a busy box adds little
        assert off[call] < max(h100_us * 0.5, 100), (call, off[call])  # off: pynvml + ctypes only


@needs_cc
def test_per_process_samples_are_read_even_when_an_instant_lands_between_the_two_calls(
    libs: dict[str, Path], tmp_path: Path, sleepers: list[subprocess.Popen]
) -> None:
    # The real clock, an instant every millisecond and the H100's 1.2 ms a call: each sample count the size query
    # returns is stale by the time the buffer is filled. pynvml's wrapper raises then; gpumon's reader makes no size
    # query, and grows its buffer when the driver says it is too small.
    code = (
        PER_PROCESS
        + """
import time
errors = []
for _ in range(5):
    try:
        pynvml.nvmlDeviceGetProcessUtilization(h, time.time_ns() // 1000 - 2000)
    except pynvml.NVMLError as err:
        errors.append(str(err))
read = [ours(h, time.time_ns() // 1000 - 2000) for _ in range(5)]
emit(errors=errors, counts=[len(r) for r in read], pids=sorted({s.pid for r in read for s in r}))
"""
    )
    scenario = (
        DEVICE.replace("util_period_ms=100", "util_period_ms=1")
        + f"\nproc pid={sleepers[0].pid} sm_util=50"
    )
    out = run_child(
        tmp_path, libs["full"], scenario, code, FAKENVML_COSTS="h100", FAKENVML_CLOCK=""
    )
    assert out["errors"] == ["Insufficient Size"] * 5  # the race is real on this fake, every time
    assert all(n >= 1 for n in out["counts"]) and out["pids"] == [sleepers[0].pid]


@needs_cc
def test_a_per_process_read_is_one_driver_call_where_pynvml_makes_two(
    libs: dict[str, Path], tmp_path: Path, sleepers: list[subprocess.Popen]
) -> None:
    # At the H100's costs each C call burns half of the 2,311 µs pynvml's two calls cost there (size query + read):
    # gpumon's reader, which reads into a buffer with room to spare, pays one of them.
    code = (
        PER_PROCESS
        + """
import statistics, time
def cost(read):
    spent = []
    for _ in range(7):
        began = time.thread_time_ns()
        samples = read(h, time.time_ns() // 1000 - 1_000_000)
        spent.append((time.thread_time_ns() - began) / 1000)
    return statistics.median(spent), sorted({s.pid for s in samples})
(theirs_us, theirs), (ours_us, read) = cost(pynvml.nvmlDeviceGetProcessUtilization), cost(ours)
emit(theirs_us=theirs_us, ours_us=ours_us, theirs=theirs, ours=read)
"""
    )
    scenario = (
        DEVICE + f"\nproc pid={sleepers[0].pid} sm_util=50\nproc pid={sleepers[1].pid} sm_util=30"
    )
    out = run_child(tmp_path, libs["full"], scenario, code, FAKENVML_COSTS="h100")
    assert out["ours"] == out["theirs"] == sorted(p.pid for p in sleepers[:2])
    assert (
        2310.971 * 0.9 <= out["theirs_us"]
        and 2310.971 / 2 * 0.9 <= out["ours_us"] <= 2310.971 * 0.75
    ), out


@needs_cc
def test_unknown_cost_mode_fails_init(libs: dict[str, Path], tmp_path: Path) -> None:
    out = run_child(
        tmp_path,
        libs["full"],
        DEVICE,
        """
emit(status=NvmlSource().open().reason)
""",
        FAKENVML_COSTS="a100",
    )
    assert out["status"] == "unavailable: nvmlInit failed: Unknown Error"


# -- runs recorded before the GPM columns -----------------------------------------------------


def test_runs_recorded_before_the_gpm_columns_still_read_and_export(tmp_path: Path) -> None:
    from gpumon.core.records.model import DEVICE_COLUMNS, GPM_COLUMNS
    from gpumon.core.store.trace import export, load_run

    run = tmp_path / "old"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"schema": 1, "workloads": []}))
    old = [c for c in DEVICE_COLUMNS if c not in GPM_COLUMNS]
    (run / "device.csv").write_text(
        ",".join(old) + "\n" + ",".join(["0.1"] + ["1"] * (len(old) - 1)) + "\n"
    )
    loaded = load_run(run)
    frame = loaded.device()
    assert (
        list(frame.columns) == list(DEVICE_COLUMNS) and frame[list(GPM_COLUMNS)].isna().all().all()
    )
    assert frame["gpu_util"].tolist() == [1]
    written, _ = export(loaded, tmp_path / "out")
    assert written.read_text().splitlines()[0] == ",".join(
        ["t", "wall_epoch_s", *DEVICE_COLUMNS[1:]]
    )


def test_replay_of_a_run_recorded_before_the_gpm_columns(tmp_path: Path) -> None:
    from gpumon.core.records.bus import Bus
    from gpumon.core.records.model import DEVICE_COLUMNS, GPM_COLUMNS, DeviceSample
    from gpumon.core.sources.replay import ReplaySource

    run = tmp_path / "old"
    (run / "logs").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"schema": 1, "workloads": []}))
    for table, columns in (
        ("steps", "process,pid,step,t,iter_s,samples,warmup,copy_bytes,copy_s"),
        ("processes", "t,process,pid,cpu_pct,rss_mib,threads,gpu_mem_mib,gpu_sm_util"),
        ("host", "t,cpu_pct,mem_used_mib,mem_total_mib"),
    ):
        (run / f"{table}.csv").write_text(columns + "\n")
    old = [c for c in DEVICE_COLUMNS if c not in GPM_COLUMNS]
    (run / "device.csv").write_text(
        ",".join(old) + "\n" + ",".join(["0.5", "42"] + [""] * (len(old) - 2)) + "\n"
    )
    bus, got = Bus(), []
    bus.subscribe(got.append)
    replay = ReplaySource(run, bus, speed=math.inf)
    replay.seek(10.0)
    (sample,) = [x for x in got if isinstance(x, DeviceSample)]
    assert sample.gpu_util == 42.0 and all(math.isnan(getattr(sample, c)) for c in GPM_COLUMNS)


# -- on a real GPU (skipped here) ----------------------------------------------------------------

real_gpu = pytest.mark.skipif(
    not nvml_library_installed(), reason="needs a real NVIDIA GPU and driver (no libnvidia-ml here)"
)


@pytest.mark.gpu
@real_gpu
def test_real_gpu_picks_gpm_on_hopper_else_wrap_safe_counters(tmp_path: Path) -> None:
    out = run_child(
        tmp_path,
        None,
        None,
        """
import time
s = NvmlSource()
assert s.open().available
rows, t0 = [], time.monotonic()
while time.monotonic() - t0 < 3.0:
    t = time.monotonic() - t0
    period = s.pcie_poll_period_s
    if period:
        s.poll_pcie(t)
        time.sleep(period)
    else:
        time.sleep(0.1)
    rows.append(row(s.sample(time.monotonic() - t0)))
emit(info=s.device_info(), rows=rows, gpm_supported=pynvml.nvmlGpmQueryDeviceSupport(
    pynvml.nvmlDeviceGetHandleByIndex(s.device_info()["index"])).isSupportedDevice)
""",
    )
    info, rows = out["info"], out["rows"]
    if out["gpm_supported"] and "MIG" not in info["gpm_reason"]:
        assert info["pcie_method"] == "gpm" and {"pcie_rx_bps", "sm_active_pct"} <= set(
            info["gpm_metrics"]
        )
        assert sum(not math.isnan(r["sm_active_pct"]) for r in rows) >= 0.9 * len(rows) - 1
    else:
        assert info["pcie_method"] in ("counters", "throughput")
    present = [r["pcie_rx_bps"] for r in rows if not math.isnan(r["pcie_rx_bps"])]
    assert len(present) >= 0.9 * len(rows) - 1 and all(v >= 0 for v in present)
    assert info["pcie_max_bps"] and info["pcie_max_bps"] >= 1e9
