"""The sampling interval gpumon chooses when ``--interval`` is not given, and the H100 evidence behind it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpumon.core.capture.sampler import (
    COUNTER_INTERVAL_MS,
    NO_NVML_INTERVAL_MS,
    PROCESS_PERIOD_S,
    UTILISATION_INTERVAL_MS,
    auto_interval_ms,
)

H100 = Path(__file__).resolve().parents[1] / "data" / "h100"


def test_the_h100s_driver_updates_utilisation_every_utilisation_interval():
    """The H100's captures, sampled every 100 ms, hold every utilisation value for an even number of samples: the
    driver updates it every 200 ms, so a tick between the once-a-second reads any faster records a value twice."""
    held: list[int] = []
    for path in sorted(H100.glob("*/device.csv")):
        device = pd.read_csv(path)
        step_ms = device["t"].diff().median() * 1000
        assert abs(step_ms - COUNTER_INTERVAL_MS) < 1, path  # sampled at 100 ms
        for column in ("gpu_util", "mem_util"):
            runs = (device[column] != device[column].shift()).cumsum()
            held += list(
                device.groupby(runs).size().iloc[1:-1]
            )  # whole runs: not the first or last
    assert len(held) > 100
    assert all(samples % 2 == 0 for samples in held), sorted(set(held))
    assert UTILISATION_INTERVAL_MS == 2 * COUNTER_INTERVAL_MS


def test_without_nvml_a_tick_comes_once_a_process_period():
    assert auto_interval_ms(None) == NO_NVML_INTERVAL_MS == PROCESS_PERIOD_S * 1000
