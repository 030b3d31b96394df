"""gpumon.analysis.compare on synthetic runs whose answers are known by construction: the JSON says what the
result holds, key by key; a job watched without a probe; baselines from exclusive phases before and after the
other job, merged by duration; where a slot's process ran when run.json does not say. Written for the mutation
run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpumon.analysis.compare import (
    MAX_TEST_SAMPLES,
    _thinned,
    EXCLUSIVE_PHASE,
    EXCLUSIVE_RUNS,
    _RunData,
    compare,
    compare_paths,
)
from gpumon.analysis.slowdown import CONFIDENCE
from gpumon.core.store.trace import load_run
from tests.tracegen import COLLEAGUE, Job, fcn_twice, write_run

FCN, GEMM = "fcn:preset=tiny", "gemm:preset=tiny"


def _alone(root: Path, slot: str, spec: str, step_s: float, seconds: float = 20.0) -> Path:
    return write_run(
        root, [Job(slot, spec, ((seconds, step_s),))], label=f"{spec.split(':')[0]}-alone"
    )


def test_the_json_holds_what_the_result_holds(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)  # 20 it/s alone
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.1)  # 10 it/s alone
    ab = write_run(
        tmp_path / "ab",
        [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((20.0, 0.125),))],
        others=(COLLEAGUE,),
        gpu_util=50.0,
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=200)
    a, b = c.workload("A"), c.workload("B")
    assert (a.exclusive_rate, a.shared_rate) == (pytest.approx(20.0), pytest.approx(10.0))
    assert (b.exclusive_rate, b.shared_rate) == (pytest.approx(10.0), pytest.approx(8.0))
    assert a.baseline == EXCLUSIVE_RUNS and b.slowdown.value == pytest.approx(1.25)
    data = json.loads(json.dumps(c.to_dict(), allow_nan=False))
    assert set(data) == {
        "confidence",
        "interval_basis",
        "exclusive_runs",
        "shared_runs",
        "workloads",
        "pair",
        "warnings",
        "notes",
        "caution",
    }
    assert data["confidence"] == CONFIDENCE and data["interval_basis"] == c.interval_basis
    assert data["exclusive_runs"] == [str(xa), str(xb)] and data["shared_runs"] == [str(ab)]
    assert (
        data["warnings"] == list(c.warnings) and data["notes"] == list(c.notes) and data["caution"]
    )
    for slot, w in (("A", a), ("B", b)):
        got = data["workloads"][slot]
        assert got["spec"] == w.spec and got["baseline"] == w.baseline
        assert (got["exclusive_rate"], got["shared_rate"]) == (w.exclusive_rate, w.shared_rate)
        assert got["slowdown"] == {
            "estimate": w.slowdown.value,
            "low": w.slowdown.low,
            "high": w.slowdown.high,
        }
        inverse = w.normalized_throughput
        assert got["normalized_throughput"] == {
            "estimate": inverse.value,
            "low": inverse.low,
            "high": inverse.high,
        }
        assert got["exclusive"] == [s.to_dict() for s in w.exclusive] and len(got["exclusive"]) == 1
        assert (
            got["shared"] == [s.to_dict() for s in w.shared]
            and got["shared"][0]["role"] == "shared"
        )
        assert got["distributions"] == {d.metric: d.to_dict() for d in w.distributions}
        assert got["cause"] == w.why.cause and got["shares"] == w.why.to_dict()["shares"]
        assert "rate" not in got and "known" not in got
    pair = data["pair"]
    assert pair["stp"] == {
        "estimate": c.pair.stp.value,
        "low": c.pair.stp.low,
        "high": c.pair.stp.high,
    }
    assert pair["verdict"] == c.pair.verdict and pair["share"] == "timeslice"
    assert (
        pair["windows"] == [w.to_dict() for w in c.pair.windows]
        and pair["windows"][0]["role"] == "overlap"
    )
    assert pair["disturbed_by"] == [d.to_dict() for d in c.disturbed_by]
    assert {d["role"] for d in pair["disturbed_by"]} == {"pair"} and pair["disturbed_by"][0][
        "pid"
    ] == COLLEAGUE.pid


def _blind_pair(
    root: Path, a_start: float = 5.0, a_stop: float = 20.0, b_stop: float = 20.0
) -> Path:
    """B (no probe) from 0 s, at SM 80 % alone then 40 % beside A; A steps every 0.1 s from ``a_start``."""
    a = Job("A", FCN, ((a_stop, 0.1),), start=a_start)
    b = Job("B", "python blind.py", (), stop=b_stop, gpu_sm_util=80.0, gpu_mem_mib=2048.0)
    path = write_run(root, [a, b])
    meta = json.loads((path / "run.json").read_text())
    meta["workloads"][1].update(kind="beside", attached=True, owned=False, probe=False)
    (path / "run.json").write_text(json.dumps(meta))
    procs = pd.read_csv(path / "processes.csv")
    procs.loc[(procs["process"] == "B") & (procs["t"] > a_start), "gpu_sm_util"] = 40.0
    procs.to_csv(path / "processes.csv", index=False)
    return path


def test_a_job_without_a_probe_is_told_in_what_is_known(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    shared = _blind_pair(tmp_path / "ab")
    c = compare([load_run(xa)], [load_run(shared)])
    a, b = c.workload("A"), c.workload("B")
    assert (a.exclusive_rate, a.shared_rate, a.slowdown.value) == (
        pytest.approx(20.0),
        pytest.approx(10.0),
        pytest.approx(2.0),
    )
    assert a.normalized_throughput.value == pytest.approx(0.5) and a.baseline == EXCLUSIVE_RUNS
    assert (a.shared[0].start, a.shared[0].end) == (pytest.approx(5.1), pytest.approx(20.0))
    assert (c.pair.windows[0].start, c.pair.windows[0].end, c.pair.windows[0].steps) == (
        pytest.approx(5.1),
        pytest.approx(20.0),
        149,
    )
    assert b.baseline == "unknown (no probe)" and b.known is not None
    assert (b.known.sm_alone, b.known.sm_shared, b.known.mem_alone_mib, b.known.mem_shared_mib) == (
        80.0,
        40.0,
        2048.0,
        2048.0,
    )
    assert c.warnings[0] == (
        "B (python blind.py) has no probe: its rate is unknown (no probe), so no slowdown for "
        "it and no STP; what is known: SM 80 % alone → 40 % beside fcn (-50 %), "
        "GPU memory 2.0 GiB → 2.0 GiB"
    )
    assert c.pair.verdict == "cannot tell" and not c.pair.stp.has_interval
    assert c.notes == (
        "No intervals: one job's steps are unseen, so there is no joint bootstrap of the pair.",
    )
    assert c.exclusive_runs == (str(xa),) and c.shared_runs == (str(shared),)
    as_json = c.to_dict()["workloads"]["B"]
    assert as_json["rate"] == "unknown (no probe)" and as_json["known"]["sm_pct_alone"] == 80.0


def test_without_a_probe_and_without_a_baseline(tmp_path: Path) -> None:
    other = _alone(tmp_path / "xg", "A", GEMM, 0.05)  # another job's run: not A's baseline
    c = compare([load_run(other)], [load_run(_blind_pair(tmp_path / "ab"))])
    a = c.workload("A")
    assert (
        a.exclusive_rate != a.exclusive_rate and a.slowdown.value != a.slowdown.value
    )  # NaN: no baseline
    assert c.warnings[1] == f"A ({FCN}) never ran alone: no baseline, so no slowdown for it."
    assigned = compare(
        [load_run(other)], [load_run(_blind_pair(tmp_path / "ab2"))], assign={str(other): "A"}
    )
    assert assigned.workload("A").exclusive_rate == pytest.approx(
        20.0
    )  # --exclusive A=RUN: whatever its spec


def test_without_a_probe_the_baseline_from_the_jobs_own_solo_phase(tmp_path: Path) -> None:
    """No exclusive run: A's baseline is where it ran alone, after B (no probe) ended at 12 s."""
    a = Job(
        "A", FCN, ((12.0, 0.1), (20.0, 0.05)), start=5.0
    )  # 10 it/s beside B, 20 it/s alone after it
    b = Job("B", "python blind.py", (), stop=12.0, gpu_sm_util=80.0, gpu_mem_mib=2048.0)
    path = write_run(tmp_path / "ab", [a, b])
    meta = json.loads((path / "run.json").read_text())
    meta["workloads"][1].update(kind="beside", attached=True, owned=False, probe=False)
    (path / "run.json").write_text(json.dumps(meta))
    c = compare([], [load_run(path)])
    w = c.workload("A")
    assert w.baseline == EXCLUSIVE_PHASE
    assert (w.exclusive_rate, w.shared_rate) == (pytest.approx(20.0), pytest.approx(10.0))
    assert w.slowdown.value == pytest.approx(2.0)


def test_neither_job_probed_is_refused(tmp_path: Path) -> None:
    path = _blind_pair(tmp_path / "ab")
    meta = json.loads((path / "run.json").read_text())
    meta["workloads"][0].update(attached=True, probe=False)
    (path / "run.json").write_text(json.dumps(meta))
    from gpumon.errors import UsageError

    with pytest.raises(UsageError):
        compare([], [load_run(path)])


def _staggered(root: Path, alone_before: float, alone_after: float) -> Path:
    """A alone 0-10 s at 20 it/s, with B 10-30 s at 10 it/s, alone again 30-40 s at 40 it/s; B steps every 0.1 s."""
    a = Job("A", FCN, ((10.0, 1 / alone_before), (30.0, 0.1), (40.0, 1 / alone_after)))
    b = Job("B", GEMM, ((30.0, 0.1),), start=10.0)
    return write_run(root, [a, b], stagger_s=10.0)


def test_exclusive_phases_before_and_after_merge_by_duration(tmp_path: Path) -> None:
    """A's baseline: 20 it/s for 10 s before B, 40 it/s for 10 s after: merged by their durations."""
    runs = [load_run(_staggered(tmp_path / f"s{i}", 20.0, 40.0)) for i in range(2)]
    c = compare([], runs, n_boot=200)
    a = c.workload("A")
    head, tail = (seg for seg in a.exclusive if seg.run == str(runs[0].path))
    assert (head.start, head.end) == (pytest.approx(0.05), pytest.approx(10.0))
    assert (tail.start, tail.end) == (pytest.approx(30.0), pytest.approx(40.0))
    weights = [(head.end - head.start), (tail.end - tail.start)]
    expected = (20.0 * weights[0] + 40.0 * weights[1]) / sum(weights)
    assert a.exclusive_rate == pytest.approx(expected, rel=1e-9)
    assert a.baseline == EXCLUSIVE_PHASE and c.interval_basis["exclusive A"] == "between 2 runs"
    assert (
        c.notes[0]
        == f"Baseline of A comes from the {EXCLUSIVE_PHASE} ({runs[0].path.name}, {runs[1].path.name}), "
        "not from exclusive runs."
    )
    assert (
        c.warnings[0]
        == f"B ({GEMM}) never ran alone: no baseline, so no slowdown for it and no STP."
    )


def test_where_a_slot_ran_without_run_json_times(tmp_path: Path) -> None:
    """From run.json's start_t/stop_t, else from its first step's start (t - iter_s) to its last step's end."""
    path = _staggered(tmp_path / "s", 20.0, 40.0)
    data = _RunData(load_run(path))
    assert data.span("B") == (10.0, pytest.approx(30.0))
    meta = json.loads((path / "run.json").read_text())
    for entry in meta["workloads"]:
        entry.pop("start_t", None)
        entry.pop("stop_t", None)
    (path / "run.json").write_text(json.dumps(meta))
    data = _RunData(load_run(path))
    assert data.span("B") == (
        pytest.approx(10.0),
        pytest.approx(30.0),
    )  # 10.1 - 0.1, its last step at 30
    assert data.span("A") == (pytest.approx(0.0), pytest.approx(40.0))
    assert data.span("C") == (float("inf"), float("-inf"))


def test_every_reason_the_data_may_not_support_a_claim(tmp_path: Path) -> None:
    """Short windows, few steps, no interval, a job that failed, runs not complete, runs from two machines."""
    xa = write_run(
        tmp_path / "xa", [Job("A", FCN, ((3.0, 0.2),))], hostname="box-a"
    )  # 15 steps: 14 in its window
    _edit(xa, status="truncated", capture_error={"t": 2.9, "reason": "no space left on /runs"})
    xb = write_run(tmp_path / "xb", [Job("A", GEMM, ((10.0, 0.1),))], status="recording")
    ab = write_run(
        tmp_path / "ab",
        [
            Job("A", FCN, ((4.0, 0.1),)),
            Job("B", GEMM, ((4.0, 0.125),), exit_status=3, log=("Traceback", "RuntimeError: boom")),
        ],
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    assert (
        list(c.warnings)
        == [
            "ab: overlap window is 3.9 s (< 5 s): too short to support a claim",
            "xa: A has only 14 steps in its exclusive window (< 20)",
            "A: too few steps for a confidence interval of its slowdown",  # 14 steps alone: 7 bins (< 8); B has 15
            "xa: run is truncated (no space left on /runs): its capture ended before its jobs",
            "xb: run is 'recording', not complete (it may have crashed)",
            f"ab: workload B ({GEMM}) exited early with status 3: RuntimeError: boom",
            "runs were recorded on different devices: cpu on box-a (xa); cpu on testhost (xb, ab)",
        ]
    )


def _edit(path: Path, **changes) -> Path:
    meta = json.loads((path / "run.json").read_text())
    meta.update(changes)
    (path / "run.json").write_text(json.dumps(meta))
    return path


def _edit_workload(path: Path, index: int, **changes) -> Path:
    meta = json.loads((path / "run.json").read_text())
    meta["workloads"][index].update(changes)
    (path / "run.json").write_text(json.dumps(meta))
    return path


def test_a_job_without_a_probe_names_its_windows_slots_share_and_device(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    shared = _edit(
        _blind_pair(tmp_path / "ab"),
        share={"mode": "mps", "threads": None, "existing_daemon": False},
    )
    procs = pd.read_csv(
        shared / "processes.csv"
    )  # A's own SM use: not B's, so not in what is known of B
    procs.loc[procs["process"] == "A", "gpu_sm_util"] = 10.0
    procs.to_csv(shared / "processes.csv", index=False)
    c = compare([load_run(xa)], [load_run(shared)])
    a, b = c.workload("A"), c.workload("B")
    assert (a.spec, b.spec) == (FCN, "python blind.py")
    (window,) = c.pair.windows
    assert (window.run, window.slot, window.role) == (str(shared), "A+B", "overlap")
    (seg,) = a.shared
    assert (seg.run, seg.slot, seg.role, seg.steps) == (str(shared), "A", "shared", 149)
    assert (b.known.sm_alone, b.known.sm_shared) == (80.0, 40.0)
    assert c.pair.share == "mps" and c.device == "cpu"
    data = c.to_dict()
    assert "caution" not in data  # no distribution tests ran: no p-values to be cautious about
    assert (
        data["workloads"]["B"]["cause"],
        data["workloads"]["B"]["shares"],
        data["workloads"]["B"]["evidence"],
    ) == (None, {}, "")


def test_a_job_without_a_probe_a_window_of_zero_length_is_no_overlap(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    first = (
        _RunData(load_run(_blind_pair(tmp_path / "probe"))).curve("A").first_t
    )  # A's first step: 5.1 s
    # B stops half a second after A's first step: a short window, still a window
    c = compare(
        [load_run(xa)],
        [load_run(_edit_workload(_blind_pair(tmp_path / "short"), 1, stop_t=first + 0.5))],
    )
    assert (c.pair.windows[0].start, c.pair.windows[0].end) == (
        pytest.approx(first),
        pytest.approx(first + 0.5),
    )
    # B stops exactly at A's first step: they never ran together
    touching = _edit_workload(_blind_pair(tmp_path / "touch"), 1, stop_t=first)
    from gpumon.errors import UsageError

    with pytest.raises(UsageError) as refused:
        compare([load_run(xa)], [load_run(touching)])
    assert (
        str(refused.value)
        == f"{touching}: the two workloads never ran together after warm-up (no overlap)"
    )


def test_a_slow_job_without_a_probe_beside_it_still_has_a_slowdown(tmp_path: Path) -> None:
    """Rates below 1 it/s and a job that ran faster shared than alone (r < 1) are still ratios."""
    xa = _alone(tmp_path / "xa", "A", FCN, 2.0, seconds=60.0)  # 0.5 it/s alone
    a = Job("A", FCN, ((60.0, 1.6),), start=5.0)  # 0.625 it/s beside B
    b = Job("B", "python blind.py", (), stop=60.0, gpu_sm_util=80.0, gpu_mem_mib=2048.0)
    path = _edit_workload(
        write_run(tmp_path / "ab", [a, b]),
        1,
        kind="beside",
        attached=True,
        owned=False,
        probe=False,
    )
    w = compare([load_run(xa)], [load_run(path)]).workload("A")
    assert (w.exclusive_rate, w.shared_rate) == (pytest.approx(0.5), pytest.approx(0.625))
    assert w.slowdown.value == pytest.approx(
        0.8
    ) and w.normalized_throughput.value == pytest.approx(1.25)


def test_without_a_probe_no_baseline_prints_no_numpy_warning(tmp_path: Path) -> None:
    import warnings

    other = _alone(tmp_path / "xg", "A", GEMM, 0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a mean of no rates would warn on the user's terminal
        c = compare([load_run(other)], [load_run(_blind_pair(tmp_path / "ab"))])
    assert c.workload("A").exclusive_rate != c.workload("A").exclusive_rate


def test_neither_job_probed_says_so(tmp_path: Path) -> None:
    from gpumon.errors import UsageError

    path = _edit_workload(_blind_pair(tmp_path / "ab"), 0, attached=True, probe=False)
    with pytest.raises(UsageError) as refused:
        compare([], [load_run(path)])
    assert str(refused.value) == "neither job has steps (no probe): nothing to compare"


def _blind_solo_after(root: Path, alone_step_s: float) -> Path:
    """A beside B (no probe) at 10 it/s until 12 s, alone after it at 1/``alone_step_s`` it/s."""
    a = Job("A", FCN, ((12.0, 0.1), (20.0, alone_step_s)), start=5.0)
    b = Job("B", "python blind.py", (), stop=12.0, gpu_sm_util=80.0, gpu_mem_mib=2048.0)
    return _edit_workload(
        write_run(root, [a, b]), 1, kind="beside", attached=True, owned=False, probe=False
    )


def test_without_a_probe_the_solo_phases_of_every_shared_run_make_the_baseline(
    tmp_path: Path,
) -> None:
    runs = [
        load_run(_blind_solo_after(tmp_path / "one", 0.05)),
        load_run(_blind_solo_after(tmp_path / "two", 0.025)),
    ]
    w = compare([], runs).workload("A")
    assert w.exclusive_rate == pytest.approx((20.0 + 40.0) / 2)  # the mean of each run's solo rate


def test_a_process_beside_an_exclusive_run_disturbs_the_baseline(tmp_path: Path) -> None:
    xa = write_run(tmp_path / "xa", [Job("A", FCN, ((20.0, 0.05),))], others=(COLLEAGUE,))
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.1)
    ab = write_run(
        tmp_path / "ab",
        [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((20.0, 0.125),))],
        others=(COLLEAGUE,),
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    assert [(Path(d.run).name, d.role) for d in c.disturbed_by] == [
        ("xa", "baseline"),
        ("ab", "pair"),
    ]
    told = [w for w in c.warnings if "not one of the jobs" in w]
    assert [
        (
            w.split(":")[0],
            w.endswith("so the baseline is not clean"),
            w.endswith("so the pair is not clean"),
        )
        for w in told
    ] == [("xa", True, False), ("ab", False, True)]


def test_exclusive_phases_merge_their_replicates_by_duration_too(tmp_path: Path) -> None:
    """Steady rates: every bootstrap replicate of a phase is its rate, so the merged interval is the point."""
    run = load_run(_staggered(tmp_path / "s", 20.0, 40.0))
    c = compare([], [run], n_boot=200)
    a = c.workload("A")
    assert (
        c.interval_basis["exclusive A"] != "between 2 runs"
    )  # one run: the interval is its replicates'
    # A shared at 10 it/s; alone (20*9.95 + 40*10)/19.95 it/s: r = that / 10, with a zero-width interval
    expected = (20.0 * 9.95 + 40.0 * 10.0) / 19.95 / 10.0
    assert a.slowdown.has_interval and a.slowdown.value == pytest.approx(expected, rel=1e-9)
    assert (a.slowdown.low, a.slowdown.high) == (
        pytest.approx(expected, rel=1e-9),
        pytest.approx(expected, rel=1e-9),
    )
    inverse = a.normalized_throughput
    assert (inverse.low, inverse.high) == (
        pytest.approx(1 / expected, rel=1e-9),
        pytest.approx(1 / expected, rel=1e-9),
    )
    # phases too short to bootstrap (10 steps each, 5 bins): no replicates to merge, a point without an interval
    short = load_run(
        write_run(
            tmp_path / "t",
            [
                Job("A", FCN, ((1.0, 0.1), (21.0, 0.1), (22.0, 0.1))),
                Job("B", GEMM, ((21.0, 0.1),), start=1.0),
            ],
            stagger_s=1.0,
        )
    )
    a = compare([], [short], n_boot=200).workload("A")
    assert a.slowdown.value == pytest.approx(1.0) and not a.slowdown.has_interval


def test_exclusive_phase_segments_name_their_slot_and_role(tmp_path: Path) -> None:
    run = load_run(_staggered(tmp_path / "s", 20.0, 40.0))
    a = compare([], [run], n_boot=50).workload("A")
    assert {(seg.run, seg.slot, seg.role) for seg in a.exclusive} == {
        (str(run.path), "A", "exclusive phase")
    }


def _together(root: Path, b_start: float, stagger_s: float | None, a_start: float = 0.0) -> Path:
    """A and B at 10 it/s each, neither alone after warm-up; run.json's stagger as given (None: not recorded)."""
    path = write_run(
        root,
        [
            Job("A", FCN, ((20.0, 0.1),), start=a_start),
            Job("B", GEMM, ((20.1, 0.1),), start=b_start),
        ],
    )
    meta = json.loads((path / "run.json").read_text())
    if stagger_s is None:
        meta.pop("stagger_s", None)
    else:
        meta["stagger_s"] = stagger_s
    (path / "run.json").write_text(json.dumps(meta))
    return path


def test_a_lost_stagger_is_named_in_the_refusal(tmp_path: Path) -> None:
    from gpumon.errors import UsageError

    # run 1 records no stagger; runs 2 and 3 asked for 0.5 s but B started first, at 0 s, and A at 0.05 s, before
    # B's first step (0.1 s): B never ran alone. B stops last, so ordering by the stop would name A first.
    runs = [
        _together(tmp_path / "r1", 0.0, None),
        _together(tmp_path / "r2", 0.0, 0.5, a_start=0.05),
        _together(tmp_path / "r3", 0.0, 0.5, a_start=0.05),
    ]
    with pytest.raises(UsageError) as refused:
        compare([], [load_run(r) for r in runs])
    lost = (
        "{}: --stagger 0.5 was lost: A started at 0.1 s, before B's first step after its warm-up (0.1 s), so B never "
        "ran alone (a longer --stagger on this box, or --exclusive runs)"
    )
    assert str(refused.value) == f"no exclusive baseline: {lost.format('r2')}; {lost.format('r3')}"
    # a stagger of 0 (both started together) is no stagger to lose
    with pytest.raises(UsageError) as refused:
        compare([], [load_run(_together(tmp_path / "r0", 0.0, 0.0))])
    assert str(refused.value) == (
        "no exclusive baseline: give --exclusive runs, or a staggered shared run whose first phase is exclusive"
    )


def test_compare_paths_splits_the_runs_by_their_workloads(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.1)
    ab = write_run(
        tmp_path / "ab", [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((20.0, 0.125),))]
    )
    c, runs = compare_paths([ab, xa, xb], {str(xb): "B"})
    assert [r.path for r in runs] == [ab, xa, xb]
    assert c.exclusive_runs == (str(xa), str(xb)) and c.shared_runs == (str(ab),)
    assert (c.workload("A").slowdown.value, c.workload("B").slowdown.value) == (
        pytest.approx(2.0),
        pytest.approx(1.25),
    )


def test_bad_exclusive_runs_are_refused_in_one_line(tmp_path: Path) -> None:
    from gpumon.errors import UsageError

    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    ab = write_run(
        tmp_path / "ab", [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((20.0, 0.125),))]
    )
    with pytest.raises(UsageError) as refused:
        compare([load_run(xa)], [load_run(ab)], assign={str(xa): "C"})
    assert str(refused.value) == f"{xa}: assigned to 'C'; use A= or B="
    two = _edit(
        write_run(
            tmp_path / "two", [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((20.0, 0.125),))]
        ),
        mode="exclusive",
    )
    with pytest.raises(UsageError) as refused:
        compare([load_run(two)], [load_run(ab)])
    assert str(refused.value) == f"{two}: not an exclusive run (2 workloads, need 1)"


def test_each_windows_warning_in_its_own_terms(tmp_path: Path) -> None:
    """A short overlap late in the run, a window of exactly the minimum steps, the same job twice warned once, and a
    truncated run that recorded no reason."""
    xa = _edit(
        write_run(tmp_path / "xa", [Job("A", FCN, ((3.0, 0.2),))]), status="truncated"
    )  # 14 steps in its window
    # both FCN: xa is the baseline of A and of B; overlap 10.0-13.0 s (both first step at 10.0); B steps every 0.25 s:
    # (13.0 - 10.0)/0.25 = 12 steps in the window
    ab = write_run(
        tmp_path / "ab",
        [Job("A", FCN, ((13.0, 0.1),), start=9.9), Job("B", FCN, ((13.0, 0.25),), start=9.75)],
        stagger_s=0.0,
    )
    c = compare([load_run(xa)], [load_run(ab)], n_boot=50)
    assert list(c.warnings) == [
        "ab: overlap window is 3.0 s (< 5 s): too short to support a claim",
        "xa: A has only 14 steps in its exclusive window (< 20)",
        "A: too few steps for a confidence interval of its slowdown",
        "ab: B has only 12 steps in its shared window (< 20)",
        "B: too few steps for a confidence interval of its slowdown",
        "xa: run is truncated (no reason recorded): its capture ended before its jobs",
    ]
    # exactly 20 steps in the exclusive window and exactly 5 s of overlap (0.125 to 5.125 s, steps on eighths): no warning
    xa = _alone(tmp_path / "xa20", "A", FCN, 0.25, seconds=5.25)  # 21 steps, 20 in its window
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.05)
    ab = write_run(
        tmp_path / "ab5", [Job("A", FCN, ((5.125, 0.125),)), Job("B", GEMM, ((5.125, 0.125),))]
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    assert (
        c.pair.windows[0].end - c.pair.windows[0].start,
        c.workload("A").exclusive[0].steps,
    ) == (5.0, 20)
    assert not [w for w in c.warnings if "overlap window" in w or "steps in its" in w]


def test_runs_on_different_gpus_are_named_by_device_gpu_and_host(tmp_path: Path) -> None:
    h100 = {"index": 0, "name": "NVIDIA H100", "uuid": "GPU-1111", "driver": "550.54"}
    xa = write_run(tmp_path / "xa", [Job("A", FCN, ((20.0, 0.05),))], device="cuda:0", gpu=h100)
    xb = write_run(
        tmp_path / "xb",
        [Job("A", GEMM, ((20.0, 0.1),))],
        device="cuda:0",
        gpu={**h100, "uuid": None},
        hostname="box-b",
    )
    ab = write_run(
        tmp_path / "ab",
        [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((20.0, 0.125),))],
        device="cuda:0",
        gpu=h100,
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    assert (
        "runs were recorded on different devices: cuda:0 NVIDIA H100 GPU-1111 on testhost (xa, ab); "
        "cuda:0 NVIDIA H100 on box-b (xb)"
    ) in c.warnings


def test_copy_and_cpu_samples_are_each_jobs_own(tmp_path: Path) -> None:
    """Copies on one side only still get compared (the other side copies 0 B/s); CPU samples are the job's own."""
    copying = dict(copy_bytes=1_000_000, copy_s=1e-3)  # 1 MB per step in 1 ms: 1e9 B/s per copy
    xa = write_run(
        tmp_path / "xa", [Job("A", FCN, ((20.0, 0.05),), **copying)]
    )  # 1 MB every 0.05 s: 2e7 B/s
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.1)
    ab = write_run(
        tmp_path / "ab",
        [
            Job("A", FCN, ((20.0, 0.1),), cpu=100.0),
            Job("B", GEMM, ((20.0, 0.125),), cpu=50.0, **copying),
        ],
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    alone, shared = c.samples[("A", "copy_bytes_per_s")]
    assert alone == pytest.approx([2e7] * len(alone)) and set(shared) == {0.0}
    alone, shared = c.samples[("B", "copy_bytes_per_s")]
    assert set(alone) == {0.0} and shared == pytest.approx([1e6 / 0.125] * len(shared))
    assert set(c.samples[("A", "cpu_pct")][1]) == {100.0} and set(
        c.samples[("B", "cpu_pct")][1]
    ) == {50.0}


def test_a_job_that_exited_early_is_told_by_its_last_log_line_if_any(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.1)
    log = ("Traceback (most recent call last):", '  File "train.py", line 3', "RuntimeError: boom")
    ab = write_run(
        tmp_path / "ab",
        [
            Job("A", FCN, ((20.0, 0.1),), exit_status=1),  # no log at all
            Job("B", GEMM, ((20.0, 0.125),), exit_status=3, log=log),
        ],
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    assert f"ab: workload A ({FCN}) exited early with status 1" in c.warnings
    assert f"ab: workload B ({GEMM}) exited early with status 3: RuntimeError: boom" in c.warnings
    # the overlap runs from B's first step (0.125 s) to A's last (20 s): B completes 160 - 1 = 159 steps in it, A
    # 200 - 1.25 (interpolated at 0.125 s) = 198.75: the window counts the fewer, whole steps
    assert [(w.run, w.slot, w.role, w.steps) for w in c.pair.windows] == [
        (str(ab), "A+B", "overlap", 159)
    ]


def test_where_a_slot_ran_when_its_first_steps_are_untimed(tmp_path: Path) -> None:
    """No run.json times and no iter_s on B's first two steps (10.1, 10.2 s): B ran from its first step's time."""
    path = _staggered(tmp_path / "s", 20.0, 40.0)
    meta = json.loads((path / "run.json").read_text())
    for entry in meta["workloads"]:
        entry.pop("start_t", None)
        entry.pop("stop_t", None)
    (path / "run.json").write_text(json.dumps(meta))
    steps = pd.read_csv(path / "steps.csv")
    first_two = steps.index[steps["process"] == "B"][:2]
    steps.loc[first_two, "iter_s"] = float("nan")
    steps.to_csv(path / "steps.csv", index=False)
    assert _RunData(load_run(path)).span("B") == (pytest.approx(10.1), pytest.approx(30.0))


def _pair(root: Path, a: str = FCN, b: str = GEMM, **kwargs) -> Path:
    return write_run(
        root, [Job("A", a, ((20.0, 0.1),), **kwargs), Job("B", b, ((20.0, 0.125),), **kwargs)]
    )


def test_shared_runs_that_cannot_be_compared_are_refused_in_one_line(tmp_path: Path) -> None:
    from gpumon.errors import UsageError

    def refusal(exclusive: list[Path], shared: list[Path]) -> str:
        with pytest.raises(UsageError) as refused:
            compare([load_run(p) for p in exclusive], [load_run(p) for p in shared])
        return str(refused.value)

    xa, xb = _alone(tmp_path / "xa", "A", FCN, 0.05), _alone(tmp_path / "xb", "A", GEMM, 0.1)
    ab, ab2 = _pair(tmp_path / "ab"), _pair(tmp_path / "ab2")
    one = _edit(
        _alone(tmp_path / "one", "A", FCN, 0.05), mode="shared"
    )  # says shared, holds one job
    assert refusal([xa, xb], [one, ab]) == f"{one}: not a shared run (1 workload(s), need 2)"
    assert refusal([xa, xb], [ab, one]) == f"{one}: not a shared run (1 workload(s), need 2)"
    other = _pair(tmp_path / "other", b="lstm:preset=tiny")
    assert refusal([xa, xb], [ab, other]) == (
        f"{other}: workloads {FCN} + lstm:preset=tiny do not match ab ({FCN} + {GEMM})"
    )
    mps = _edit(ab2, share={"mode": "mps", "threads": None, "existing_daemon": False})
    assert refusal([xa, xb], [ab, mps]) == (
        "the shared runs were recorded under different share modes (mps, timeslice): compare one mode at a time"
    )
    lone = write_run(
        tmp_path / "lone", [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((0.2, 0.125),))]
    )  # 1 step
    assert refusal([xa, xb], [lone]) == f"{lone}: workload B has fewer than two steps after warm-up"
    corrupt = _pair(tmp_path / "corrupt")
    text = (corrupt / "steps.csv").read_text().splitlines()
    cells = text[5].split(",")
    cells[text[0].split(",").index("step")] = "five"
    (corrupt / "steps.csv").write_text("\n".join([*text[:5], ",".join(cells), *text[6:]]) + "\n")
    assert (
        refusal([xa, xb], [corrupt])
        == f"{corrupt / 'steps.csv'}: corrupt (non-numeric values in column step)"
    )


def test_the_slots_of_a_run_without_workloads_in_run_json_come_from_its_steps(
    tmp_path: Path,
) -> None:
    path = _edit(_pair(tmp_path / "ab"), workloads=[])
    found = _RunData(load_run(path)).workloads()
    assert {slot: (w.slot, w.spec) for slot, w in found.items()} == {
        "A": ("A", "?"),
        "B": ("B", "?"),
    }


def test_the_default_seed_is_zero(tmp_path: Path) -> None:
    """Noisy steps: the intervals come from a seeded bootstrap, the same one every time gpumon compare runs."""
    xa = write_run(tmp_path / "xa", [Job("A", FCN, ((20.0, 0.05),), noise=0.3)])
    xb = write_run(tmp_path / "xb", [Job("A", GEMM, ((20.0, 0.1),), noise=0.3)])
    ab = write_run(
        tmp_path / "ab",
        [Job("A", FCN, ((20.0, 0.1),), noise=0.3), Job("B", GEMM, ((20.0, 0.125),), noise=0.3)],
    )
    runs = ([load_run(xa), load_run(xb)], [load_run(ab)])
    default, zero, one = (
        compare(*runs, n_boot=200),
        compare(*runs, n_boot=200, seed=0),
        compare(*runs, n_boot=200, seed=1),
    )
    assert default.pair.stp == zero.pair.stp and default.pair.stp != one.pair.stp


def test_runs_given_on_the_wrong_side_are_refused_in_one_line(tmp_path: Path) -> None:
    from gpumon.errors import UsageError

    xa, ab = _alone(tmp_path / "xa", "A", FCN, 0.05), _pair(tmp_path / "ab")
    with pytest.raises(UsageError) as refused:
        compare([load_run(xa)], [])
    assert str(refused.value) == "no shared run given (--shared RUN)"
    with pytest.raises(UsageError) as refused:
        compare([load_run(ab)], [load_run(ab)])
    assert (
        str(refused.value)
        == f"{ab}: not an exclusive run (mode shared in run.json); give it with --shared"
    )
    with pytest.raises(UsageError) as refused:
        compare([], [load_run(xa)])
    assert (
        str(refused.value)
        == f"{xa}: not a shared run (mode exclusive in run.json); give it with --exclusive"
    )


def _noisy(root: Path, jobs: list[tuple[str, str, float]]) -> Path:
    return write_run(
        root,
        [
            Job(slot, spec, ((20.0, step_s),), noise=0.3, seed=seed)
            for seed, (slot, spec, step_s) in enumerate(jobs)
        ],
    )


def test_the_interval_of_one_over_r_is_rs_interval_reciprocated(tmp_path: Path) -> None:
    """1/r's replicates are 1/(r's replicates): with 201 of them the 2.5 and 97.5 percentiles are order statistics
    (the 6th from either end), so 1/r's bounds are exactly r's, reciprocated and swapped."""
    from gpumon.analysis import distributions, spread

    xa = _noisy(tmp_path / "xa", [("A", FCN, 0.05)])
    xb = _noisy(tmp_path / "xb", [("A", GEMM, 0.1)])
    ab = _noisy(tmp_path / "ab", [("A", FCN, 0.1), ("B", GEMM, 0.125)])
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=201)
    for slot in ("A", "B"):
        r, inverse = c.workload(slot).slowdown, c.workload(slot).normalized_throughput
        assert r.low < r.value < r.high
        assert inverse.value == pytest.approx(1 / r.value, rel=1e-12)
        assert (inverse.low, inverse.high) == (
            pytest.approx(1 / r.high, rel=1e-12),
            pytest.approx(1 / r.low, rel=1e-12),
        )
    # one run on each side: every interval is within that run, which the notes say; the distribution tests ran
    assert c.interval_basis == {
        "shared": spread.WITHIN,
        "exclusive A": spread.WITHIN,
        "exclusive B": spread.WITHIN,
    }
    assert spread.WITHIN_NOTE in c.notes and distributions.TESTS_NEED not in c.notes


def test_without_scipy_there_are_no_distribution_tests_and_the_notes_say_so(
    tmp_path: Path, monkeypatch
) -> None:
    from gpumon.analysis import distributions, stats_helper

    monkeypatch.setattr(
        stats_helper, "for_runs", lambda run_dirs: None
    )  # what it answers where scipy is missing
    xa, xb = _alone(tmp_path / "xa", "A", FCN, 0.05), _alone(tmp_path / "xb", "A", GEMM, 0.1)
    c = compare([load_run(xa), load_run(xb)], [load_run(_pair(tmp_path / "ab"))], n_boot=50)
    assert distributions.TESTS_NEED in c.notes
    assert (
        [w.distributions for w in c.workloads] == [(), ()]
        and not c.samples
        and "caution" not in c.to_dict()
    )
    assert c.workload("B").slowdown.value == pytest.approx(1.25)


def test_the_same_job_twice_shares_one_baseline_and_its_replicates(tmp_path: Path) -> None:
    """Two exclusive runs of one job, and that job twice in the shared run, stepping identically: A and B are the
    same job in the same conditions, so their slowdowns and intervals are the same."""
    runs = [_noisy(tmp_path / f"x{i}", [("A", FCN, 0.05 + 0.005 * i)]) for i in range(2)]
    ab = write_run(
        tmp_path / "ab", [Job(slot, FCN, ((20.0, 0.1),), noise=0.3, seed=7) for slot in ("A", "B")]
    )
    c = compare([load_run(r) for r in runs], [load_run(ab)], n_boot=201)
    a, b = c.workload("A").slowdown, c.workload("B").slowdown
    assert a.low < a.value < a.high
    assert (b.value, b.low, b.high) == (a.value, a.low, a.high)


def test_the_comparison_names_the_share_mode_and_the_device_it_was_recorded_under(
    tmp_path: Path,
) -> None:
    xa, xb = _alone(tmp_path / "xa", "A", FCN, 0.05), _alone(tmp_path / "xb", "A", GEMM, 0.1)
    ab = _edit(
        _pair(tmp_path / "ab"), share={"mode": "mps", "threads": None, "existing_daemon": False}
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    assert (c.pair.share, c.device) == ("mps", "cpu")


def test_untimed_and_empty_copies_are_no_bandwidth_and_zero_bytes(tmp_path: Path) -> None:
    """A copy of no bytes (timed or not) is no bandwidth sample; a step without a copy count copied 0 B."""
    copying = dict(copy_bytes=1_000_000, copy_s=1e-3)
    xa = write_run(tmp_path / "xa", [Job("A", FCN, ((20.0, 0.05),), **copying)])
    xb = write_run(tmp_path / "xb", [Job("A", GEMM, ((20.0, 0.1),), **copying)])
    ab = write_run(
        tmp_path / "ab",
        [
            Job("A", FCN, ((20.0, 0.1),), copy_bytes=0, copy_s=1e-4),  # timed, 0 bytes
            Job("B", GEMM, ((20.0, 0.125),), **copying),
        ],
    )
    steps = pd.read_csv(ab / "steps.csv")
    steps.loc[steps["process"] == "B", ["copy_bytes", "copy_s"]] = float(
        "nan"
    )  # B's copies not counted at all
    steps.to_csv(ab / "steps.csv", index=False)
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    assert ("A", "copy_bandwidth") not in c.samples  # no shared sample: nothing to compare
    assert set(c.samples[("A", "copy_bytes_per_s")][1]) == {0.0}
    alone, shared = c.samples[("B", "copy_bytes_per_s")]
    assert (
        alone == pytest.approx([1e6 / 0.1] * len(alone))
        and set(shared) == {0.0}
        and len(shared) > 100
    )


def test_a_job_started_exactly_at_the_others_first_step_lost_the_stagger(tmp_path: Path) -> None:
    from gpumon.errors import UsageError

    path = _together(tmp_path / "r", 0.1, 0.5)  # A from 0 s, its first step at 0.1 s; B from 0.1 s
    first = _RunData(load_run(path)).curve("A").first_t
    _edit_workload(path, 1, start_t=first)
    with pytest.raises(UsageError) as refused:
        compare([], [load_run(path)])
    assert str(refused.value) == (
        "no exclusive baseline: r: --stagger 0.5 was lost: B started at 0.1 s, before A's first step after its warm-up "
        "(0.1 s), so A never ran alone (a longer --stagger on this box, or --exclusive runs)"
    )


def test_copies_of_under_a_byte_a_second_are_still_copies(tmp_path: Path) -> None:
    """1 B copied every 2 s alone (0.5 B/s) and none shared, and the other way round (0.4 B/s shared, none alone):
    one side copying anything is enough to compare the copy rate."""
    one_byte = dict(copy_bytes=1, copy_s=1e-3)
    xa = write_run(tmp_path / "xa", [Job("A", FCN, ((40.0, 2.0),), **one_byte)])
    xb = write_run(tmp_path / "xb", [Job("A", GEMM, ((40.0, 2.0),))])
    ab = write_run(
        tmp_path / "ab", [Job("A", FCN, ((50.0, 2.5),)), Job("B", GEMM, ((50.0, 2.5),), **one_byte)]
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50)
    alone, shared = c.samples[("A", "copy_bytes_per_s")]
    assert alone == pytest.approx([0.5] * len(alone)) and set(shared) == {0.0}
    alone, shared = c.samples[("B", "copy_bytes_per_s")]
    assert set(alone) == {0.0} and shared == pytest.approx([0.4] * len(shared))


def test_one_byte_copies_have_a_bandwidth(tmp_path: Path) -> None:
    xa = write_run(
        tmp_path / "xa", [Job("A", FCN, ((20.0, 0.05),), copy_bytes=1, copy_s=1e-3)]
    )  # 1000 B/s
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.1)
    ab = write_run(
        tmp_path / "ab",
        [
            Job("A", FCN, ((20.0, 0.1),), copy_bytes=1, copy_s=2e-3),  # 500 B/s
            Job("B", GEMM, ((20.0, 0.125),)),
        ],
    )
    alone, shared = compare([load_run(xa), load_run(xb)], [load_run(ab)], n_boot=50).samples[
        ("A", "copy_bandwidth")
    ]
    assert alone == pytest.approx([1000.0] * len(alone)) and shared == pytest.approx(
        [500.0] * len(shared)
    )


def test_compare_paths_passes_the_assignment_on(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    other = _alone(
        tmp_path / "other", "A", "lstm:preset=tiny", 0.1
    )  # not B's spec: only B=other makes it B's baseline
    ab = write_run(
        tmp_path / "ab", [Job("A", FCN, ((20.0, 0.1),)), Job("B", GEMM, ((20.0, 0.125),))]
    )
    c, _ = compare_paths([xa, other, ab], {str(other): "B"})
    assert c.workload("B").exclusive_rate == pytest.approx(10.0) and c.workload(
        "B"
    ).slowdown.value == pytest.approx(1.25)
    assert (
        c.notes[0]
        == f"Baseline of B is other (lstm:preset=tiny), assigned by B= although the shared workload is {GEMM}."
    )


def test_a_run_that_recorded_no_device_is_named_with_a_question_mark(tmp_path: Path) -> None:
    xa = _alone(tmp_path / "xa", "A", FCN, 0.05)
    xb = _edit(_alone(tmp_path / "xb", "A", GEMM, 0.1), device=None)
    c = compare([load_run(xa), load_run(xb)], [load_run(_pair(tmp_path / "ab"))], n_boot=50)
    assert (
        "runs were recorded on different devices: cpu on testhost (xa, ab); ? on testhost (xb)"
        in c.warnings
    )


def test_a_slot_without_an_exclusive_run_takes_its_exclusive_phase(tmp_path: Path) -> None:
    """``gpumon run gemm --beside PID --baseline A=RUN``'s pair: A's rate alone from its run, the watched job's from
    its steps before A started (the live line's figures; on the H100 compare refused this until 2026-11-26)."""
    from gpumon.errors import UsageError

    # A alone at 40 it/s for 10 s, then beside B at 20 it/s; B (10 it/s shared) was 12.5 it/s in a run of its own
    ab = write_run(
        tmp_path / "ab",
        [Job("A", FCN, ((10.0, 0.025), (30.0, 0.05))), Job("B", GEMM, ((30.0, 0.1),), start=10.0)],
    )
    xb = _alone(tmp_path / "xb", "A", GEMM, 0.08)
    c = compare([load_run(xb)], [load_run(ab)], n_boot=200)
    a, b = c.workload("A"), c.workload("B")
    assert (a.exclusive_rate, a.shared_rate, a.baseline) == (
        pytest.approx(40.0),
        pytest.approx(20.0),
        EXCLUSIVE_PHASE,
    )
    assert (b.exclusive_rate, b.shared_rate, b.baseline) == (
        pytest.approx(12.5),
        pytest.approx(10.0),
        EXCLUSIVE_RUNS,
    )
    assert (a.slowdown.value, b.slowdown.value) == (pytest.approx(2.0), pytest.approx(1.25))
    assert c.pair.stp.value == pytest.approx(1 / 2.0 + 1 / 1.25) and c.pair.verdict == "pays"
    assert [s.role for s in a.exclusive] == ["exclusive phase"] and [
        s.role for s in b.exclusive
    ] == ["exclusive"]
    assert (
        "Baseline of A comes from the exclusive phase of the shared run (ab): no exclusive run of it was given."
        in c.notes
    )
    # two shared runs: each one's phase, both named
    again = write_run(
        tmp_path / "ab2",
        [Job("A", FCN, ((10.0, 0.025), (30.0, 0.05))), Job("B", GEMM, ((30.0, 0.1),), start=10.0)],
    )
    both = compare([load_run(xb)], [load_run(ab), load_run(again)], n_boot=50)
    assert both.workload("A").exclusive_rate == pytest.approx(40.0)
    assert (
        "Baseline of A comes from the exclusive phase of the shared run (ab, ab2): no exclusive run of it was "
        "given." in both.notes
    )
    # both started together: A never ran alone, so without a run of its own it has no baseline
    together = write_run(
        tmp_path / "together", [Job("A", FCN, ((20.0, 0.05),)), Job("B", GEMM, ((20.0, 0.1),))]
    )
    with pytest.raises(UsageError) as refused:
        compare([load_run(xb)], [load_run(together)])
    assert str(refused.value) == (
        "no exclusive run for A (fcn:preset=tiny), and it never ran alone in the shared runs: "
        "give one with --exclusive A=RUN"
    )


def test_cannot_tell_with_too_few_steps_says_why_not_an_interval(tmp_path: Path) -> None:
    """Issue 43: with too few steps for an interval, the verdict said "an interval that straddles 1", which there
    was not; it says why there is none."""
    from gpumon.analysis.text import verdict_sentence

    xa = write_run(tmp_path / "xa", [Job("A", FCN, ((3.0, 0.2),))])
    ab = write_run(
        tmp_path / "ab",
        [Job("A", FCN, ((13.0, 0.1),), start=9.9), Job("B", FCN, ((13.0, 0.25),), start=9.75)],
        stagger_s=0.0,
    )
    c = compare([load_run(xa)], [load_run(ab)], n_boot=50)
    said = verdict_sentence(c)
    assert not c.pair.stp.has_interval and c.pair.verdict == "cannot tell"
    assert "straddles" not in said
    assert "and no interval: too few steps for one (the problems say which window)" in said


def test_a_long_runs_samples_are_thinned_evenly_to_the_cap_first_and_last_kept():
    """The distribution tests' samples of a run longer than MAX_TEST_SAMPLES steps (thousands of seconds of
    steps; too long to capture in a test, so the thinning on its own)."""
    at_cap = np.arange(MAX_TEST_SAMPLES, dtype=float)
    assert _thinned(at_cap) is at_cap  # not copied
    for n in (MAX_TEST_SAMPLES + 1, 2 * MAX_TEST_SAMPLES + MAX_TEST_SAMPLES // 2):
        got = _thinned(np.arange(n, dtype=float))
        assert len(got) == MAX_TEST_SAMPLES and (got[0], got[-1]) == (0.0, n - 1)
        gaps = np.diff(got)
        assert gaps.min() >= 1 and gaps.max() - gaps.min() <= 1  # in order, evenly spaced


def test_two_exclusive_runs_that_disagree_print_no_numpy_warning(tmp_path: Path) -> None:
    """Two runs of one workload at 10 and 5 it/s as its exclusive runs: the between-runs t has one degree of freedom
    and its far tail overflows (inf and 0 replicates). The interval says so by its width; the user's terminal gets no
    RuntimeWarning (CI's log showed three, from this shape in test_columnar)."""
    import warnings

    from gpumon.analysis.compare import compare_paths

    a, b, shared = fcn_twice(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c, _ = compare_paths([a, b, shared])
    r = c.workload("A").slowdown
    assert (
        r.low < 1 < r.high and r.high / r.low > 100
    )  # not one run's noise: the interval says how little is known
