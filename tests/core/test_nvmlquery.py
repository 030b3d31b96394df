"""The one tolerant way to call NVML (core/sources/nvmlquery.py) on the fake libnvidia-ml loaded in this process.

How each NVML error is classified (for good, GPU lost, once), the newest-first symbols of an older driver, the
process-utilisation buffer that grows, the cadence and the conversions.
"""

from __future__ import annotations

import logging
import math
from typing import Callable

import pynvml
import pytest

from gpumon.core.sources.nvmlquery import (
    MIB,
    NA,
    Cadence,
    Device,
    Query,
    field_number,
    integer,
    mib,
    number,
    text,
)
from tests.fakenvml import build as fake
from tests.fakenvml.inprocess import Start

DEVICE = 'device name="Fake H100" uuid=GPU-query'
LOGGER = "gpumon.core.sources.nvmlquery"


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_each_error_is_na_for_good_once_or_until_it_clears(
    gpu: Start, caplog: pytest.LogCaptureFixture
) -> None:
    dev, clock = gpu(
        f"{DEVICE} power_w=140 sm_clock_mhz=1980 gpu_util=50\n"
        "fail nvmlDeviceGetPowerUsage NOT_SUPPORTED until=0.5\n"
        "fail nvmlDeviceGetClockInfo UNKNOWN until=0.5\n"
        "fail nvmlDeviceGetUtilizationRates NOT_FOUND until=0.5\n"
        "fail nvmlDeviceGetTemperature NO_PERMISSION"
    )
    q, nv, h = dev.q, dev.nv, dev.handle
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(2):
            assert q("power", nv.nvmlDeviceGetPowerUsage, h) is NA
            assert q("sm_clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM) is NA
            assert q.last_error == 999
            assert q("utilization", nv.nvmlDeviceGetUtilizationRates, h) is NA
            assert q.last_error == 6
            assert q("temperature", nv.nvmlDeviceGetTemperature, h, 0) is NA
    assert q.unsupported == {"power": "Not Supported", "temperature": "Insufficient Permissions"}
    # each said once: not available for good, a one-off failure once per code; NOT_FOUND is no news
    assert logged(caplog) == [
        "nvml: power not available: Not Supported",
        "nvml: sm_clock failed: Unknown Error",
        "nvml: temperature not available: Insufficient Permissions",
    ]
    clock.set(1.0)
    assert (
        q("power", nv.nvmlDeviceGetPowerUsage, h) is NA
    )  # for good, though the driver would answer now
    assert q("sm_clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM) == 1980
    assert q("utilization", nv.nvmlDeviceGetUtilizationRates, h).gpu == 50
    assert q.lost is None


@pytest.mark.parametrize(
    ("line", "reason"), [("lost_at 1.0", "GPU lost"), ("", "GPU requires a reset")]
)
def test_a_lost_gpu_is_said_once_and_never_asked_again(
    gpu: Start, caplog: pytest.LogCaptureFixture, line: str, reason: str
) -> None:
    reset = "" if line else "fail nvmlDeviceGetPowerUsage RESET_REQUIRED after=1.0"
    dev, clock = gpu(f"{DEVICE} power_w=140 gpu_util=50\n{line}\n{reset}")
    q, nv, h = dev.q, dev.nv, dev.handle
    q.where = "GPU 3: "
    assert q("power", nv.nvmlDeviceGetPowerUsage, h) == 140_000
    clock.set(1.0)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert q("power", nv.nvmlDeviceGetPowerUsage, h) is NA
        assert q.lost == reason
        clock.set(0.0)  # the driver would answer again: the query does not ask
        assert q("utilization", nv.nvmlDeviceGetUtilizationRates, h) is NA
        assert q.fail("power", 15) is NA and q.lost == reason  # the first reason stays
    assert logged(caplog) == [f"nvml: GPU 3: {reason} during power; its NVML metrics stop"]
    assert q.unsupported == {}


@pytest.mark.parametrize(
    ("variant", "used_mib", "older"),
    [
        ("full", 1000.0, []),
        (
            "no_v3",
            1300.0,
            [
                "compute_processes: nvmlDeviceGetComputeRunningProcesses_v3",
                "memory: nvmlDeviceGetMemoryInfo_v2",
                "temperature: nvmlDeviceGetTemperatureV",
            ],
        ),
        (
            "v1_only",
            1300.0,
            [
                "compute_processes: nvmlDeviceGetComputeRunningProcesses_v3",
                "compute_processes: nvmlDeviceGetComputeRunningProcesses_v2",
                "memory: nvmlDeviceGetMemoryInfo_v2",
                "temperature: nvmlDeviceGetTemperatureV",
            ],
        ),
    ],
)
def test_an_older_driver_is_called_through_the_newest_symbols_it_has(
    gpu_of: Callable[[str, str], tuple[Device, fake.Clock]],
    caplog: pytest.LogCaptureFixture,
    variant: str,
    used_mib: float,
    older: list[str],
) -> None:
    dev, _ = gpu_of(
        variant,
        f"{DEVICE} mem_used_mib=1000 mem_reserved_mib=300 temp_c=55\n"
        "proc pid=4001 mem_mib=700\nproc pid=4002 mem_mib=na",
    )
    q, calls, h = dev.q, dev.calls, dev.handle
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(2):  # the symbol found is kept: said once
            procs = q("compute_processes", calls.processes["Compute"], h)
            na = (
                2**64 - 1 if variant == "v1_only" else None
            )  # N/A, as pynvml leaves it per struct version
            assert [(p.pid, p.usedGpuMemory) for p in procs] == [(4001, 700 * MIB), (4002, na)]
            assert (
                q("memory", calls.memory, h).used == used_mib * MIB
            )  # v1 counts the reserved memory
            assert q("temperature", calls.temperature, h, pynvml.NVML_TEMPERATURE_GPU) == 55
    assert logged(caplog) == [f"nvml: {k} missing, using an older version" for k in older]
    assert q("graphics_processes", calls.processes["Graphics"], h) == []  # none of them graphics


def test_only_a_missing_symbol_falls_back_and_none_left_is_for_good(
    gpu_of: Callable[[str, str], tuple[Device, fake.Clock]], caplog: pytest.LogCaptureFixture
) -> None:
    dev, _ = gpu_of(
        "v1_only",
        f"{DEVICE}\nproc pid=4001 mem_mib=700\n"
        "fail nvmlDeviceGetComputeRunningProcesses NOT_SUPPORTED\n"
        "fail nvmlDeviceGetTemperature NOT_SUPPORTED",
    )
    q, nv, h = dev.q, dev.nv, dev.handle
    newest = (
        nv.nvmlDeviceGetComputeRunningProcesses_v3,
        nv.nvmlDeviceGetComputeRunningProcesses_v2,
    )
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert q("newest", newest, h) is NA  # neither symbol in this driver
        assert (
            q("compute_processes", dev.calls.processes["Compute"], h) is NA
        )  # the v1 call refused
        # an error other than a missing symbol is the answer, though an older symbol is there
        assert (
            q("temperature", (nv.nvmlDeviceGetTemperature, nv.nvmlDeviceGetTemperatureV), h, 0)
            is NA
        )
    assert q.unsupported == {
        "newest": "Function Not Found",
        "compute_processes": "Not Supported",
        "temperature": "Not Supported",
    }
    assert [m for m in logged(caplog) if "older version" in m] == [
        "nvml: newest: nvmlDeviceGetComputeRunningProcesses_v3 missing, using an older version",
        "nvml: compute_processes: nvmlDeviceGetComputeRunningProcesses_v3 missing, using an older version",
        "nvml: compute_processes: nvmlDeviceGetComputeRunningProcesses_v2 missing, using an older version",
    ]


def test_an_undecodable_string_is_a_one_off_failure_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q = Query(pynvml, where="GPU 1: ")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(2):
            assert q("name", lambda: b"GPU \xff".decode()) is NA
    assert q.last_error == -1 and q.unsupported == {} and q.lost is None
    assert logged(caplog) == ["nvml: GPU 1: name failed: undecodable string"]
    assert repr(NA) == "NA"


def test_the_process_utilisation_buffer_grows_to_what_the_driver_holds(gpu: Start) -> None:
    dev, clock = gpu(f"{DEVICE}\nproc pid=4001 sm_util=10\nproc pid=4002 sm_util=20")
    clock.set(
        10.0
    )  # the driver keeps 64 instants, one sample of each process at each: 128 > 64 at first
    samples = dev.calls.process_utilization(dev.handle, 0)
    assert len(samples) == 128
    assert sorted({(s.pid, s.smUtil) for s in samples}) == [(4001, 10), (4002, 20)]
    assert (
        len(dev.calls.process_utilization(dev.handle, 0)) == 128
    )  # and again, in the grown buffer
    with pytest.raises(pynvml.NVMLError_NotFound):
        dev.calls.process_utilization(dev.handle, 2**63)  # nothing newer


def test_text_words_every_code() -> None:
    q = Query(pynvml)
    assert q.text(None) == "unknown error" and q.text(-1) == "undecodable string"
    assert q.text(3) == "Not Supported"


def test_a_cadence_is_due_once_a_period_with_slack() -> None:
    c = Cadence(1.0)
    assert c.due(0.0) and not c.due(0.9) and c.due(0.95)  # 0.95: within the slack
    assert not c.due(1.0) and c.due(1.0, force=True) and not c.due(1.5)
    assert c.due(None) and c.due(0.0)  # no time: always due, and the next is due at once
    half = Cadence(1.0, slack=0.5)
    assert half.due(0.0) and half.due(0.5) and not half.due(0.9)
    two = Cadence(2.0)
    assert two.due(0.0) and not two.due(1.8) and two.due(1.9)


def test_conversions() -> None:
    value = pynvml.c_nvmlFieldValue_t()
    value.valueType, value.value.ullVal = 3, 2**40 + 7
    assert field_number(value) == 2**40 + 7
    value.valueType, value.value.dVal = 0, 2.5
    assert field_number(value) == 2.5
    value.valueType, value.value.uiVal = 1, 2**32 - 1
    assert field_number(value) == 2**32 - 1
    for value_type, member, number_ in (
        (2, "ulVal", 2**33 + 1),
        (4, "sllVal", -(2**40)),
        (5, "siVal", -7),
        (6, "usVal", 65535),
    ):
        value.value.ullVal = 0
        value.valueType = value_type
        setattr(value.value, member, number_)
        assert field_number(value) == number_
    assert mib(3 * MIB) == 3.0 and math.isnan(mib(None)) and math.isnan(mib(2**64 - 1))
    assert mib(2**64 - 2) == (2**64 - 2) / MIB
    assert number(7, 0.5) == 3.5 and number(7) == 7 and math.isnan(number(NA))
    assert text(NA) is None and text(12) == "12"
    assert integer(NA) is None and integer(3.0) == 3 and isinstance(integer(3.0), int)
