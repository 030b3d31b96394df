"""The live line's r and STP (``gpumon run --baseline``) equal ``gpumon compare`` on the same real captures (2 %)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpumon.core.records.bus import Bus
from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import WorkloadState
from gpumon.core.records.rates import Interference, interference
from gpumon.core.sources.replay import ReplaySource
from gpumon.core.store.trace import baseline_rate
from tests.helpers import gpumon, headless_cpu, only_run

# By time, not steps: the pair must overlap MIN_OVERLAP_S for the live line to give r and STP, whatever the machine's
# speed; B outlasts A and the start-up skew of the two children (A imports torch ~1 s later on a busy box)
A = "fcn:preset=tiny,duration=8"
B = "gemm:preset=tiny,duration=12"
STATUS_PERIOD_S = 1.0  # as gpumon.frontends.headless


def _capture(out: Path, *specs: str) -> Path:
    result = gpumon(
        *headless_cpu(
            out,
            *specs,
            "--duration",
            "240",
        ),
    )
    assert result.returncode == 0, result.stderr
    return only_run(out)


def _live_lines(shared: Path, exclusive: dict[str, float]) -> list[Interference]:
    """What ``--baseline`` prints once a second while both jobs run and when one leaves, from a replay of the shared run."""
    bus = Bus()
    live = LiveStats()
    running: set[str] = set()

    def track(item: object) -> None:
        if isinstance(item, WorkloadState):
            (running.add if item.state == "running" else running.discard)(item.slot)

    bus.subscribe(live.handle)
    bus.subscribe(track)
    source = ReplaySource(shared, bus)
    lines = []
    t = source.start_t
    while len(running) < 2 and not source.finished:
        t += STATUS_PERIOD_S
        source.seek(t)
    while len(running) == 2:
        t += STATUS_PERIOD_S
        source.seek(t)
        lines.append(interference(exclusive, live.overlap("AB")))
    return lines  # the last one: the final line, printed when the first job leaves the overlap


def test_live_slowdown_and_stp_equal_compare_on_real_captures(tmp_path):
    xa = _capture(tmp_path / "xa", A)
    xb = _capture(tmp_path / "xb", B)
    ab = _capture(tmp_path / "ab", A, B)

    result = gpumon(
        "compare", "--exclusive", str(xa), "--exclusive", str(xb), "--shared", str(ab), "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)

    exclusive = {"A": baseline_rate("A", xa), "B": baseline_rate("B", xb)}
    for slot in "AB":
        assert exclusive[slot] == pytest.approx(
            report["workloads"][slot]["exclusive_rate"], rel=1e-9
        )
    lines = [line for line in _live_lines(ab, exclusive) if not math.isnan(line.stp)]
    assert len(lines) >= 2, "the live line had no STP while both jobs ran"
    last = lines[-1]
    for slot in "AB":
        assert last.slowdown[slot] == pytest.approx(
            report["workloads"][slot]["slowdown"]["estimate"], rel=0.02
        )
    assert last.stp == pytest.approx(report["pair"]["stp"]["estimate"], rel=0.02)
