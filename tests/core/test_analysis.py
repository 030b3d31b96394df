"""The comparison analysis on synthetic run directories whose answers are known exactly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from gpumon.analysis import rates
from gpumon.analysis.compare import EXCLUSIVE_PHASE, Comparison, compare, spec_key, split_runs
from gpumon.analysis.distributions import CPU, compare_samples
from gpumon.analysis.slowdown import Estimate, block_bootstrap_means, interval, window_rates
from gpumon.analysis.text import render_histogram, render_tables
from gpumon.core.records.rates import CANNOT_TELL, LOSES, PAYS, exclusive_rate, verdict
from gpumon.core.store.trace import load_run
from gpumon.errors import UsageError
from tests.tracegen import Job, write_run

FCN = "fcn:preset=tiny"
LSTM = "lstm:preset=tiny"


def exclusive_run(
    root: Path, name: str, spec: str, step_s: float, until: float = 20.0, **kw
) -> Path:
    return write_run(root / name, [Job("A", spec, phases=((until, step_s),), **kw)], label=name)


def pair_run(root: Path, name: str, a: Job, b: Job, **kw) -> Path:
    return write_run(root / name, [a, b], label=name, **kw)


def solo_and_shared(tmp_path: Path, a: Job, b: Job, **kw) -> Comparison:
    """compare of fcn and lstm each alone at 10 it/s against their shared run ``tmp_path/ab`` of jobs ``a`` and ``b``."""
    xa = exclusive_run(tmp_path, "xa", FCN, 0.1)
    xb = exclusive_run(tmp_path, "xb", LSTM, 0.1)
    ab = pair_run(tmp_path, "ab", a, b, **kw)
    return compare([load_run(xa), load_run(xb)], [load_run(ab)])


def half_speed(tmp_path: Path, **kw) -> tuple[list, list]:
    """A alone at 10 it/s and B alone at 20 it/s; together each at half speed, with warm-up steps."""
    xa = exclusive_run(tmp_path, "xa", FCN, 0.1, warmup=5, warmup_s=0.7)
    xb = exclusive_run(tmp_path, "xb", LSTM, 0.05, warmup=3, warmup_s=0.9)
    ab = pair_run(
        tmp_path,
        "ab",
        Job("A", FCN, phases=((30, 0.2),), warmup=5, warmup_s=0.7),
        Job("B", LSTM, phases=((30, 0.1),), warmup=3, warmup_s=0.9),
        **kw,
    )
    return [load_run(xa), load_run(xb)], [load_run(ab)]


def test_half_speed_in_the_overlap_gives_r_2_and_stp_1(tmp_path: Path) -> None:
    exclusive, shared = half_speed(tmp_path)
    c = compare(exclusive, shared)
    a, b = c.workload("A"), c.workload("B")
    assert a.exclusive_rate == pytest.approx(10.0, abs=1e-6)
    assert b.exclusive_rate == pytest.approx(20.0, abs=1e-6)
    assert a.shared_rate == pytest.approx(5.0, abs=1e-6)
    assert a.slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert b.slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert a.normalized_throughput.value == pytest.approx(0.5, abs=1e-6)
    assert c.pair.stp.value == pytest.approx(1.0, abs=1e-6)
    assert c.pair.stp.low == pytest.approx(1.0, abs=1e-6) and c.pair.stp.high == pytest.approx(
        1.0, abs=1e-6
    )
    assert c.pair.verdict == CANNOT_TELL
    assert c.warnings == ()


def test_warm_up_steps_are_excluded(tmp_path: Path) -> None:
    """Slow warm-up steps would drag the rates down if they were counted."""
    exclusive, shared = half_speed(tmp_path)
    c = compare(exclusive, shared)
    window = c.pair.windows[0]
    assert window.start == pytest.approx(5 * 0.7 + 0.2)  # A's first post-warm-up step ends last
    steps = exclusive[0].steps()
    everything = (steps["step"].iloc[-1] - steps["step"].iloc[0]) / (
        steps["t"].iloc[-1] - steps["t"].iloc[0]
    )
    assert everything < 9.5 and c.workload("A").exclusive_rate == pytest.approx(10.0, abs=1e-6)
    assert c.workload("A").exclusive[0].start == pytest.approx(5 * 0.7 + 0.1)


def test_rates_interpolate_the_cumulative_steps_at_the_window_edges() -> None:
    c = rates.Curve(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.0, 1.0, 2.0, 3.0]))
    assert c.at(2.5) == pytest.approx(1.5)
    assert c.rate(rates.Window(1.25, 3.75)) == pytest.approx(1.0)
    assert exclusive_rate(c.t, c.n) == pytest.approx(1.0)
    other = rates.Curve(np.array([2.5, 5.0]), np.array([0.0, 1.0]))
    assert rates.overlap(c, other) == rates.Window(2.5, 4.0)
    assert rates.overlap(c, rates.Curve(np.array([5.0, 6.0]), np.array([0.0, 1.0]))) is None


def test_staggered_start_measures_only_the_overlap(tmp_path: Path) -> None:
    """B starts at 10 s: A runs at full speed until then, at half speed after."""
    c = solo_and_shared(
        tmp_path,
        Job("A", FCN, phases=((10, 0.1), (40, 0.2))),
        Job("B", LSTM, start=10.0, warmup=2, phases=((40, 0.2),)),
    )
    assert c.pair.windows[0].start == pytest.approx(11.2)
    assert c.workload("A").slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert c.workload("B").slowdown.value == pytest.approx(2.0, abs=1e-6)


def test_a_job_that_finishes_early_ends_the_overlap(tmp_path: Path) -> None:
    """A stops at 15 s; B then runs alone at full speed, which must not count as shared."""
    c = solo_and_shared(
        tmp_path, Job("A", FCN, phases=((15, 0.2),)), Job("B", LSTM, phases=((15, 0.2), (40, 0.1)))
    )
    a_last = load_run(tmp_path / "ab").steps().query("process == 'A'")["t"].max()
    assert c.pair.windows[0].end == pytest.approx(a_last)
    assert c.workload("B").slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert c.workload("A").slowdown.value == pytest.approx(2.0, abs=1e-6)


def test_staggered_run_alone_gives_baselines_from_its_exclusive_phase(tmp_path: Path) -> None:
    """Same job twice, B 15 s late: A's solo phase is the baseline of both, and the output says so."""
    ab = pair_run(
        tmp_path,
        "ab",
        Job("A", FCN, warmup=3, phases=((15, 0.1), (45, 0.2))),
        Job("B", FCN, start=15.0, warmup=3, phases=((45, 0.2),)),
    )
    c = compare([], [load_run(ab)])
    assert c.workload("A").slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert c.workload("B").slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert c.pair.stp.value == pytest.approx(1.0, abs=1e-6)
    assert c.workload("A").baseline == EXCLUSIVE_PHASE
    assert c.workload("A").exclusive[0].end == pytest.approx(15.0)
    assert any("exclusive phase" in n for n in c.notes)
    assert any("exclusive phase" in line for line in render_tables(c))


def test_staggered_run_of_different_jobs_reports_what_it_can(tmp_path: Path) -> None:
    ab = pair_run(
        tmp_path,
        "ab",
        Job("A", FCN, phases=((15, 0.1), (45, 0.2))),
        Job("B", LSTM, start=15.0, phases=((45, 0.2),)),
    )
    c = compare([], [load_run(ab)])
    assert c.workload("A").slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert math.isnan(c.workload("B").slowdown.value) and math.isnan(c.pair.stp.value)
    assert any("never ran alone" in w for w in c.warnings)
    json.dumps(c.to_dict(), allow_nan=False)


def test_repeats_give_an_interval_across_repeats(tmp_path: Path) -> None:
    """Noise-free runs whose rates differ between repeats: the interval comes from the spread of repeats."""
    xa = [
        load_run(exclusive_run(tmp_path, f"xa{i}", FCN, s))
        for i, s in enumerate((0.1, 0.104, 0.096))
    ]
    xb = [load_run(exclusive_run(tmp_path, f"xb{i}", LSTM, 0.1)) for i in range(2)]
    ab = [
        load_run(
            pair_run(
                tmp_path,
                f"ab{i}",
                Job("A", FCN, phases=((20, s),)),
                Job("B", LSTM, phases=((20, 0.2),)),
            )
        )
        for i, s in enumerate((0.2, 0.21, 0.19))
    ]
    c = compare([*xa, *xb], ab)
    r = c.workload("A").slowdown
    mean_x = np.mean([1 / 0.1, 1 / 0.104, 1 / 0.096])
    mean_s = np.mean([1 / 0.2, 1 / 0.21, 1 / 0.19])
    assert r.value == pytest.approx(mean_x / mean_s, rel=1e-3)
    assert r.high - r.low > 0.05
    # three runs cannot show how far a fourth would fall: the interval reaches past the extreme repeats
    # (resampling the runs could not), by about Student's t with 2 degrees of freedom (analysis/spread.py)
    assert r.low < (1 / 0.104) / (1 / 0.19) and r.high > (1 / 0.096) / (1 / 0.21)
    se = math.hypot(
        np.std(np.log([1 / 0.1, 1 / 0.104, 1 / 0.096]), ddof=1),
        np.std(np.log([1 / 0.2, 1 / 0.21, 1 / 0.19]), ddof=1),
    ) / math.sqrt(3)
    assert math.log(r.high / r.low) < 2 * 4.303 * se * 1.5
    assert len(c.workload("A").exclusive) == 3 and len(c.workload("B").shared) == 3


def test_block_bootstrap_interval_covers_the_true_rate_of_autocorrelated_steps() -> None:
    """AR(1) step times with a known mean rate of 20 it/s: the 95 % interval holds it in >= 88 % of 100 runs."""
    hits = 0
    for seed in range(100):
        t = np.array([s[0] for s in Job(phases=((60, 0.05),), noise=0.15, seed=seed).build()])
        c = rates.Curve(t, np.arange(len(t), dtype=float))
        sample = window_rates([c], c.span(), np.random.default_rng(seed), 1000)
        e = interval(float(sample.points[0]), sample.replicates[:, 0])
        hits += e.low < 20.0 < e.high
    assert hits >= 88


def test_noisy_steps_give_an_interval_and_no_false_verdict(tmp_path: Path) -> None:
    xa = exclusive_run(tmp_path, "xa", FCN, 0.05, until=60, noise=0.15, seed=11)
    xb = exclusive_run(tmp_path, "xb", LSTM, 0.05, until=60, noise=0.15, seed=12)
    ab = pair_run(
        tmp_path,
        "ab",
        Job("A", FCN, phases=((60, 0.1),), noise=0.15, seed=13),
        Job("B", LSTM, phases=((60, 0.1),), noise=0.15, seed=14),
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    for slot in ("A", "B"):
        r = c.workload(slot).slowdown
        assert r.low < r.value < r.high and 0.05 < r.high - r.low < 0.5
        assert r.value == pytest.approx(2.0, rel=0.1)
    assert c.pair.stp.low < 1.0 < c.pair.stp.high
    assert c.pair.verdict == CANNOT_TELL


def test_block_bootstrap_keeps_the_mean_and_widens_for_autocorrelation() -> None:
    rng = np.random.default_rng(0)
    e = np.zeros(400)
    for i in range(1, 400):
        e[i] = 0.9 * e[i - 1] + rng.normal()
    series = np.column_stack([e, rng.normal(size=400)])
    reps = block_bootstrap_means(series, 4000, np.random.default_rng(1))
    assert reps.mean(axis=0) == pytest.approx(series.mean(axis=0), abs=0.05)
    naive_se = series.std(axis=0) / math.sqrt(400)
    assert (
        reps[:, 0].std() > 2.5 * naive_se[0]
    )  # AR(1) with phi = 0.9: the naive error is far too small
    assert reps[:, 1].std() == pytest.approx(naive_se[1], rel=0.3)


@pytest.mark.parametrize(
    ("a_shared_s", "b_shared_s", "expected"),
    [(0.125, 0.125, PAYS), (0.25, 0.25, LOSES)],
)
def test_verdicts(tmp_path: Path, a_shared_s: float, b_shared_s: float, expected: str) -> None:
    c = solo_and_shared(
        tmp_path,
        Job("A", FCN, phases=((30, a_shared_s),)),
        Job("B", LSTM, phases=((30, b_shared_s),)),
    )
    assert c.pair.stp.value == pytest.approx(2 * 0.1 / a_shared_s, abs=1e-6)
    assert c.pair.verdict == expected


def test_verdict_rule() -> None:
    assert verdict(1.1, 1.5) == PAYS
    assert verdict(0.7, 0.9) == LOSES
    assert verdict(0.95, 1.15) == CANNOT_TELL
    assert verdict(Estimate(1.5).low, Estimate(1.5).high) == CANNOT_TELL, "no interval: cannot tell"


def test_distributions_identical_vs_shifted() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(100, 5, 500)
    same = compare_samples(CPU, a, a.copy())
    shifted = compare_samples(CPU, a, a - 40)
    assert same.wasserstein == pytest.approx(0.0) and same.median_shift == pytest.approx(0.0)
    assert same.ks_pvalue == pytest.approx(1.0) and same.chi2_pvalue == pytest.approx(1.0)
    assert shifted.median_shift == pytest.approx(-40.0)
    assert shifted.relative_shift == pytest.approx(-0.4, abs=0.01)
    assert shifted.wasserstein == pytest.approx(40.0)
    assert shifted.ks_pvalue < 1e-10 and shifted.chi2_pvalue < 1e-10 and shifted.chi2_dof >= 1
    assert compare_samples(CPU, a[:1], a) is None


def test_distributions_of_copies_utilisation_and_cpu_in_a_comparison(tmp_path: Path) -> None:
    gpu = {"index": 0, "name": "Fake GPU", "uuid": "GPU-1"}
    xa = write_run(
        tmp_path / "xa",
        [Job("A", FCN, copy_bytes=1_000_000, copy_s=0.001, cpu=100.0)],
        gpu=gpu,
        gpu_util=60.0,
    )
    xb = write_run(
        tmp_path / "xb",
        [Job("A", LSTM, copy_bytes=1_000_000, copy_s=0.001, cpu=100.0)],
        gpu=gpu,
        gpu_util=60.0,
    )
    ab = pair_run(
        tmp_path,
        "ab",
        Job("A", FCN, phases=((20, 0.2),), copy_bytes=1_000_000, copy_s=0.002, cpu=50.0),
        Job("B", LSTM, phases=((20, 0.2),), copy_bytes=1_000_000, copy_s=0.002, cpu=50.0),
        gpu=gpu,
        gpu_util=95.0,
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    tests = {d.metric: d for d in c.workload("A").distributions}
    assert set(tests) == {"copy_bandwidth", "copy_bytes_per_s", "gpu_util", "cpu_pct"}
    assert tests["copy_bandwidth"].median_exclusive == pytest.approx(1e9)
    assert tests["copy_bandwidth"].median_shared == pytest.approx(5e8)
    assert tests["copy_bytes_per_s"].median_shared == pytest.approx(5e6)
    assert tests["gpu_util"].median_shift == pytest.approx(35.0)
    assert tests["cpu_pct"].relative_shift == pytest.approx(-0.5)
    exclusive, shared = c.samples[("A", "copy_bandwidth")]
    assert len(exclusive) == tests["copy_bandwidth"].n_exclusive and len(shared) > 10
    text = "\n".join(render_tables(c))
    assert "copy bandwidth (GB/s)" in text and "Caution" in text and "\x1b[" not in text


def test_no_copies_and_no_nvml_leave_those_metrics_out(tmp_path: Path) -> None:
    exclusive, shared = half_speed(tmp_path)
    c = compare(exclusive, shared)
    assert [d.metric for d in c.workload("A").distributions] == ["cpu_pct"]


def test_warnings_short_overlap_few_steps_early_exit_and_other_device(tmp_path: Path) -> None:
    xa = write_run(
        tmp_path / "xa",
        [Job("A", FCN, phases=((20, 0.1),))],
        gpu={"name": "GPU X", "uuid": "GPU-1"},
    )
    xb = write_run(
        tmp_path / "xb",
        [Job("A", LSTM, phases=((20, 0.1),))],
        gpu={"name": "GPU Y", "uuid": "GPU-2"},
    )
    ab = pair_run(
        tmp_path,
        "ab",
        Job("A", FCN, phases=((3, 0.2),), exit_status=1),
        Job("B", LSTM, phases=((20, 0.2),)),
        gpu={"name": "GPU X", "uuid": "GPU-1"},
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    text = "\n".join(c.warnings)
    assert "overlap window is 2.8 s" in text
    assert "A has only 14 steps in its shared window" in text
    assert "workload A (fcn:preset=tiny) exited early with status 1" in text
    assert "different devices" in text and "GPU Y" in text
    assert "A: too few steps for a confidence interval" in text
    assert any("Warnings:" in line for line in render_tables(c))


def test_a_stop_requested_by_gpumon_is_not_an_early_exit(tmp_path: Path) -> None:
    exclusive, shared = half_speed(tmp_path)
    meta = json.loads((shared[0].path / "run.json").read_text())
    for w in meta["workloads"]:
        w.update(exit_status=-15, state="stopped")
    (shared[0].path / "run.json").write_text(json.dumps(meta))
    assert compare(exclusive, [load_run(shared[0].path)]).warnings == ()


def test_incomplete_run_is_flagged(tmp_path: Path) -> None:
    c = solo_and_shared(
        tmp_path,
        Job("A", FCN, phases=((20, 0.2),)),
        Job("B", LSTM, phases=((20, 0.2),)),
        status="recording",
    )
    assert any("not complete" in w for w in c.warnings)


def test_matching_by_spec_ignores_option_order_and_accepts_assignments(tmp_path: Path) -> None:
    assert spec_key("gemm:threads=1,cpus=0") == spec_key("gemm: cpus=0, threads=1")
    assert spec_key("gemm:cpus=0") != spec_key("gemm:cpus=1")
    xa = exclusive_run(tmp_path, "xa", "fcn:preset=tiny,batch=32", 0.1)
    xb = exclusive_run(tmp_path, "xb", LSTM, 0.1)
    ab = pair_run(
        tmp_path, "ab", Job("A", FCN, phases=((20, 0.2),)), Job("B", LSTM, phases=((20, 0.2),))
    )
    runs = [load_run(xa), load_run(xb)]
    with pytest.raises(UsageError, match="matches neither shared workload"):
        compare(runs, [load_run(ab)])
    c = compare(runs, [load_run(ab)], {str(runs[0].path): "A"})
    assert c.workload("A").slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert any("assigned by A=" in n for n in c.notes)


def test_same_spec_twice_shares_one_baseline(tmp_path: Path) -> None:
    spec = "gemm:cpus=0,threads=1"
    x = exclusive_run(tmp_path, "x", spec, 0.1)
    ab = pair_run(
        tmp_path, "ab", Job("A", spec, phases=((20, 0.2),)), Job("B", spec, phases=((20, 0.2),))
    )
    c = compare([load_run(x)], [load_run(ab)])
    assert c.workload("A").exclusive == c.workload("B").exclusive
    assert c.pair.stp.value == pytest.approx(1.0, abs=1e-6)


def test_swapped_slots_in_a_shared_repeat_are_matched_by_spec(tmp_path: Path) -> None:
    xa = exclusive_run(tmp_path, "xa", FCN, 0.1)
    xb = exclusive_run(tmp_path, "xb", LSTM, 0.1)
    ab = pair_run(
        tmp_path, "ab", Job("A", FCN, phases=((20, 0.2),)), Job("B", LSTM, phases=((20, 0.4),))
    )
    ba = pair_run(
        tmp_path, "ba", Job("A", LSTM, phases=((20, 0.4),)), Job("B", FCN, phases=((20, 0.2),))
    )
    c = compare([load_run(xa), load_run(xb)], [load_run(ab), load_run(ba)])
    assert c.workload("A").slowdown.value == pytest.approx(2.0, abs=1e-6)
    assert c.workload("B").slowdown.value == pytest.approx(4.0, abs=1e-6)


@pytest.mark.parametrize(
    "case", ["no_overlap", "mismatched_pair", "missing_baseline", "exclusive_is_shared"]
)
def test_bad_input_is_a_usage_error(tmp_path: Path, case: str) -> None:
    xa = load_run(exclusive_run(tmp_path, "xa", FCN, 0.1))
    xb = load_run(exclusive_run(tmp_path, "xb", LSTM, 0.1))
    ab = load_run(
        pair_run(
            tmp_path, "ab", Job("A", FCN, phases=((20, 0.2),)), Job("B", LSTM, phases=((20, 0.2),))
        )
    )
    if case == "no_overlap":
        apart = pair_run(
            tmp_path,
            "apart",
            Job("A", FCN, phases=((10, 0.2),)),
            Job("B", LSTM, start=12.0, phases=((20, 0.2),)),
        )
        args, match = ([xa, xb], [load_run(apart)]), "no overlap"
    elif case == "mismatched_pair":
        other = pair_run(
            tmp_path,
            "other",
            Job("A", FCN, phases=((20, 0.2),)),
            Job("B", "vgg19", phases=((20, 0.2),)),
        )
        args, match = ([xa, xb], [ab, load_run(other)]), "do not match"
    elif case == "missing_baseline":
        args, match = ([xa], [ab]), "no exclusive run for B"
    else:
        args, match = ([ab], [ab]), "not an exclusive run"
    with pytest.raises(UsageError, match=match):
        compare(*args)


def test_corrupt_steps_are_a_usage_error(tmp_path: Path) -> None:
    xa = exclusive_run(tmp_path, "xa", FCN, 0.1)
    steps = xa / "steps.csv"
    steps.write_text(steps.read_text().replace("\nA,1000,3,", "\nA,1000,three,", 1))
    ab = pair_run(
        tmp_path, "ab", Job("A", FCN, phases=((20, 0.2),)), Job("B", FCN, phases=((20, 0.2),))
    )
    with pytest.raises(UsageError, match="non-numeric values in column step"):
        compare([load_run(xa)], [load_run(ab)])


def test_to_dict_is_strict_json_with_slowdown_and_stp(tmp_path: Path) -> None:
    exclusive, shared = half_speed(tmp_path)
    data = json.loads(json.dumps(compare(exclusive, shared).to_dict(), allow_nan=False))
    assert data["workloads"]["A"]["slowdown"]["estimate"] == pytest.approx(2.0)
    assert set(data["pair"]["stp"]) == {"estimate", "low", "high"}
    assert data["pair"]["verdict"] == CANNOT_TELL


def test_split_runs_by_workload_count(tmp_path: Path) -> None:
    exclusive, shared = half_speed(tmp_path)
    assert split_runs([shared[0], *exclusive]) == (exclusive, shared)


def test_histogram_renders_without_ansi_unless_asked() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(1e9, 1e8, 200), rng.normal(6e8, 1e8, 200)
    plain = render_histogram(a, b, "copy bandwidth", "B/s", width=60, height=12)
    assert "\x1b[" not in plain and "GB/s" in plain and "█" in plain and "░" in plain
    assert len(plain.splitlines()) == 12
    assert "\x1b[" in render_histogram(a, b, "copy bandwidth", "B/s", color=True)


def test_report_of_a_partial_comparison(tmp_path: Path) -> None:
    """A job without a baseline still gives every file, with empty cells where there is no number."""
    from gpumon.analysis.report import PLOTS, write_report

    ab = pair_run(
        tmp_path,
        "ab",
        Job("A", FCN, phases=((15, 0.1), (45, 0.2))),
        Job("B", LSTM, start=15.0, phases=((45, 0.2),)),
    )
    run = load_run(ab)
    c = compare([], [run])
    written = {p.name for p in write_report(c, [run], tmp_path / "report")}
    assert {"report.md", "summary.json", "rates.csv", "pair.csv", *PLOTS} <= written
    assert "never ran alone" in (tmp_path / "report" / "report.md").read_text()
    assert (
        json.loads((tmp_path / "report" / "summary.json").read_text())["pair"]["stp"]["estimate"]
        is None
    )


def test_analysis_imports_stay_light() -> None:
    """The CLI module pulls in no pandas/scipy/matplotlib/numpy; no analysis module imports Textual or torch."""
    import subprocess
    import sys

    code = (
        "import sys, gpumon.commands.compare\n"
        "heavy = [m for m in ('pandas', 'scipy', 'matplotlib', 'numpy') if m in sys.modules]\n"
        "import gpumon.analysis.compare, gpumon.analysis.report, gpumon.analysis.text\n"
        "print(heavy, [m for m in ('textual', 'torch') if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[] []"


def test_compare_and_the_live_line_call_a_slowdown_the_same_at_the_thresholds(
    tmp_path: Path,
) -> None:
    """Issue 34 item 9: r 1.19 (16 % slower) is 'runs 1.19× slower', not 'barely notices' (BARELY was 1.2); r 1.03 is
    within 5 %: 'barely notices'. compare's sentence and the live line, replayed on the same run, say the same."""
    from gpumon.analysis.text import verdict_sentence
    from gpumon.core.interference.live import LiveStats
    from gpumon.core.interference.live_cause import cause_words
    from gpumon.core.records.bus import Bus
    from gpumon.core.records.rates import interference
    from gpumon.core.sources.replay import ReplaySource

    said = verdict_sentence(
        solo_and_shared(
            tmp_path, Job("A", FCN, phases=((30, 0.119),)), Job("B", LSTM, phases=((30, 0.103),))
        )
    )
    assert "fcn runs 1.19× slower" in said and "lstm barely notices fcn (r 1.03)" in said, said

    bus, live = Bus(), LiveStats()
    bus.subscribe(live.handle)
    ReplaySource(tmp_path / "ab", bus).seek(29.0)
    result = interference({"A": 10.0, "B": 10.0}, live.overlap("AB"))
    assert (
        cause_words({"A": FCN, "B": LSTM}, result.slowdown, {})
        == "fcn runs 1.19× slower; lstm barely notices fcn (r 1.03)"
    )
