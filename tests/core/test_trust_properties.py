"""Property tests at the reading boundary (issue 40, item 8): whatever arrives on a probe pipe or sits in run.json,
steps.csv or a calibration file, gpumon gives a result or one line with exit 1 or 2, never a traceback, and loses
no valid step. Real pipes, a real listener thread, real files, the real CLI in this process."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.core.store import calibration
from tests.inprocess_cli import cli
from tests.piped import PipedListener
from tests.tracegen import write_pair

PROPERTY = settings(
    deadline=None,
    max_examples=25,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

HOSTILE_NUMBERS = [
    float("nan"),
    float("inf"),
    -float("inf"),
    1e308,
    -4392,
    85083,
    10**309,
    -1,
    True,
    None,
    "1",
    [1],
    {"v": 1},
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(HOSTILE_NUMBERS),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ROW_VALUE = st.sampled_from(HOSTILE_NUMBERS) | st.integers() | st.floats()
MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "v": st.sampled_from([1, 2, [1], "1", None, 1.0, 1e400]),
        "pid": st.sampled_from([1, -1, 1e400, "x", 2**70]),
        "type": st.sampled_from(["steps", "meta", "hello", "bye", "other", 1]),
        "rows": st.lists(st.lists(ROW_VALUE, max_size=8), max_size=3) | JSON,
        "info": JSON,
        "dropped": JSON,
        "refused": JSON,
    },
)
BAD_LINE = (
    MESSAGE.map(lambda m: json.dumps(m, allow_nan=True).encode())
    | JSON.map(lambda v: json.dumps(v, allow_nan=True).encode())
    | st.binary(max_size=64).map(lambda b: b.replace(b"\n", b" "))
    | st.integers(1, 3000).map(lambda n: b'{"v":1,"info":' + b"[" * n + b"]" * n + b"}")
)


def _good(step: int, t_ns: int) -> bytes:
    row = [step, t_ns, 1_000_000, 8, 0, 0, None]
    return json.dumps({"v": 1, "pid": 9, "type": "steps", "rows": [row]}).encode()


@PROPERTY
@given(bad=st.lists(BAD_LINE, min_size=1, max_size=12))
def test_any_bytes_on_the_probe_pipe_lose_no_valid_step_and_never_stop_the_listener(bad):
    piped = PipedListener()
    t0 = piped.clock.t0_ns
    lines = []
    for i, line in enumerate(bad):
        lines += [_good(i, t0 + i), line]
    lines.append(_good(len(bad), t0 + len(bad)))
    got = piped.feed(b"\n".join(lines) + b"\n")
    assert [s.step for s in got if s.pid == 9] == list(range(len(bad) + 1))
    assert piped.listener.failure is None and not piped.listener.is_alive()


def assert_clean(code: int, err: str, what: str) -> None:
    """A result, or one ``gpumon: error:`` line with exit 1 or 2; never a traceback."""
    assert "Traceback" not in err, f"{what}: {err}"
    if code != 0:
        lines = err.splitlines()
        assert code in (1, 2) and len(lines) == 1 and lines[0].startswith("gpumon: error: "), (
            f"{what}: exit {code}, stderr {err!r}"
        )


@pytest.fixture(scope="module")
def valid_pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two jobs alone (x-A, x-B) and together (s-AB)."""
    root = tmp_path_factory.mktemp("valid")
    return write_pair(root)


def compare(root: Path) -> tuple[int, str, str]:
    x_a, x_b, shared = (str(root / name) for name in ("x-A", "x-B", "s-AB"))
    return cli("compare", "--exclusive", x_a, "--exclusive", x_b, "--shared", shared)


def _copy(valid: Path, tmp: Path) -> Path:
    root = tmp / "runs"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(valid, root)
    return root


@settings(PROPERTY, max_examples=12)
@given(
    run=st.sampled_from(["x-A", "s-AB"]),
    field=st.sampled_from(
        ["status", "duration_s", "host", "gpu", "workloads", "notices", "share", "capture_start_t"]
    ),
    value=JSON,
    whole=st.booleans(),
)
def test_any_run_json_is_a_run_or_listed_damaged_and_compare_says_one_line(
    valid_pair, tmp_path, run, field, value, whole
):
    root = _copy(valid_pair, tmp_path)
    path = root / run / "run.json"
    meta = json.loads(path.read_text())
    if whole:
        meta = value
    else:
        meta[field] = value
    path.write_text(json.dumps(meta, allow_nan=True))
    code, out, err = cli("runs", str(root), "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert "x-B" in {r["name"] for r in listed}, "the undamaged run is listed"
    assert_clean(*compare(root)[::2], "compare")


@PROPERTY
@given(
    cells=st.lists(
        st.sampled_from(["inf", "nan", "1e400", "9" * 309, "-4392e9", "x", "", "1e308"]),
        min_size=1,
        max_size=6,
    )
)
def test_hostile_numbers_in_steps_csv_change_no_rate(valid_pair, tmp_path, cells):
    root = _copy(valid_pair, tmp_path)
    code, out, _ = cli("runs", str(root), "--json")
    before = {r["name"]: r["iter_per_s"] for r in json.loads(out)}
    steps = root / "x-A" / "steps.csv"
    rows = [f"A,1000,{i},{cell},0.05,64,0,0," for i, cell in enumerate(cells)]
    rows += [f"A,1000,{cell},10.0,0.05,64,0,0," for cell in cells]
    with steps.open("a") as f:
        f.write("\n".join(rows) + "\n")
    (root / "x-A" / "steps.parquet").unlink(missing_ok=True)
    code, out, err = cli("runs", str(root), "--json")
    assert code == 0 and "Traceback" not in err, err
    after = {r["name"]: r["iter_per_s"] for r in json.loads(out)}
    assert after == before


@PROPERTY
@given(content=st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_any_calibration_file_is_a_calibration_or_refused_with_why(tmp_path, content):
    os.environ[calibration.ENV] = str(tmp_path)
    try:
        calibration.path_for("NVIDIA L4").write_bytes(content)
        try:
            found = calibration.load("NVIDIA L4")
        except calibration.CalibrationError as exc:
            assert "\n" not in str(exc)
        else:
            assert found is not None and found.gpu == "NVIDIA L4"
            for name, value in found.constants.items():
                low, high = calibration.BOUNDS[name]
                assert low < value <= high
    finally:
        del os.environ[calibration.ENV]
