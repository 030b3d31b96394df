"""compare reads each run's steps once and selects each job once: its figures must equal ones computed
directly from steps.csv with plain pandas masks, whatever the row order; `gpumon runs` reads only the
columns it needs and must agree with reading steps.csv row by row."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpumon.analysis import distributions as dist
from gpumon.analysis import stats_helper
from gpumon.analysis.compare import compare
from gpumon.core.interference import evidence
from gpumon.core.store import trace
from gpumon.core.store import columnar
from gpumon.core.store.columnar import STEPS_COLUMNAR
from gpumon.core.store.trace import (
    Run,
    _exclusive_ends_by_row,
    exclusive_ends,
    exclusive_rates,
    load_run,
)
from tests.tracegen import Job, write_run

FCN = "fcn:preset=tiny"
LSTM = "lstm:preset=tiny"


def _copying(slot: str, spec: str, phases, **kw) -> Job:
    return Job(
        slot,
        spec,
        phases=phases,
        warmup=4,
        warmup_s=0.6,
        noise=0.2,
        copy_bytes=1 << 20,
        copy_s=lambda t: 0.001 + 0.0005 * (t % 3),
        cpu=lambda t: 50 + (t * 7) % 40,
        **kw,
    )


def _runs(root: Path) -> tuple[Path, Path, Path]:
    xa = write_run(root / "xa", [_copying("A", FCN, ((20, 0.1),), seed=1)], label="xa")
    xb = write_run(root / "xb", [_copying("B", LSTM, ((20, 0.05),), seed=2)], label="xb")
    ab = write_run(
        root / "ab",
        [
            _copying("A", FCN, ((30, 0.2),), seed=3),
            _copying("B", LSTM, ((30, 0.1),), seed=4, pid=7),
        ],
        label="ab",
    )
    return xa, xb, ab


def _shuffle_rows(run_dir: Path, seed: int = 5) -> None:
    """steps.csv with its rows in another order (warm-up rows no longer first, times not sorted)."""
    header, *rows = (run_dir / "steps.csv").read_text().splitlines(keepends=True)
    order = np.random.default_rng(seed).permutation(len(rows))
    (run_dir / "steps.csv").write_text(header + "".join(rows[i] for i in order))
    (run_dir / STEPS_COLUMNAR).unlink(missing_ok=True)


def _post_warmup(run_dir: Path, slot: str) -> pd.DataFrame:
    """The reference selection: boolean masks over the whole table, then a stable sort by time."""
    steps = pd.read_csv(run_dir / "steps.csv")
    rows = steps[(steps["process"] == slot) & steps["t"].notna() & steps["step"].notna()]
    rows = rows.sort_values("t", kind="stable")
    return rows[rows["warmup"].fillna(0).astype(int) == 0]


def _check_against_reference(xa: Path, xb: Path, ab: Path) -> None:
    c = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    for slot, alone in (("A", xa), ("B", xb)):
        w = c.workload(slot)
        ref = _post_warmup(alone, slot)
        # rates by hand: steps between the two points over the seconds between them
        first, last = ref.iloc[0], ref.iloc[-1]
        assert w.exclusive_rate == pytest.approx(
            (last["step"] - first["step"]) / (last["t"] - first["t"]), rel=1e-12
        )
        shared = {s: _post_warmup(ab, s) for s in ("A", "B")}
        start = max(float(r["t"].iloc[0]) for r in shared.values())
        end = min(float(r["t"].iloc[-1]) for r in shared.values())
        mine = shared[slot]
        at = np.interp([start, end], mine["t"], mine["step"])
        assert w.shared_rate == pytest.approx((at[1] - at[0]) / (end - start), rel=1e-12)
        assert (w.shared[0].start, w.shared[0].end) == pytest.approx((start, end), rel=1e-15)
        # per-copy bandwidth in the shared window: every post-warm-up step inside it
        inside = mine[(mine["t"] >= start) & (mine["t"] <= end)]
        inside = inside[(inside["copy_bytes"] > 0) & (inside["copy_s"] > 0)]
        test = next(d for d in w.distributions if d.metric == dist.COPY_BANDWIDTH.key)
        assert test.n_shared == len(inside)
        assert test.median_shared == pytest.approx(
            float(np.median(inside["copy_bytes"] / inside["copy_s"])), rel=1e-12
        )
        # the evidence's copy seconds per step, over the rows of the job in the window
        steps = pd.read_csv(ab / "steps.csv")
        rows = steps[
            (steps["process"] == slot) & (steps["warmup"] != 1) & steps["t"].between(start, end)
        ]
        copy_s, copy_bytes = evidence._step_means(evidence.Window(load_run(ab), slot, start, end))
        assert copy_s == pytest.approx(rows["copy_s"].sum() / len(rows), rel=1e-12)
        assert copy_bytes == pytest.approx(rows["copy_bytes"].sum() / len(rows), rel=1e-12)
        # and its CPU means over the sampled rows in the window
        side = evidence.run_side(evidence.Window(load_run(ab), slot, start, end), 1.0)
        procs = pd.read_csv(ab / "processes.csv")
        procs = procs[(procs["process"] == slot) & procs["t"].between(start, end)]
        host = pd.read_csv(ab / "host.csv")
        assert len(procs) > 10
        assert side.cpu_pct == pytest.approx(procs["cpu_pct"].mean(), rel=1e-12)
        assert side.host_cpu_pct == pytest.approx(
            host.loc[host["t"].between(start, end), "cpu_pct"].mean(), rel=1e-12
        )


def test_compare_equals_a_reference_computed_directly(tmp_path: Path) -> None:
    _check_against_reference(*_runs(tmp_path))


def test_the_evidence_means_skip_empty_and_garbled_cells(tmp_path: Path) -> None:
    """A sampled table's cells are read as numbers at once; an empty or garbled cell is unknown, not a zero."""
    _, _, ab = _runs(tmp_path)
    header, *rows = (ab / "processes.csv").read_text().splitlines(keepends=True)
    cpu = header.strip().split(",").index("cpu_pct")

    def damaged(i: int, row: str) -> str:
        cells = row.rstrip("\n").split(",")
        cells[cpu] = "" if i % 7 == 0 else ("n/a" if i % 11 == 0 else cells[cpu])
        return ",".join(cells) + "\n"

    (ab / "processes.csv").write_text(header + "".join(damaged(i, r) for i, r in enumerate(rows)))
    procs = pd.read_csv(ab / "processes.csv")
    procs["cpu_pct"] = pd.to_numeric(procs["cpu_pct"], errors="coerce")
    assert procs["cpu_pct"].isna().sum() > 5
    start, end = 5.0, 25.0
    side = evidence.run_side(evidence.Window(load_run(ab), "A", start, end), 1.0)
    inside = procs[(procs["process"] == "A") & procs["t"].between(start, end)]
    assert side.cpu_pct == pytest.approx(inside["cpu_pct"].mean(), rel=1e-12)


def test_rows_out_of_order_give_the_same_answers(tmp_path: Path) -> None:
    xa, xb, ab = _runs(tmp_path)
    before = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    for run_dir in (xa, ab):
        _shuffle_rows(run_dir)
    _check_against_reference(xa, xb, ab)
    after = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    for slot in ("A", "B"):
        b, a = before.workload(slot), after.workload(slot)
        assert (a.exclusive_rate, a.shared_rate) == pytest.approx(
            (b.exclusive_rate, b.shared_rate), rel=1e-12
        )
        assert [(d.metric, d.n_exclusive, d.n_shared) for d in a.distributions] == [
            (d.metric, d.n_exclusive, d.n_shared) for d in b.distributions
        ]
    assert after.pair.stp.value == pytest.approx(before.pair.stp.value, rel=1e-12)


def test_each_run_reads_its_steps_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a columnar copy (the base install) the table is parsed once per run; with one it is never read whole
    (tests/core/test_compare_bounded.py)."""
    xa, xb, ab = _runs(tmp_path)
    monkeypatch.setattr(Run, "columnar_file", lambda self, make=True: None)
    reads: list[Path] = []
    frame = Run.frame

    def counting(self: Run, table: str) -> pd.DataFrame:
        if table == "steps":
            reads.append(self.path)
        return frame(self, table)

    monkeypatch.setattr(Run, "frame", counting)
    compare([load_run(xa), load_run(xb)], [load_run(ab)])
    assert sorted(reads) == sorted([xa, xb, ab])


def test_the_memoised_steps_follow_a_changed_csv(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),))]))
    first = run.steps()
    assert run.steps() is first and run.job_steps("A") is first, (
        "one job: its rows are the table itself"
    )
    with open(run.path / "steps.csv", "a") as f:
        f.write("B,9,0,99.0,0.1,64,0,0,\n")
    assert len(run.steps()) == len(first) + 1
    assert len(run.job_steps("B")) == 1 and len(run.job_steps("A")) == len(first)
    assert run.job_steps("C").empty


def test_a_copy_of_an_older_layout_is_ignored_and_left_as_it_is(tmp_path: Path) -> None:
    """A steps.parquet a reader of an older gpumon left (untyped, layout 2): not read, not rewritten by a reader;
    the copy is made in the user's cache instead."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir = write_run(tmp_path / "r", [Job(slot="A", phases=((5.0, 0.1),)), Job(slot="B", pid=7)])
    frame = pd.read_csv(run_dir / "steps.csv")
    old = pa.Table.from_pandas(frame, preserve_index=False)  # job names as plain strings
    st = os.stat(run_dir / "steps.csv")
    key = f"{st.st_size}:{st.st_mtime_ns}".encode()
    pq.write_table(
        old.replace_schema_metadata({columnar.CSV_KEY: key, columnar.LAYOUT_KEY: b"2"}),
        run_dir / STEPS_COLUMNAR,
    )
    stamp = (run_dir / STEPS_COLUMNAR).stat().st_mtime_ns
    steps = load_run(run_dir).steps()
    assert steps["process"].dtype == "category"
    assert (run_dir / STEPS_COLUMNAR).stat().st_mtime_ns == stamp
    assert pq.read_schema(run_dir / STEPS_COLUMNAR).metadata[columnar.LAYOUT_KEY] == b"2"
    assert columnar.cache_path(run_dir, os.stat(run_dir / "steps.csv")).is_file()
    assert exclusive_ends(load_run(run_dir)) == _exclusive_ends_by_row(load_run(run_dir))


@pytest.fixture(autouse=True)
def _columns_for_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These small runs' rates through the columns path, as an hour-long capture's."""
    monkeypatch.setattr(trace, "COLUMNS_BYTES", 0)


def test_a_small_run_is_read_row_by_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "COLUMNS_BYTES", 1 << 30)
    monkeypatch.setattr(trace, "_rate_columns", None)  # not called
    run_dir = _rates_run(tmp_path)
    assert list(exclusive_ends(load_run(run_dir)).items()) == list(
        _exclusive_ends_by_row(load_run(run_dir)).items()
    )
    assert columnar.open_copy(run_dir) is None


def _rates_run(tmp_path: Path) -> Path:
    run_dir = write_run(
        tmp_path / "r",
        [
            Job("A", FCN, phases=((20, 0.1),), warmup=3, noise=0.3, seed=1),
            Job("B", LSTM, phases=((20, 0.07),), warmup=2, pid=7, seed=2),
        ],
    )
    _shuffle_rows(run_dir)
    with open(
        run_dir / "steps.csv", "a"
    ) as f:  # a tie with the last step of B, a row without a step
        last_b = _post_warmup(run_dir, "B").iloc[-1]
        f.write(f"B,7,{int(last_b['step']) + 1},{float(last_b['t'])!r},0.1,64,0,0,\n")
        f.write("A,1,,25.0,0.1,64,0,0,\n")
    return run_dir


def test_runs_rates_agree_with_reading_row_by_row(tmp_path: Path) -> None:
    run_dir = _rates_run(tmp_path)
    by_row = _exclusive_ends_by_row(load_run(run_dir))
    assert set(by_row) == {"A", "B"}
    assert trace._rate_columns(load_run(run_dir)) is not None, "the table reads as numbers"
    (run_dir / STEPS_COLUMNAR).unlink(missing_ok=True)
    uncached = exclusive_ends(load_run(run_dir))  # makes the copy in the user's cache
    assert columnar.open_copy(run_dir) is not None
    cached = exclusive_ends(load_run(run_dir))  # the copy's columns, with pyarrow alone
    assert list(uncached.items()) == list(by_row.items()) == list(cached.items())


def test_runs_rates_without_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow.parquet missing (the light install): no cache, the table read by pandas."""
    run_dir = _rates_run(tmp_path)
    by_row = _exclusive_ends_by_row(load_run(run_dir))
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert list(exclusive_ends(load_run(run_dir)).items()) == list(by_row.items())
    assert columnar.open_copy(run_dir) is None


@pytest.mark.parametrize(
    "row", ["A,1,999,not-a-time,0.1,64,0,0,", "A,1,999,99.0,0.1", "A,1,999,99.0,0.1,64,0,0,,7"]
)
def test_runs_rates_of_a_damaged_table_are_read_row_by_row(tmp_path: Path, row: str) -> None:
    """Text in a number, a short row (pandas would pad it), a long one (pandas refuses the table)."""
    run_dir = _rates_run(tmp_path)
    with open(run_dir / "steps.csv", "a") as f:
        f.write(row + "\n")
    run = load_run(run_dir)
    assert list(exclusive_ends(run).items()) == list(_exclusive_ends_by_row(run).items())
    assert (
        exclusive_rates(run)["A"] == exclusive_rates(load_run(_rates_run(tmp_path / "clean")))["A"]
    )


def _jobs_and_columns(parsed) -> tuple[list, list[list[str]]]:
    """``Run.step_columns``'s answer as each row's job name (None: none) and the columns as floats' texts."""
    codes, names, columns = parsed
    jobs = [names[int(c)] if c == c and c >= 0 else None for c in codes]
    return jobs, [
        [repr(float(x)) if isinstance(x, (int, float, np.number)) else repr(x) for x in c]
        for c in columns
    ]


@pytest.mark.parametrize(
    "row",
    [
        None,
        "A,1,999,not-a-time,0.1,64,0,0,",
        "A,1,999,99.0,0.1",
        '"A",1,999,99.0,0.1,64,0,0,',
        ",1,999,99.0,0.1,64,0,0,",
        "None,1,999,99.0,0.1,64,0,0,",
    ],
)
def test_a_light_read_of_the_steps_gives_what_pandas_gives(tmp_path: Path, row: str | None) -> None:
    """``whole=False`` (predict): pyarrow's reader where it reads as pandas does, else pandas; no cache written."""
    run_dir = _rates_run(tmp_path)  # rows shuffled, a tie, a row without a step
    if (
        row is not None
    ):  # text in a number, a short row, quotes, a row without a job, a job pandas reads as missing
        with open(run_dir / "steps.csv", "a") as f:
            f.write(row + "\n")
    direct = trace.csv_columns(
        load_run(run_dir).table_bytes("steps"), ("process", "t"), jobs_as_pandas=True
    )
    agrees = row is None or row[0] in ',"'  # no row added, a row without a job, a quoted job name
    assert (direct is not None) == agrees, "pyarrow reads it only where pandas would read the same"
    light = load_run(run_dir).step_columns(trace.READ_STEP_COLUMNS, whole=False)
    assert columnar.open_copy(run_dir) is None
    full = load_run(run_dir).step_columns(trace.READ_STEP_COLUMNS)
    (light_jobs, light_columns), (full_jobs, full_columns) = (
        _jobs_and_columns(light),
        _jobs_and_columns(full),
    )
    assert light_jobs == full_jobs and light_columns == full_columns


def test_the_small_tables_read_by_pyarrow_equal_the_csv_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, ab = _runs(tmp_path)
    with open(ab / "processes.csv", "a") as f:  # a job name the csv module keeps as written
        f.write("99.0,NA,3,12.5,100.0,4,,\n")
    tables = {t: list(trace.TABLES[t]) for t in ("device", "processes", "host")}
    fast = {
        t: {c: evidence._column(load_run(ab), t, c) for c in columns}
        for t, columns in tables.items()
    }
    assert evidence._parsed(load_run(ab), "processes") is not None
    monkeypatch.setattr(evidence, "csv_columns", lambda *a, **k: None)  # the csv module alone
    slow = {
        t: {c: evidence._column(load_run(ab), t, c) for c in columns}
        for t, columns in tables.items()
    }
    for t, columns in tables.items():
        for c in columns:
            a, b = fast[t][c], slow[t][c]
            same = list(a) == list(b) if a.dtype == object else np.array_equal(a, b, equal_nan=True)
            assert same, (t, c)


def test_table_bytes_are_the_table_text(tmp_path: Path) -> None:
    _, _, ab = _runs(tmp_path)
    with open(ab / "steps.csv", "a") as f:
        f.write("A,1,9")  # torn: no newline
    device = (ab / "device.csv").read_text().splitlines()
    header = device[0].split(",")
    older = [c for c in header if c not in trace.GPM_COLUMNS]  # recorded before the GPM columns
    rows = [",".join(r.split(",")[: len(older)]) for r in device[1:]]
    (ab / "device.csv").write_text("\n".join([",".join(older), *rows]) + "\n")
    run = load_run(ab)
    for table in ("steps", "device", "processes", "host"):
        assert run.table_bytes(table) == run.table_text(table).encode("utf-8"), table


def test_the_helper_process_gives_the_tests_computed_here() -> None:
    rng = np.random.default_rng(0)
    batch = [
        dist.samples_of(dist.CPU, rng.normal(50, 5, 300), rng.normal(45, 5, 200)),
        dist.samples_of(
            dist.GPU_UTIL,
            rng.integers(0, 3, 40).astype(float),
            rng.integers(0, 3, 30).astype(float),
        ),
    ]
    here = [dist.result_of(s, st) for s, st in zip(batch, dist.scipy_stats(batch))]
    tests = stats_helper.Tests(helper=True)
    tests.run(batch)
    assert tests.results() == here
    assert tests._proc is not None and tests._proc.returncode == 0, "the helper answered"


def test_a_failing_helper_leaves_the_tests_to_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats_helper, "_HELPER", "import sys; sys.exit(3)")
    rng = np.random.default_rng(1)
    batch = [dist.samples_of(dist.CPU, rng.normal(50, 5, 100), rng.normal(45, 5, 100))]
    tests = stats_helper.Tests(helper=True)
    tests.run(batch)
    assert tests.results() == [dist.compare_samples(dist.CPU, batch[0].exclusive, batch[0].shared)]


def test_compare_with_the_helper_equals_compare_without(tmp_path: Path) -> None:
    xa, xb, ab = _runs(tmp_path)
    here = compare([load_run(xa), load_run(xb)], [load_run(ab)])
    helped = compare(
        [load_run(xa), load_run(xb)], [load_run(ab)], tests=stats_helper.Tests(helper=True)
    )
    assert helped.to_dict() == here.to_dict()
    assert [w.distributions for w in helped.workloads] == [w.distributions for w in here.workloads]


def test_an_early_helper_is_kept_for_big_runs_and_ended_for_small_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "scipy.stats")  # as in a fresh gpumon compare
    big, small = tmp_path / "big", tmp_path / "small"
    for run_dir in (big, small):
        run_dir.mkdir()
    with open(big / "steps.csv", "wb") as f:
        f.truncate(stats_helper.HELPER_BYTES)  # only its size counts
    (small / "steps.csv").write_text("slot,step,t\n")
    stats_helper.start_early()
    early = stats_helper._early[0]
    proc = early._proc
    assert proc is not None
    here = stats_helper.for_runs([small])
    assert here is not None and here is not early and here._proc is None
    assert proc.wait(timeout=60) != 0, "the early helper was ended"
    assert not stats_helper._early

    stats_helper.start_early()
    early = stats_helper._early[0]
    kept = stats_helper.for_runs([big])
    assert kept is early and early._proc is not None
    rng = np.random.default_rng(2)
    batch = [dist.samples_of(dist.CPU, rng.normal(50, 5, 300), rng.normal(45, 5, 200))]
    kept.run(batch)
    assert kept.results() == [dist.compare_samples(dist.CPU, batch[0].exclusive, batch[0].shared)]
    assert early._proc.returncode == 0, "the early helper answered"


def test_compare_starts_its_helper_before_parsing_but_not_for_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpumon import cli

    started: list[bool] = []
    monkeypatch.setattr(stats_helper, "start_early", lambda: started.append(True))
    assert cli.main(["compare", "--shared", str(tmp_path / "missing")]) == 2
    assert started == [True]
    with pytest.raises(SystemExit):
        cli.main(["compare", "--help"])
    assert started == [True], "no helper for --help"
    cli.main(["runs", str(tmp_path)])
    assert started == [True], "only compare starts one"


PARENT_OF_A_HELPER = """
import subprocess, sys
from gpumon.analysis import stats_helper
tests = stats_helper.Tests(helper=True)
# a process that keeps the helper's stdin open after this one is gone: the helper can only end with its parent
keeper = subprocess.Popen(["sleep", "600"], pass_fds=[tests._proc.stdin.fileno()])
print(tests._proc.pid, keeper.pid, flush=True)
sys.stdin.read()
"""


def test_the_helper_dies_with_compare_even_after_kill_9() -> None:
    import os
    import signal
    import subprocess

    import psutil

    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_OF_A_HELPER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    helper_pid, keeper_pid = map(int, parent.stdout.readline().split())
    helper = psutil.Process(helper_pid)
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        _, alive = psutil.wait_procs([helper], timeout=60)
        assert not alive, "the scipy helper outlived compare"
    finally:
        for pid in (helper_pid, keeper_pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        parent.stdin.close()
        parent.stdout.close()


@pytest.mark.parametrize("rows", [1, 7, 1 << 20])
def test_runs_rates_read_the_copy_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    """Ties, shuffled rows and a row without a step across chunk edges: the same ends as row by row."""
    run_dir = _rates_run(tmp_path)
    monkeypatch.setattr(trace, "CHUNK_ROWS", rows)
    by_row = _exclusive_ends_by_row(load_run(run_dir))
    assert list(exclusive_ends(load_run(run_dir)).items()) == list(by_row.items())
    assert columnar.open_copy(run_dir) is not None, "read from the copy"
    counted = trace.step_counts(load_run(run_dir))
    assert counted == pd.read_csv(run_dir / "steps.csv")["process"].value_counts().to_dict()


def test_a_ks_test_whose_exact_p_fails_gives_the_asymptotic_one_and_no_warning() -> None:
    """Five CPU readings a side, nearly alike (a short H100 pair): scipy's exact p-value fails and warns."""
    import warnings

    from scipy.stats import ks_2samp

    exclusive = np.array([99.9, 99.9, 101.9, 97.7, 100.0])
    shared = np.array([99.6, 100.1, 101.8, 99.9, 100.0])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        stats = dist.scipy_stats([dist.Samples(dist.CPU, exclusive, shared, None)])
    assert not seen, [str(w.message) for w in seen]
    assert stats[0][1] == ks_2samp(exclusive, shared, method="asymp").pvalue
