"""The PCIe readers (core/sources/nvmlpcie.py) on the fake libnvidia-ml loaded in this process.

Which method ``choose_pcie`` takes, each reader's cadence, the counters' wraps and every way a method fails,
with values worked by hand from the scenario (the fake's counters are the integral of the scripted rate up to
the last 20 ms step, floored to bytes; its throughput call is the last 20 ms in KB/s; its GPM metrics are the
means of the scripted values between two samples). tests/core/test_nvml.py checks the same through NvmlSource
in child interpreters; these run in the test's own process (tests/fakenvml/inprocess.py), where mutation testing
sees them.
"""

from __future__ import annotations

import logging
import math
from typing import Callable

import pytest

from gpumon.core.sources.nvmlpcie import (
    CounterPcie,
    GpmPcie,
    GpmReader,
    ThroughputPcie,
    choose_pcie,
)
from gpumon.core.sources.nvmlquery import Device
from gpumon.core.sources.pcie import link_capacity_bps, poll_period_s
from tests.fakenvml import build as fake
from tests.fakenvml.inprocess import Start

CAPACITY = link_capacity_bps(5, 16)
assert CAPACITY is not None
PERIOD_32 = poll_period_s(
    32, CAPACITY
)  # ~33 ms: a 32-bit counter wraps every ~65 ms at the link's best
assert PERIOD_32 is not None
MIB = 1024 * 1024
DEVICE = 'device name="Fake H100" uuid=GPU-pcie mem_total_mib=81559 pcie_gen=5 pcie_width=16'
GPM_FIELDS = ["pcie_rx_bps", "pcie_tx_bps", "sm_active_pct", "sm_occupancy_pct", "dram_bw_pct"]
ONLY_GPM_PCIE = "\n".join(f"fail gpm:{m} NOT_SUPPORTED" for m in (2, 3, 5, 10))
NO_COUNTERS = "fail nvmlDeviceGetFieldValues NOT_SUPPORTED"


@pytest.fixture
def gpu(
    gpu_of: Callable[[str, str], tuple[Device, fake.Clock]], monkeypatch: pytest.MonkeyPatch
) -> Start:
    """The full fake's GPU 0 with GPM allowed (GPUMON_NO_GPM unset)."""
    monkeypatch.delenv("GPUMON_NO_GPM", raising=False)
    return lambda scenario: gpu_of("full", scenario)


def chosen(dev: Device) -> tuple[GpmReader | None, object]:
    gpm, _ = GpmReader.open(dev)
    return gpm, choose_pcie(dev, gpm, CAPACITY)


@pytest.mark.parametrize(
    ("extra", "method", "bits", "period"),
    [
        ("gpm=1", "gpm", None, None),
        (f"gpm=1\n{ONLY_GPM_PCIE}", "gpm", None, None),  # GPM's PCIe alone is enough
        ("gpm=1\nfail gpm:21 NOT_SUPPORTED", "counters", 32, PERIOD_32),  # GPM without RX
        ("gpm=1\nfail gpm:20 NOT_SUPPORTED", "counters", 32, PERIOD_32),  # GPM without TX
        ("gpm=0", "counters", 32, PERIOD_32),
        ("gpm=0 pcie_counter_bits=64", "counters", 64, None),  # never wraps: never polled
        ("fail field:197 NOT_SUPPORTED", "throughput", None, None),
        ("fail field:198 UNKNOWN", "throughput", None, None),  # a counter that fails when chosen
        (f"{NO_COUNTERS}\nfail nvmlDeviceGetPcieThroughput NOT_SUPPORTED", None, None, None),
        (f"{NO_COUNTERS}\nfail nvmlDeviceGetPcieThroughput UNKNOWN", None, None, None),
    ],
)
def test_choose_pcie_takes_gpm_else_the_counters_else_the_throughput_call(
    gpu: Start, extra: str, method: str | None, bits: int | None, period: float | None
) -> None:
    dev, _ = gpu(f"{DEVICE} {extra}" if extra.startswith("gpm") else f"{DEVICE}\n{extra}")
    gpm, reader = chosen(dev)
    if method is None:
        assert reader is None
        # each method's query named as what failed for good (the throughput call's UNKNOWN only once)
        assert dev.q.unsupported == {
            "pcie_counters": "Not Supported",
            **(
                {"pcie_throughput": "Not Supported"} if "NOT_SUPPORTED" in extra.split()[-1] else {}
            ),
        }
        return
    expected = {"gpm": GpmPcie, "counters": CounterPcie, "throughput": ThroughputPcie}[method]
    assert type(reader) is expected
    assert (reader.method, reader.counter_bits, reader.poll_period_s) == (method, bits, period)
    if gpm is not None and method == "gpm":
        gpm.read(0.0)
        assert reader.rates(0.0) == gpm.pcie  # GPM's PCIe metrics are all it needs


@pytest.mark.parametrize(
    ("device", "switch", "reason"),
    [
        ("gpm=1", "1", "GPM switched off (GPUMON_NO_GPM=1)"),
        ("gpm=1", "yes", "GPM switched off (GPUMON_NO_GPM=yes)"),
        ("gpm=1", "0", ""),  # "0" is off, like unset
        ("gpm=1", "", ""),
        ("gpm=1 mig=1", "", "MIG is enabled (GPM device samples do not cover MIG instances)"),
        ("gpm=1\nfail nvmlDeviceGetMigMode NOT_SUPPORTED", "", ""),  # MIG unknown: GPM is tried
        ("gpm=0", "", "GPM not supported on this GPU (Hopper or newer only)"),
    ],
)
def test_gpm_is_opened_unless_switched_off_split_by_mig_or_missing(
    gpu: Start,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    device: str,
    switch: str,
    reason: str,
) -> None:
    dev, _ = gpu(f"{DEVICE} {device}")
    monkeypatch.setenv("GPUMON_NO_GPM", switch)
    with caplog.at_level(logging.INFO, logger="gpumon.core.sources.nvmlquery"):
        reader, why = GpmReader.open(dev)
    assert why == reason and (reader is None) == bool(reason)
    assert dev.q.unsupported == ({"mig_mode": "Not Supported"} if "MigMode" in device else {})
    if reader is not None:
        assert reader.fields() == [*GPM_FIELDS, "tensor_active_pct"]
    # A GPU that answers that it has no GPM is logged (the other reasons are the caller's to say).
    logged = [r.getMessage() for r in caplog.records if r.name == "gpumon.core.sources.nvmlquery"]
    assert (f"nvml: {reason}" in logged) == reason.startswith("GPM not")


def test_gpm_is_read_once_a_second_and_each_reading_is_the_mean_since_the_last(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE} gpm=1 pcie_rx_bps=58e9 pcie_tx_bps=5.2e9 sm_active_pct=0.5 dram_bw_pct=1.6 "
        "tensor_active_pct=7\n"
        "at 0.5 pcie_rx_bps=10e9 sm_active_pct=0.9\n"
        "fail gpm:3 NOT_SUPPORTED"
    )
    reader, _ = GpmReader.open(dev)
    assert reader is not None and reader.fields() == [
        *(f for f in GPM_FIELDS if f != "sm_occupancy_pct"),
        "tensor_active_pct",
    ]
    assert all(math.isnan(v) for v in (*reader.columns.values(), *reader.pcie))  # nothing read yet
    pcie = GpmPcie(reader)
    clock.set(0.1)
    reader.read(0.1)
    assert reader.pcie == pytest.approx((58e9, 5.2e9), abs=MIB)  # GPM says MiB/s
    assert pcie.rates(0.1) == reader.pcie
    assert reader.columns["sm_active_pct"] == pytest.approx(0.5)
    assert reader.columns["dram_bw_pct"] == pytest.approx(1.6)
    assert math.isnan(reader.columns["sm_occupancy_pct"])  # its metric does not work
    assert math.isnan(reader.columns["tensor_active_pct"])  # the dear metric: every 5 s only
    clock.set(0.6)
    reader.read(0.6)  # its second has not come: the last reading stays
    assert reader.pcie[0] == pytest.approx(58e9, abs=MIB)
    assert reader.columns["sm_active_pct"] == pytest.approx(0.5)
    clock.set(1.05)
    reader.read(1.05)  # 0.95 s after the last: due (a tick may drift a little early)
    assert reader.pcie[0] == pytest.approx((58e9 * 0.4 + 10e9 * 0.55) / 0.95, abs=MIB)
    assert reader.columns["sm_active_pct"] == pytest.approx((0.5 * 0.4 + 0.9 * 0.55) / 0.95)
    assert math.isnan(reader.columns["tensor_active_pct"])
    clock.set(5.0)
    reader.read(5.0)  # five seconds since GPM opened (at 0): the tensor metric too
    assert reader.columns["tensor_active_pct"] == pytest.approx(7.0)
    assert reader.pcie[0] == pytest.approx(10e9, abs=MIB)


def test_gpm_that_fails_for_good_hands_pcie_back_to_the_chooser(gpu: Start) -> None:
    dev, clock = gpu(f"{DEVICE} gpm=1\nfail nvmlGpmSampleGet NOT_SUPPORTED after=1.0")
    reader, pcie = chosen(dev)
    assert reader is not None and type(pcie) is GpmPcie
    clock.set(0.5)
    reader.read(0.5)
    assert reader.fields() == [*GPM_FIELDS, "tensor_active_pct"]
    assert pcie.rates(0.5) is not None
    clock.set(1.5)
    reader.read(1.5)
    assert reader.fields() == []
    assert pcie.rates(1.5) is None
    assert type(choose_pcie(dev, reader, CAPACITY)) is CounterPcie


@pytest.mark.parametrize(("metric", "lacking"), [(21, 0), (20, 1)])  # RX, TX
def test_a_pcie_metric_gpm_lacks_is_nan_and_its_reader_answers_none(
    gpu: Start, metric: int, lacking: int
) -> None:
    dev, clock = gpu(
        f"{DEVICE} gpm=1 pcie_rx_bps=58e9 pcie_tx_bps=5.2e9\nfail gpm:{metric} NOT_SUPPORTED"
    )
    reader, _ = GpmReader.open(dev)
    assert reader is not None
    clock.set(0.5)
    reader.read(0.5)
    assert math.isnan(reader.pcie[lacking])
    assert reader.pcie[1 - lacking] == pytest.approx((58e9, 5.2e9)[1 - lacking], abs=MIB)
    assert GpmPcie(reader).rates(0.5) is None


def test_64bit_counters_are_read_at_every_tick_and_differenced_exactly(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE} pcie_rx_bps=3e9 pcie_tx_bps=1.5e9 pcie_counter_bits=64 pcie_counter_step_ms=50\n"
        "at 1.0 pcie_rx_bps=6e9 pcie_tx_bps=0"
    )
    _, reader = chosen(dev)
    assert isinstance(reader, CounterPcie)
    got = []
    for t in (0.2, 0.45, 1.3):
        clock.set(t)
        got.append(reader.rates(t))
    assert all(math.isnan(v) for v in got[0])  # the first reading only marks
    assert got[1] == pytest.approx((3e9, 1.5e9), abs=4)
    assert got[2] == pytest.approx(((3e9 * 0.55 + 6e9 * 0.3) / 0.85, 1.5e9 * 0.55 / 0.85), abs=2)


def test_32bit_counters_are_read_between_ticks_only_when_their_poll_is_overdue(gpu: Start) -> None:
    dev, clock = gpu(f"{DEVICE} pcie_rx_bps=58e9 pcie_tx_bps=5.2e9\nat 0.03 pcie_rx_bps=10e9")
    _, reader = chosen(dev)
    assert isinstance(reader, CounterPcie) and reader.poll_period_s == PERIOD_32
    reader.poll(0.0)
    assert all(
        math.isnan(v) for v in reader.rates(0.0)
    )  # just polled: no read; the first rates mark
    clock.set(PERIOD_32)
    # a whole period since the poll: read now (the counters' step at 20 ms)
    assert reader.rates(PERIOD_32) == pytest.approx((58e9, 5.2e9), abs=50)
    # 10 ms later: not read again, and no new counter step since the last rates
    assert all(math.isnan(v) for v in reader.rates(PERIOD_32 + 0.01))
    clock.set(0.04)
    reader.poll(0.04)
    clock.set(0.06)
    # 20 ms after the poll: not read again, the rate is up to the poll's step (40 ms: 58 GB/s for 10 ms, then 10)
    assert reader.rates(0.06) == pytest.approx((34e9, 5.2e9), abs=50)
    clock.set(0.2)
    # 160 ms since the last read: a whole wrap could hide in it, and the rate is not guessed
    assert all(math.isnan(v) for v in reader.rates(0.2))


def test_a_counter_failing_once_keeps_the_method_and_for_good_hands_it_on(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE} pcie_counter_bits=64\n"
        "fail field:198 UNKNOWN after=0.1 until=0.2\n"
        "fail nvmlDeviceGetFieldValues UNKNOWN after=0.3 until=0.4\n"
        "fail field:197 NOT_SUPPORTED after=0.5"
    )
    _, reader = chosen(dev)
    assert isinstance(reader, CounterPcie)
    assert reader.read(0.0) is True
    clock.set(0.15)
    assert reader.read(0.15) is False and dev.q.last_error == 999  # TX failed once (UNKNOWN)
    assert reader.rates(0.15) is not None and dev.q.unsupported == {}
    clock.set(0.35)
    assert reader.read(0.35) is False  # the whole call failed once
    assert reader.rates(0.35) is not None
    clock.set(0.6)
    assert reader.rates(0.6) is None  # RX not supported any more: for good
    assert dev.q.unsupported == {"pcie_counters": "Not Supported"}
    assert type(choose_pcie(dev, None, CAPACITY)) is ThroughputPcie


def test_counters_whose_call_turns_unsupported_hand_the_method_on(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE} pcie_counter_bits=64\nfail nvmlDeviceGetFieldValues NOT_SUPPORTED after=0.5"
    )
    _, reader = chosen(dev)
    assert isinstance(reader, CounterPcie) and reader.rates(0.0) is not None
    clock.set(0.6)
    assert reader.rates(0.6) is None
    assert dev.q.unsupported == {"pcie_counters": "Not Supported"}


def test_the_throughput_call_is_read_once_a_second_in_kib(gpu: Start) -> None:
    dev, clock = gpu(
        f"{DEVICE} pcie_rx_bps=4194816 pcie_tx_bps=1049088\n"  # 4096.5 and 1024.5 KB/s: whole KB/s read
        f"{NO_COUNTERS}\n"
        "at 0.5 pcie_rx_bps=8389120\n"
        "fail nvmlDeviceGetPcieThroughput NOT_SUPPORTED after=2.0"
    )
    _, reader = chosen(dev)
    assert isinstance(reader, ThroughputPcie)
    assert reader.rates(0.0) == (4194304.0, 1048576.0)  # KB/s of 1024 bytes
    clock.set(0.6)
    assert reader.rates(0.6) == (4194304.0, 1048576.0)  # its second has not come
    clock.set(0.95)
    assert reader.rates(0.95) == (8388608.0, 1048576.0)
    clock.set(2.0)
    assert reader.rates(2.0) is None
    assert dev.q.unsupported == {
        "pcie_counters": "Not Supported",
        "pcie_throughput": "Not Supported",
    }
