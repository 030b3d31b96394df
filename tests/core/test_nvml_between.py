"""A tick between the once-a-second reads (core/sources/nvml.py ``NvmlSource.sample``), on the fake libnvidia-ml
loaded in this process: utilisation and the SM clock read again, every other field the last reading's, exactly what
the full reading would have carried; the wrapping counters make every tick a full reading; errors of the two calls
stay the query's (NaN, unsupported for good, a lost GPU ends the readings).

Each scenario changes every metric at t=0.3 (the fake's clock is stepped by the test): a field read at 0.5 shows the
new value, a field carried shows the old one.
"""

from __future__ import annotations

import dataclasses
import math
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Iterator

import pytest

from gpumon.core.records.model import DeviceSample
from gpumon.core.sources.nvml import NvmlSource
from gpumon.core.sources.nvmldevice import DeviceReader
from tests.fakenvml import build as fake
from tests.fakenvml.inprocess import built, loaded

BEFORE = "gpu_util=10 mem_util=5 sm_clock_mhz=1000 power_w=100 temp_c=40 mem_used_mib=1000"
AFTER = "gpu_util=60 mem_util=30 sm_clock_mhz=1500 power_w=300 temp_c=70 mem_used_mib=2000"
GPM = "gpm=1 sm_active_pct=20 pcie_rx_bps=1e9 pcie_tx_bps=1e8"
GPM_AFTER = "sm_active_pct=80 pcie_rx_bps=5e9 pcie_tx_bps=5e8"

Opened = Callable[[str], tuple[NvmlSource, fake.Clock]]


@pytest.fixture
def opened(fake_cache: Path, tmp_path: Path) -> Iterator[Opened]:
    """``open(scenario)``: an NvmlSource opened on the fake running ``scenario`` at its time 0, and its clock."""
    with ExitStack() as stack:

        def start(scenario: str) -> tuple[NvmlSource, fake.Clock]:
            clock = stack.enter_context(loaded(built(fake_cache), tmp_path, scenario))
            source = NvmlSource(0)
            stack.callback(source.close)
            assert source.open().available
            return source, clock

        yield start


def at(source: NvmlSource, clock: fake.Clock, t: float) -> DeviceSample:
    """The reading at run time ``t``, the fake's clock at ``t`` too."""
    clock.set(t)
    sample = source.sample(t)
    assert sample is not None
    return sample


def test_a_tick_between_reads_only_utilisation_and_the_clock_and_carries_the_rest(
    opened: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, clock = opened(f"device {BEFORE} {GPM}\nat 0.3 {AFTER} {GPM_AFTER}")
    full_reads: list[float] = []
    read = DeviceReader.read

    def counted(self: DeviceReader, t: float) -> dict[str, float]:
        full_reads.append(t)
        return read(self, t)

    monkeypatch.setattr(DeviceReader, "read", counted)
    first = at(source, clock, 0.1)
    assert (first.gpu_util, first.power_w, first.temp_c, first.mem_used_mib) == (10, 100, 40, 1000)
    assert first.sm_active_pct == pytest.approx(20) and first.pcie_rx_bps == pytest.approx(1e9)
    between = at(source, clock, 0.5)
    # every field but the fast three is the first reading's (a full reading at 0.5 carries them too: their second
    # has not come), the fast three are read now
    assert between == dataclasses.replace(
        first, t=0.5, gpu_util=60.0, mem_util=30.0, sm_clock_mhz=1500.0
    )
    full = at(source, clock, 1.1)  # the slow fields' second has come: all read again
    assert full_reads == [0.1, 1.1]  # the tick between made none
    assert (full.gpu_util, full.power_w, full.temp_c, full.mem_used_mib) == (60, 300, 70, 2000)
    # GPM: the mean since its last reading at 0.1 (20 % until 0.3, 80 % after)
    assert full.sm_active_pct == pytest.approx((0.2 * 20 + 0.8 * 80) / 1.0)
    assert full.pcie_rx_bps == pytest.approx((0.2 * 1e9 + 0.8 * 5e9) / 1.0, rel=0.01)


def test_the_wrapping_counters_make_every_tick_a_full_reading(opened: Opened) -> None:
    source, clock = opened(
        f"device {BEFORE} gpm=0 pcie_counter_bits=32 pcie_rx_bps=1e9\nat 0.3 {AFTER} pcie_rx_bps=5e9"
    )
    assert source.device_info()["pcie_method"] == "counters"
    period = source.pcie_poll_period_s
    assert period is not None
    at(source, clock, 0.1)
    before = at(source, clock, 0.2)
    for poll in range(1, math.ceil(0.3 / period)):  # as the sampler polls between ticks
        clock.set(0.2 + poll * period)
        source.poll_pcie(0.2 + poll * period)
    after = at(source, clock, 0.5)
    assert before.pcie_rx_bps == pytest.approx(1e9, rel=0.15)
    # the counters' bytes between 0.2 and 0.5 (0.1 s at 1 GB/s, 0.2 s at 5), not the last reading carried
    assert after.pcie_rx_bps == pytest.approx((0.1 * 1e9 + 0.2 * 5e9) / 0.3, rel=0.15)
    assert (after.gpu_util, after.power_w) == (60, 100)  # power's second has not come: carried


def test_the_fast_calls_errors_stay_the_querys(opened: Opened) -> None:
    source, clock = opened(
        f"device {BEFORE} {GPM}\n"
        "fail nvmlDeviceGetClockInfo NOT_SUPPORTED after=0.4\n"
        "fail nvmlDeviceGetUtilizationRates UNKNOWN after=0.4 until=0.6"
    )
    at(source, clock, 0.1)
    failed = at(source, clock, 0.5)
    assert math.isnan(failed.gpu_util) and math.isnan(failed.mem_util)
    assert math.isnan(failed.sm_clock_mhz) and failed.power_w == 100
    again = at(source, clock, 0.7)  # a one-off error: read again; unsupported: never asked again
    assert again.gpu_util == 10 and math.isnan(again.sm_clock_mhz)
    assert "sm_clock_mhz" in source.device_info()["unsupported"]
    assert "gpu_util" not in source.device_info()["unsupported"]


def test_a_gpu_lost_between_the_reads_ends_them(opened: Opened) -> None:
    source, clock = opened(f"device {BEFORE} {GPM}\nlost_at 0.4")
    at(source, clock, 0.1)
    clock.set(0.5)
    assert source.sample(0.5) is None
    assert not source.status.available
