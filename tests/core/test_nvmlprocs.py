"""Every process on the jobs' GPU (core/sources/nvmlprocs.py) on the fake libnvidia-ml loaded in this process.

The process lists merged, each PID's SM share the mean of the driver's samples since the last read, read once a
second or at once for a newcomer, clamped with every other process to the device's utilisation; values worked by
hand from the scenario (the fake's samples are at every 100 ms from its start, ``sm_util=10,90`` cycling).
"""

from __future__ import annotations

import ctypes
import math
import subprocess
import time

import pynvml
import pytest

from gpumon.core.sources.nvmlprocs import (
    DEVICE_UTIL_KEPT,
    ProcessReader,
    clamp_to_device,
    listed,
)
from tests.fakenvml.inprocess import Start

DEVICE = 'device name="Fake H100" uuid=GPU-procs gpu_util=100'


def seen_us() -> int:
    """The last-seen timestamp the last per-process utilisation call passed to the driver (the fake keeps it)."""
    fn = pynvml.nvmlLib.fakenvml_last_utilization_timestamp
    fn.restype = ctypes.c_ulonglong
    return int(fn())


def init_us() -> int:
    """The CPU timestamp (µs) that is the fake's time 0: its utilisation samples are at 0, 100 ms, ... from it."""
    fn = pynvml.nvmlLib.fakenvml_init_timestamp
    fn.restype = ctypes.c_longlong
    return int(fn())


def shares(reader: ProcessReader, t: float | None) -> dict[int, float]:
    return {pid: m.gpu_sm_util for pid, m in reader.metrics(t).items()}


def test_the_two_lists_merge_into_one_memory_per_pid(gpu: Start) -> None:
    dev, _ = gpu(
        f"{DEVICE}\n"
        "proc pid=4001 mem_mib=512 type=compute\n"
        "proc pid=4002 mem_mib=256 type=graphics\n"
        "proc pid=4003 mem_mib=300 type=compute\n"
        "proc pid=4003 mem_mib=700 type=graphics\n"
        "proc pid=4004 mem_mib=900 type=compute\n"
        "proc pid=4004 mem_mib=100 type=graphics\n"
        "proc pid=4005 mem_mib=na type=compute\n"
        "proc pid=4005 mem_mib=64 type=graphics\n"
        "proc pid=4006 mem_mib=80 type=compute\n"
        "proc pid=4006 mem_mib=na type=graphics\n"
        "proc pid=4007 mem_mib=na type=compute"
    )
    found = listed(dev.q, dev.calls.processes, dev.handle)
    assert found is not None
    assert {pid: v for pid, v in found.items() if pid != 4007} == {
        4001: 512.0,
        4002: 256.0,
        4003: 700.0,  # the larger of the two lists'
        4004: 900.0,
        4005: 64.0,  # a number over N/A
        4006: 80.0,  # N/A never over a number
    }
    assert math.isnan(found[4007])
    assert ProcessReader(dev).running() == found


@pytest.mark.parametrize(
    ("fails", "expected"),
    [
        (("Compute", "Graphics"), None),  # neither list answers
        (("Compute",), {4002: 256.0}),
        (("Graphics",), {4001: 512.0}),
        ((), {4001: 512.0, 4002: 256.0}),
    ],
)
def test_processes_are_listed_while_either_list_answers(
    gpu: Start, fails: tuple[str, ...], expected: dict[int, float] | None
) -> None:
    lines = [f"fail nvmlDeviceGet{kind}RunningProcesses_v3 NOT_SUPPORTED" for kind in fails]
    dev, _ = gpu(
        "\n".join(
            [
                DEVICE,
                "proc pid=4001 mem_mib=512 type=compute",
                "proc pid=4002 mem_mib=256 type=graphics",
                *lines,
            ]
        )
    )
    assert listed(dev.q, dev.calls.processes, dev.handle) == expected
    assert ProcessReader(dev).running() == (expected or {})
    assert set(dev.q.unsupported) == {f"{kind.lower()}_processes" for kind in fails}


def test_an_empty_gpu_answers_an_empty_list_not_none(gpu: Start) -> None:
    dev, _ = gpu(DEVICE)
    assert listed(dev.q, dev.calls.processes, dev.handle) == {}


def test_each_share_is_the_mean_of_the_samples_since_the_last_read_once_a_second(
    gpu: Start,
) -> None:
    dev, clock = gpu(
        f"{DEVICE}\n"
        "proc pid=4001 mem_mib=100 sm_util=10,90\n"
        "proc pid=4002 mem_mib=200 sm_util=30\n"
        "proc pid=4003 mem_mib=300 sm_util=150\n"  # above 100 %: an invalid sample
        "proc pid=4004 mem_mib=400"  # no samples: not on the SMs
    )
    before = time.time_ns() // 1000
    reader = ProcessReader(dev)
    after = time.time_ns() // 1000
    first = reader.metrics(0.0)
    # the first read asks for the last second's samples, not every one since the driver started
    first_seen = seen_us()
    assert before - 1_000_000 <= first_seen <= after - 1_000_000
    assert {pid: m.gpu_mem_mib for pid, m in first.items()} == {
        4001: 100.0,
        4002: 200.0,
        4003: 300.0,
        4004: 400.0,
    }
    assert all(m.pid == pid for pid, m in first.items())
    got = {pid: m.gpu_sm_util for pid, m in first.items()}  # the one sample at 0
    assert math.isnan(got.pop(4003)) and got == {4001: 10.0, 4002: 30.0, 4004: 0.0}
    clock.set(0.5)
    got = shares(reader, 0.5)  # its second has not come: the last read holds
    assert seen_us() == first_seen and math.isnan(got.pop(4003))
    assert got == {4001: 10.0, 4002: 30.0, 4004: 0.0}
    clock.set(1.0)
    got = shares(reader, 0.9)  # 0.9 s after the last read: due (the process ticks drift)
    assert seen_us() == init_us()  # samples after the newest seen: 100 ms to 1 s
    assert math.isnan(got.pop(4003)) and got == {4001: 50.0, 4002: 30.0, 4004: 0.0}
    clock.set(100.0)
    # no run time: read now; the driver keeps the last 64 instants (37.0 s to 100.0 s), half at 10 %, half at 90 %
    assert shares(reader, None)[4001] == 50.0
    assert seen_us() == init_us() + 1_000_000
    # nothing newer (NOT_FOUND) and the last sample seen is recent: the shares hold
    assert shares(reader, None)[4001] == 50.0
    assert seen_us() == init_us() + 100_000_000


def test_a_sample_of_100_percent_counts_and_one_above_does_not(gpu: Start) -> None:
    dev, _ = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=100\nproc pid=4002 mem_mib=100 sm_util=101"
    )
    got = shares(ProcessReader(dev), 0.0)
    assert got[4001] == 100.0 and math.isnan(got[4002])


def test_a_process_the_lists_miss_for_a_moment_keeps_its_share(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=10\n"
        "fail nvmlDeviceGetComputeRunningProcesses_v3 UNKNOWN after=0.5"
    )
    reader = ProcessReader(dev)
    assert shares(reader, 0.0) == {4001: 10.0}
    clock.set(0.5)
    (only,) = reader.metrics(0.5).values()  # not listed now, but its share was read: still there
    assert (only.pid, only.gpu_sm_util) == (4001, 10.0) and math.isnan(only.gpu_mem_mib)


def test_without_the_devices_utilisation_the_shares_stay_as_read(gpu: Start) -> None:
    dev, _ = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=80\nproc pid=4002 mem_mib=100 sm_util=40\n"
        "fail nvmlDeviceGetUtilizationRates NOT_SUPPORTED"
    )
    assert shares(ProcessReader(dev), 0.0) == {4001: 80.0, 4002: 40.0}  # 120 %: nothing to clamp to
    assert dev.q.unsupported == {"utilization": "Not Supported"}


def test_a_process_that_appears_is_read_at_once(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=10\nproc children_of=self sm_util=20"
    )
    reader = ProcessReader(dev)
    assert shares(reader, 0.0) == {4001: 10.0}
    child = subprocess.Popen(["sleep", "60"])
    try:
        clock.set(0.3)
        assert shares(reader, 0.3) == {
            4001: 10.0,
            child.pid: 20.0,
        }  # not its second, but a newcomer
    finally:
        child.kill()
        child.wait()


def test_the_shares_are_clamped_together_to_the_devices_utilisation_over_the_ticks(
    gpu: Start,
) -> None:
    dev, clock = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=80\nproc pid=4002 mem_mib=100 sm_util=40"
    )
    reader = ProcessReader(dev)
    for util in (60.0, math.nan, 40.0):  # a tick without a reading is left out
        reader.note_device_util(util)
    assert shares(reader, 0.0) == pytest.approx({4001: 80 * 50 / 120, 4002: 40 * 50 / 120})
    clock.set(1.0)
    # no tick noted since the last read: the device's utilisation read now (100 %)
    assert shares(reader, 1.0) == pytest.approx({4001: 80 * 100 / 120, 4002: 40 * 100 / 120})
    reader.note_device_util(0.0)
    for _ in range(DEVICE_UTIL_KEPT):
        reader.note_device_util(90.0)
    clock.set(2.0)
    # the last DEVICE_UTIL_KEPT ticks only: the 0 % one dropped out
    assert shares(reader, 2.0) == pytest.approx({4001: 80 * 90 / 120, 4002: 40 * 90 / 120})


def test_a_failed_read_forgets_the_shares_and_an_unsupported_one_is_never_made(
    gpu: Start,
) -> None:
    dev, clock = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=10\n"
        "fail nvmlDeviceGetProcessUtilization UNKNOWN after=0.5"
    )
    reader = ProcessReader(dev)
    assert shares(reader, 0.0) == {4001: 10.0}
    clock.set(1.0)
    assert math.isnan(shares(reader, 1.0)[4001])  # unknown now, not the old value
    assert dev.q.unsupported == {}


def test_utilisation_unsupported_mid_run_is_never_asked_again(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=10\n"
        "fail nvmlDeviceGetProcessUtilization NOT_SUPPORTED after=0.5"
    )
    reader = ProcessReader(dev)
    assert shares(reader, 0.0) == {4001: 10.0}
    asked = seen_us()
    clock.set(1.0)
    assert math.isnan(shares(reader, 1.0)[4001])
    assert dev.q.unsupported == {"process_utilization": "Not Supported"}
    clock.set(2.0)
    assert math.isnan(shares(reader, 2.0)[4001]) and seen_us() == asked


def test_probe_finds_what_is_unsupported_before_sampling(gpu: Start) -> None:
    dev, _ = gpu(
        f"{DEVICE}\nproc pid=4001 mem_mib=100 sm_util=10 type=both\n"
        "fail nvmlDeviceGetProcessUtilization NOT_SUPPORTED\n"
        "fail nvmlDeviceGetComputeRunningProcesses_v3 NO_PERMISSION"
    )
    reader = ProcessReader(dev)
    reader.probe()
    assert set(dev.q.unsupported) == {"process_utilization", "compute_processes"}
    assert math.isnan(shares(reader, 0.0)[4001]) and seen_us() == 0  # never asked


def test_a_lost_gpu_has_no_processes(gpu: Start) -> None:
    dev, clock = gpu(f"{DEVICE}\nlost_at 0.5\nproc pid=4001 mem_mib=100 sm_util=10")
    reader = ProcessReader(dev)
    assert shares(reader, 0.0) == {4001: 10.0}
    clock.set(1.0)
    assert (
        reader.metrics(0.5) == {} and dev.q.lost == "GPU lost"
    )  # the last shares are not given out


def test_clamp_rule() -> None:
    assert clamp_to_device({1: 60.0, 2: 44.0}, 100.0) == {1: 60.0, 2: 44.0}  # within the tolerance
    # the tolerance is 5 points of SM: a sum of 105 % on a device at 100 % is read as is, 105.5 % is scaled
    assert clamp_to_device({1: 60.0, 2: 45.0}, 100.0) == {1: 60.0, 2: 45.0}
    assert clamp_to_device({1: 60.0, 2: 45.5}, 100.0) == pytest.approx(
        {1: 60 * 100 / 105.5, 2: 45.5 * 100 / 105.5}
    )
    assert clamp_to_device({1: 80.0, 2: 40.0}, 60.0) == {1: 40.0, 2: 20.0}
    assert clamp_to_device({1: 80.0, 2: 40.0}, math.nan) == {
        1: 80.0,
        2: 40.0,
    }  # no device figure: as read
    clamped = clamp_to_device({1: math.nan, 2: 90.0}, 50.0)
    assert math.isnan(clamped[1]) and clamped[2] == 50.0
