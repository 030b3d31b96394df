"""A CPU job that shared its cores with other work while it ran alone: its CPU share there is what it got, not what it
needed, so two of them on one core are predicted to take turns (r = 1 + the partner's share), not to fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumon.analysis.predict import predict
from gpumon.analysis.predict_model import CPU, Solo, predict_pair, room_for_both
from gpumon.core.interference.evidence import Window, cores_busy
from gpumon.core.store.trace import load_run
from tests.tracegen import paced_job, write_run


def _alone_on_core_0(root: Path, slot: str, spec: str, rate: float, core_0_busy: float) -> Path:
    """``spec`` alone at ``rate`` it/s pinned to core 0, its process tree at 50 % CPU (half of core 0), core 0 at
    ``core_0_busy`` % and core 1 at 10 % throughout."""
    job = paced_job(
        slot, spec, 0.0, 20.0, alone=rate, shared=rate, shared_from=0.0, cpu=50.0, affinity=(0,)
    )
    return write_run(
        root,
        (job,),
        label=spec.split(":")[0],
        per_core=lambda t: (core_0_busy, 10.0),
        interval_s=0.5,
    )


def _pair(tmp_path: Path, core_0_busy: float):
    runs = [
        load_run(_alone_on_core_0(tmp_path / name, slot, f"{name}:preset=tiny", rate, core_0_busy))
        for slot, name, rate in (("A", "fcn", 40.0), ("B", "gemm", 25.0))
    ]
    (prediction,) = predict(runs)
    return prediction


def test_jobs_that_had_a_full_core_with_other_work_on_it_take_turns_on_it(tmp_path: Path):
    # Each alone got half of core 0 while something else took the other half: together, the core is split three
    # ways and each gets a third instead of a half: r = 1 + the partner's share = 1.5.
    prediction = _pair(tmp_path, core_0_busy=100.0)
    assert [e.value for e in prediction.slowdown] == pytest.approx([1.5, 1.5])
    assert (
        prediction.reason == "both on the same cores, more than they hold: they take turns on them"
    )
    assert any(
        note.startswith("A and B's cores were full with other work too")
        for note in prediction.notes
    )


def test_half_idle_jobs_alone_on_a_core_fit_on_it_together(tmp_path: Path):
    # Core 0 was 50 % busy: the job's own half, nothing else; it left the rest idle by itself, so two such jobs fit.
    prediction = _pair(tmp_path, core_0_busy=50.0)
    assert [e.value for e in prediction.slowdown] == pytest.approx([1.0, 1.0])
    assert prediction.reason == "their cores have room for both: neither waits for the other"
    assert not any("cores were full" in note for note in prediction.notes)


def test_cores_busy_averages_the_jobs_cores_over_the_window_only(tmp_path: Path):
    job = paced_job(
        "A", "fcn:preset=tiny", 0.0, 20.0, alone=40.0, shared=40.0, shared_from=0.0, affinity=(0,)
    )
    run = load_run(
        write_run(
            tmp_path / "r",
            (job,),
            per_core=lambda t: (100.0, 20.0) if t < 10 else (0.0, 0.0),
            interval_s=0.5,
        )
    )
    assert cores_busy(Window(run, "A", 0.0, 9.9), frozenset({0})) == pytest.approx(1.0)
    assert cores_busy(Window(run, "A", 0.0, 9.9), frozenset({0, 1})) == pytest.approx(0.6)
    assert cores_busy(Window(run, "A", 10.0, 20.0), frozenset({0})) == pytest.approx(0.0)
    assert cores_busy(Window(run, "A", 0.0, 9.9), frozenset({2})) != cores_busy(
        Window(run, "A", 0.0, 9.9), frozenset({2})
    )  # NaN: no such core


def test_one_crowded_job_is_enough_to_take_turns():
    # A half-idle job beside one that was crowded alone: the crowded one would use the room the other leaves, so they
    # take turns: r = 1 + the partner's share (0.5 each).
    crowded = Solo(step_s=0.01, cpu_share=0.5, cores=frozenset({0}), contended=True)
    idle_half = Solo(step_s=0.01, cpu_share=0.5, cores=frozenset({0}))
    assert not room_for_both(crowded, idle_half) and not room_for_both(idle_half, crowded)
    assert room_for_both(idle_half, idle_half)
    assert predict_pair(crowded, idle_half, CPU).slowdown == pytest.approx((1.5, 1.5))
