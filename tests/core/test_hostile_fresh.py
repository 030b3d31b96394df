"""The defect kinds a fresh round of hostile inputs found (issue 40's done-when), each at its boundary.

Each test failed before its fix: a run file that is not a plain file (a FIFO, /dev/zero) hung or crashed a reader;
a stray steps row naming another job made a pair three jobs; an export or report into the run it reads replaced
its tables; a probe row with an impossible time stretched a job's rate over hours; a folder reached through another
user's symbolic link was written into; a helper child's JSON line (doctor, calibrate) raised RecursionError,
TypeError or KeyError; an error quoting an outside path, a process's command line and a job's output printed raw
control characters.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.core.records import childmsg
from gpumon.core.records.decode import Refused, read_json
from gpumon.core.records.plainfile import NOT_PLAIN, read_plain
from gpumon.core.store import trace
from gpumon.core.store.trace import TraceError, load_run
from gpumon.safewrite import UnsafeDestination, ensure_folder, write_text
from tests.inprocess_cli import cli
from tests.piped import PipedListener
from tests.tracegen import write_pair

PROPERTY = settings(
    deadline=None,
    max_examples=20,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
HOSTILE_TEXT = st.text(
    alphabet=st.sampled_from(
        ["a", "/", "\x1b", "\x07", "\r", "\n", "\x9b", "\u202e", "\ud800", "é", "]", ";"]
    ),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two jobs alone (x-A, x-B) and together (s-AB), each a real run directory."""
    root = tmp_path_factory.mktemp("pair")
    return write_pair(root)


def _copy(pair: Path, tmp: Path) -> Path:
    root = tmp / "runs"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(pair, root)
    return root


# --- a file of the right name that is not a plain file -----------------------------------------------------------

NOT_PLAIN_KINDS = ["fifo", "held fifo", "dev zero", "folder"]


def _plant(path: Path, kind: str, hold: list[int]) -> None:
    """``path`` replaced by a FIFO (nobody writes; or a writer holds it open and never writes), a link to /dev/zero
    or a folder."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    if kind == "dev zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(path)
        if kind == "held fifo":
            hold.append(os.open(path, os.O_RDWR))


def _in_thread(work, timeout: float = 60.0):
    """``work()``'s value or exception, raised here; AssertionError if it does not return within ``timeout`` (a hang)."""
    box: queue.SimpleQueue = queue.SimpleQueue()

    def run() -> None:
        try:
            box.put((True, work()))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box.put((False, exc))

    threading.Thread(target=run, daemon=True).start()
    try:
        ok, value = box.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"hung for {timeout:.0f} s") from None
    if not ok:
        raise value
    return value


@pytest.mark.parametrize("kind", NOT_PLAIN_KINDS)
def test_read_plain_refuses_what_is_not_a_plain_file_before_reading_a_byte(tmp_path, kind):
    path, hold = tmp_path / "x", []
    path.write_text("x")
    _plant(path, kind, hold)
    try:
        with pytest.raises(OSError) as err:
            _in_thread(lambda: read_plain(path))
        assert err.value.strerror in (NOT_PLAIN, os.strerror(21))
        with pytest.raises(OSError):
            _in_thread(lambda: read_json(path, max_bytes=100))
    finally:
        for fd in hold:
            os.close(fd)


@pytest.mark.parametrize("kind", NOT_PLAIN_KINDS)
@pytest.mark.parametrize(
    "name", ["run.json", "steps.csv", "device.csv", "processes.csv", "steps.parquet"]
)
def test_no_run_file_that_is_not_plain_hangs_or_crashes_a_reader(pair, tmp_path, name, kind):
    """runs, compare and export: a result (the copy ignored, the table refused) or one line; never a hang."""
    root, hold = _copy(pair, tmp_path), []
    if name != "steps.parquet":
        (root / "s-AB" / "steps.parquet").unlink(missing_ok=True)
    _plant(root / "s-AB" / name, kind, hold)
    try:
        for argv in (
            ["runs", str(root), "--all"],
            ["compare", "--exclusive", str(root / "x-A"), "--exclusive", str(root / "x-B")]
            + ["--shared", str(root / "s-AB")],
            ["export", str(root / "s-AB"), "--csv", str(tmp_path / "out")],
        ):
            code, out, err = _in_thread(lambda argv=argv: cli(*argv))
            assert "Traceback" not in err and code in (0, 1, 2), (argv, code, err)
            if code:
                assert len(err.splitlines()) == 1 and err.startswith("gpumon: error: "), err
    finally:
        for fd in hold:
            os.close(fd)


# --- a steps row that names no job -------------------------------------------------------------------------------


@PROPERTY
@given(
    names=st.lists(
        st.text(min_size=1, max_size=6).filter(lambda s: s not in ("A", "B")),
        min_size=1,
        max_size=4,
    )
)
def test_a_stray_row_naming_another_job_is_no_step_and_changes_no_rate(pair, tmp_path, names):
    root = _copy(pair, tmp_path)
    run_dir = root / "s-AB"
    before = trace.exclusive_rates(load_run(run_dir))
    (run_dir / "steps.parquet").unlink()
    lines = (run_dir / "steps.csv").read_text().splitlines(keepends=True)
    stray = [
        f'"{n.replace(chr(34), "")}",7,{i},{1.0 + i},0.1,8,0,0,\n' for i, n in enumerate(names)
    ]
    at = len(lines) // 2
    (run_dir / "steps.csv").write_text("".join(lines[:at] + stray + lines[at:]))
    run = load_run(run_dir)
    assert set(run.jobs()) <= {"A", "B"}
    assert trace.exclusive_rates(run) == pytest.approx(before)
    code, out, err = cli(
        "compare",
        "--exclusive",
        str(root / "x-A"),
        "--exclusive",
        str(root / "x-B"),
        "--shared",
        str(run_dir),
    )
    assert code == 0, err


# --- a reader never writes into the run it reads -----------------------------------------------------------------


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("fmt", ["--csv", "--parquet"])
@pytest.mark.parametrize("inside", ["", "sub"])
def test_export_into_the_run_it_reads_is_refused_and_the_run_kept(pair, tmp_path, fmt, inside):
    root = _copy(pair, tmp_path)
    run_dir = root / "s-AB"
    before = _tree(run_dir)
    code, _, err = cli("export", str(run_dir), fmt, str(run_dir / inside), "--force")
    assert code == 2 and "gpumon does not write into a run it reads" in err, err
    assert _tree(run_dir) == before


def test_compare_report_into_a_run_it_reads_is_refused_and_the_run_kept(pair, tmp_path):
    root = _copy(pair, tmp_path)
    before = _tree(root)
    code, _, err = cli(
        "compare", "--exclusive", str(root / "x-A"), "--exclusive", str(root / "x-B"),
        "--shared", str(root / "s-AB"), "--report", str(root / "x-B"), "--force",
    )  # fmt: skip
    assert code == 2 and "gpumon does not write into a run it reads" in err, err
    assert _tree(root) == before


# --- a probe row whose time is impossible for the child that sent it ---------------------------------------------


@PROPERTY
@given(offsets=st.lists(st.sampled_from(["before", "after", "inside"]), min_size=1, max_size=8))
def test_a_launched_childs_step_rows_outside_its_life_are_refused_the_rest_kept(offsets):
    launched = time.monotonic_ns()
    piped = PipedListener(since_ns=launched)
    when = {"before": launched - 10**12, "after": launched + 10**15, "inside": launched + 1}
    rows = [[i, when[o], 1000, 8, 0, 0, None] for i, o in enumerate(offsets)]
    message = json.dumps({"v": 1, "pid": 9, "type": "steps", "rows": rows}).encode() + b"\n"
    got = [s.step for s in piped.feed(message)]
    assert got == [i for i, o in enumerate(offsets) if o == "inside"]
    assert piped.listener.refused.get("A", 0) == len(offsets) - len(got)


# --- a folder reached through another user's symbolic link --------------------------------------------------------

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="making a link another user owns takes root"
)


@needs_root
@pytest.mark.parametrize("depth", ["the folder", "a parent"])
def test_no_write_goes_through_a_symbolic_link_another_user_owns(tmp_path, depth):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep").write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(mine)
    os.lchown(link, 65534, 65534)
    folder = link if depth == "the folder" else link / "sub" / "deeper"
    with pytest.raises(UnsafeDestination, match="symbolic link of another user"):
        ensure_folder(folder)
    with pytest.raises(UnsafeDestination, match="symbolic link of another user"):
        write_text(folder / "report.md", "x", replace=True)
    assert sorted(p.name for p in mine.iterdir()) == ["keep"]
    os.lchown(link, os.geteuid(), os.getegid())  # the user's own link is followed, as before
    ensure_folder(folder)
    write_text(folder / "report.md", "x", replace=True)
    assert (folder / "report.md").read_text() == "x"


# --- what gpumon's helper children print -------------------------------------------------------------------------

CHILD_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=10,
)
CHILD_LINE = (
    CHILD_JSON.map(lambda v: json.dumps(v, allow_nan=True))
    | st.fixed_dictionaries(
        {},
        optional={
            k: CHILD_JSON
            for k in (
                "torch",
                "cuda_available",
                "device_count",
                "device_name",
                "error",
                "ready",
                "kernel_s",
                "ends",
            )
        },
    ).map(json.dumps)
    | st.integers(1, 200_000).map(lambda n: "[" * n)
    | st.text(max_size=20)
)


@PROPERTY
@given(line=CHILD_LINE)
def test_a_helper_childs_line_is_typed_fields_or_refused(line):
    for decode in (childmsg.torch_report, childmsg.probe_answer):
        try:
            data = decode(line)
        except Refused:
            continue
        assert isinstance(data, dict)
    try:
        report = childmsg.torch_report(line)
    except Refused:
        return
    assert "error" in report or (
        isinstance(report["torch"], str)
        and isinstance(report["cuda_available"], bool)
        and isinstance(report["device_count"], int)
    )


@pytest.mark.parametrize(
    "printed",
    [
        "[" * 100_000,
        "[1, 2, 3]",
        '{"torch": 1e400, "cuda_available": NaN}',
        '{"torch": "2.0", "cuda_available": true}',
        json.dumps(
            {
                "torch": "\x1b]0;pwned\x07",
                "cuda_available": True,
                "device_count": 1,
                "device_name": "\x1b[2J",
            }
        ),
        json.dumps({"error": "\x1b]0;pwned\x07\u202e"}),
    ],
    ids=["deep", "a list", "1e400 and NaN", "no device count", "escapes", "an error with escapes"],
)
def test_doctor_reads_any_torch_check_line_and_prints_it_escaped(tmp_path, printed):
    from gpumon.checks.doctor import check_torch, render_text
    from gpumon.core.jobs.interpreter import WorkloadPython

    payload = tmp_path / "payload"
    payload.write_text(printed + "\n")
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat {payload}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    check = check_torch(WorkloadPython(str(fake), "--python"))
    text = render_text([check], True, False)
    assert not RAW.search(text), text


# --- text from outside, printed ----------------------------------------------------------------------------------


@PROPERTY
@given(name=HOSTILE_TEXT)
def test_an_error_quoting_outside_text_is_one_escaped_line(tmp_path, name):
    code, _, err = cli("runs", f"{tmp_path}/none{name}")
    assert code == 2 and err.count("\n") == 1 and not RAW.search(err.rstrip("\n")), repr(err)


@PROPERTY
@given(line=st.text(max_size=40) | HOSTILE_TEXT)
def test_a_jobs_output_line_on_screen_holds_no_control_character(line):
    from gpumon.tui.widgets.output import clean

    assert not RAW.search(clean(line + "\x1b]0;title\x07" + line))


def test_a_process_named_with_escapes_is_listed_escaped():
    from gpumon.tui.view import ProcessRow
    from gpumon.tui.widgets.processes import cells

    row = ProcessRow(
        "", 7, "\x1b[2Jroot", 1.0, 1.0, 1.0, 1.0, 1.0, "\x1b]0;pwned\x07\u202eevil", 1.0
    )
    assert not any(RAW.search(cell) for cell in cells(row))


def test_a_run_file_that_is_not_plain_is_said_in_one_line(pair, tmp_path):
    root, hold = _copy(pair, tmp_path), []
    _plant(root / "s-AB" / "run.json", "held fifo", hold)
    try:
        with pytest.raises(TraceError, match="not a plain file"):
            _in_thread(lambda: load_run(root / "s-AB"))
    finally:
        os.close(hold[0])


# --- the probe API, given objects that raise ----------------------------------------------------------------------

HOSTILE_SCRIPT = """
import os
read_end, write_end = os.pipe()
os.environ["GPUMON_PROBE_FD"] = str(write_end)
from gpumon import probe

class Bad:
    def __repr__(self):
        raise RuntimeError("no")
    __str__ = __repr__
    def __float__(self):
        raise RuntimeError("no")

for v in (float("nan"), -1, 10**400, "x", None, True, Bad(), [1]):
    probe.step(samples=v)
    probe.step(iter_s=v)
    probe.add_copy(v, v)
    with probe.copy(v):
        pass
    with probe.copy(8, device=v):
        pass
probe.meta(bad=Bad(), n=10**400)
probe.flush()
print("script finished")
"""


def test_the_probe_api_never_raises_what_the_scripts_own_objects_raise(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", HOSTILE_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.returncode == 0 and done.stdout.strip() == "script finished", done.stderr
