"""Fuzzed trace files: ``runs``, ``export`` and ``compare`` read what is valid or say in one line
what is not, never a traceback.

Each example copies three valid runs (A alone, B alone, A+B shared), damages one file of one
of them (steps.csv, device.csv, processes.csv, host.csv or run.json: truncated, rows reordered,
duplicated, garbage rows or cells, JSON fields of the wrong type), and calls the real CLI in this
process. Bounded examples, no deadline: the box may be slow, the property may not.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.cli import main
from tests.tracegen import Job, write_run

RUNS = ("alone-A", "alone-B", "shared")
TABLE_FILES = ("steps.csv", "device.csv", "processes.csv", "host.csv")
FILES = (*TABLE_FILES, "run.json")
FUZZ = settings(
    deadline=None,
    max_examples=12,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

ODD_CELLS = [
    "",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e309",
    "-1",
    "0",
    "A",
    "B",
    "x",
    '"',
    '"a,b"',
    "1.5.2",
    "0x10",
    "\x00",
    "é",
    " ",
    "True",
    "None",
    "[1]",
    "{}",
]
cells = st.one_of(
    st.sampled_from(ODD_CELLS),
    st.text(max_size=6),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
)
garbage_line = st.one_of(
    st.lists(cells, max_size=12).map(lambda c: ",".join(c).encode("utf-8", "surrogatepass")),
    st.binary(max_size=60),
)
json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def valid_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("valid")
    a = dict(slot="A", spec="fcn:preset=tiny", phases=((12.0, 0.1),), warmup=3, noise=0.05)
    b = dict(spec="gemm:preset=tiny", phases=((12.0, 0.12),), warmup=3, noise=0.05)
    write_run(root / "alone-A", [Job(**a, seed=1)], gpu_util=lambda t: 50.0)
    write_run(root / "alone-B", [Job(slot="A", **b, seed=2)], gpu_util=lambda t: 50.0)
    write_run(
        root / "shared",
        [Job(**a, seed=3), Job(slot="B", **b, seed=4, pid=2000)],
        gpu_util=lambda t: 90.0,
    )
    return root


def split_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


@st.composite
def csv_damage(draw: st.DrawFn, data: bytes) -> bytes:
    lines = split_lines(data)
    kind = draw(st.sampled_from(["truncate", "reorder", "duplicate", "garbage", "cell"]))
    index = st.integers(0, max(0, len(lines) - 1))
    if kind == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    if kind == "reorder":
        for i, j in draw(st.lists(st.tuples(index, index), min_size=1, max_size=8)):
            lines[i], lines[j] = lines[j], lines[i]
    elif kind == "duplicate":
        for i, j in draw(st.lists(st.tuples(index, index), min_size=1, max_size=8)):
            lines.insert(j, lines[i])
    elif kind == "garbage":
        for j, line in draw(st.lists(st.tuples(index, garbage_line), min_size=1, max_size=5)):
            lines.insert(j, line)
    else:
        i = draw(st.integers(min(1, len(lines) - 1), max(0, len(lines) - 1)))
        row = lines[i].split(b",")
        k = draw(st.integers(0, max(0, len(row) - 1)))
        row[k] = draw(cells).encode("utf-8", "surrogatepass")
        lines[i] = b",".join(row)
    return b"\n".join(lines)


@st.composite
def json_damage(draw: st.DrawFn, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "garbage", "field", "workload-field", "drop"]))
    if kind == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    if kind == "garbage":
        return draw(st.binary(max_size=80))
    meta = json.loads(data)
    if kind == "workload-field" and meta["workloads"]:
        target = meta["workloads"][draw(st.integers(0, len(meta["workloads"]) - 1))]
    else:
        target = meta
    key = draw(st.sampled_from(sorted(target)))
    if kind == "drop":
        del target[key]
    else:
        target[key] = draw(json_values)
    return json.dumps(meta).encode()


@st.composite
def damaged_copy(draw: st.DrawFn, valid: Path, name: str) -> tuple[str, str, bytes]:
    """(run, file, new bytes): file ``name`` of one of the runs, damaged."""
    run = draw(st.sampled_from(RUNS))
    data = (valid / run / name).read_bytes()
    damaged = draw(json_damage(data) if name == "run.json" else csv_damage(data))
    return run, name, damaged


def cli(*args: str) -> tuple[int, str, str]:
    """The real CLI in this process: (exit status, stdout, stderr); any exception fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, out: str, err: str, what: str, as_json: bool = False) -> None:
    """Success (with strict JSON when asked), or exit 2 and exactly one ``gpumon: error:`` line."""
    if code == 0:
        if as_json:
            json.loads(out, parse_constant=lambda c: pytest.fail(f"{what}: {c} in JSON output"))
        return
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("gpumon: error: "), (
        f"{what}: exit {code}, stderr {err!r}"
    )


def damaged_runs(valid: Path, damage: tuple[str, str, bytes]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="gpumon-fuzz-"))
    for run in RUNS:
        shutil.copytree(valid / run, root / run)
    run, name, data = damage
    (root / run / name).write_bytes(data)
    return root


@pytest.mark.parametrize("name", FILES)
@given(data=st.data())
@FUZZ
def test_runs_and_export_survive_a_damaged_file(valid_runs, name, data):
    root = damaged_runs(valid_runs, data.draw(damaged_copy(valid_runs, name)))
    try:
        assert_clean(*cli("runs", str(root)), "runs")
        assert_clean(*cli("runs", str(root), "--json"), "runs --json", as_json=True)
        for run in RUNS:
            assert_clean(
                *cli("export", str(root / run), "--csv", str(root / "out" / run)), f"export {run}"
            )
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize("name", FILES)
@given(data=st.data())
@settings(FUZZ, max_examples=5)
def test_compare_survives_a_damaged_file(valid_runs, name, data):
    root = damaged_runs(valid_runs, data.draw(damaged_copy(valid_runs, name)))
    try:
        args = (
            "compare",
            "--exclusive",
            str(root / "alone-A"),
            "--exclusive",
            str(root / "alone-B"),
            "--shared",
            str(root / "shared"),
        )
        assert_clean(*cli(*args, "--json"), "compare --json", as_json=True)
    finally:
        shutil.rmtree(root)


def test_the_valid_runs_compare(valid_runs):
    """The undamaged fixture is read in full (so a damaged one that fails is the damage's doing)."""
    code, out, err = cli(
        "compare",
        "--exclusive",
        str(valid_runs / "alone-A"),
        "--exclusive",
        str(valid_runs / "alone-B"),
        "--shared",
        str(valid_runs / "shared"),
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    assert set(result["workloads"]) == {"A", "B"}
    assert 0.9 < result["pair"]["stp"]["estimate"] < 2.1


def test_damaged_step_rows_are_skipped_and_the_rest_read(tmp_path):
    """What the fuzz first found: a short row and a text step number made ``runs`` raise."""
    run = write_run(tmp_path / "r", [Job(slot="A", phases=((3.0, 0.1),))])
    lines = (run / "steps.csv").read_text().splitlines()
    lines[3] = "A,1000,x,0.3,0.1,64,0,0,"
    lines.insert(5, "A,1000")
    (run / "steps.csv").write_text("\n".join(lines) + "\n")
    code, out, err = cli("runs", str(tmp_path), "--json")
    assert code == 0, err
    assert json.loads(out)[0]["iter_per_s"]["A"] == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("duration_s", "abc", "duration_s is not a number"),
        ("label", {"x": 1}, "label is not text"),
        (
            "workloads",
            [{"process": "A", "start_t": "soon"}],
            "workloads[0].start_t is not a number",
        ),
    ],
)
def test_run_json_fields_of_the_wrong_type_are_one_line(tmp_path, field, value, says):
    run = write_run(tmp_path / "r", [Job(slot="A", phases=((3.0, 0.1),))])
    meta = json.loads((run / "run.json").read_text())
    meta[field] = value
    (run / "run.json").write_text(json.dumps(meta))
    code, out, err = cli("export", str(run), "--csv", str(tmp_path / "out"))
    assert (code, err) == (2, f"gpumon: error: {run / 'run.json'}: corrupt ({says})\n")
