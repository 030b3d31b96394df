"""A fresh set of hostile inputs (issue 40's done-when), as an attacker on a shared box would plant them, against every
command that reads outside input: FIFOs (nobody writing, or a writer that never writes), links to /dev/zero and to a
victim's file or folder, links another user owns, a 4 GB sparse run.json, names with ESC, OSC, newlines, bidi overrides
and invalid UTF-8, hostile Parquet copies, numbers out of range, processes named with escapes, a probe pipe carrying
junk and an impossible step.

Each case: a result, or one line with exit 1 or 2; no traceback, no hang, no raw control character in what gpumon
prints, the victim untouched and nothing written into the runs it reads. The read commands run in this process (the
real CLI, ``gpumon.cli.main``), the ``run`` cases as real processes. docs/architecture.md ("The trust boundary") lists
what the set covered and found; /tmp exploration: ~170 cases, this file the ones that keep each kind honest.
"""

from __future__ import annotations

import io
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from gpumon.cli import main
from gpumon.core.store import columnar
from tests.helpers import gpumon, only_run
from tests.tracegen import exclusive, staggered_pair

ESC = "\x1b]0;pwned\x07\x1b[2J\x1b[31mRED\u202eevil\r\n"
RAW = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\udc80-\udcff]"
)
VICTIM = "victim: must stay as it is\n"
NOBODY = 65534


@dataclass
class Attack:
    """What a case planted: the command line, its environment, descriptors and processes to hold meanwhile."""

    argv: list[str]
    env: dict[str, str | None] = field(default_factory=dict)
    held: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)
    check: Callable[[str, str], str] | None = (
        None  # (stdout, stderr) -> what is wrong ("" when nothing)
    )


# --- planting -------------------------------------------------------------------------------------------------------


def _meta(w: Path, run: str = "pair") -> dict:
    return json.loads((w / "runs" / run / "run.json").read_text())


def _edit(w: Path, change: Callable[[dict], object], run: str = "pair") -> None:
    data = _meta(w, run)
    change(data)
    (w / "runs" / run / "run.json").write_text(json.dumps(data))


def _gone(path: Path) -> Path:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    return path


def _fifo(path: Path, a: Attack | None = None) -> None:
    """A FIFO at ``path``; with ``a``, a writer (this test) holds it open and never writes."""
    os.mkfifo(_gone(path))
    if a is not None:
        a.held.append(os.open(path, os.O_RDWR))


def _link(path: Path, target: Path | str, foreign: bool = False) -> None:
    _gone(path).symlink_to(target)
    if foreign:
        os.lchown(path, NOBODY, NOBODY)


def _no_copy(w: Path, *runs: str) -> None:
    for run in runs or ("pair",):
        (w / "runs" / run / "steps.parquet").unlink(missing_ok=True)


def _rewrite_column(path: Path, column: str, value: str, every: int = 1) -> None:
    lines = path.read_text().splitlines()
    k = lines[0].split(",").index(column)
    out = [lines[0]]
    for i, line in enumerate(lines[1:]):
        cells = line.split(",")
        if i % every == 0:
            cells[k] = value
        out.append(",".join(cells))
    path.write_text("\n".join(out) + "\n")


def _hostile_copy(w: Path, values: dict) -> None:
    """The run's own steps.parquet, its key still matching steps.csv, holding ``values`` in every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = w / "runs/pair"
    table = pq.read_table(run / columnar.STEPS_COLUMNAR)
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if name in values:
            array = pa.array([values[name]] * len(table))
            column = array.dictionary_encode() if name == "process" else array.cast(column.type)
        columns[name] = column
    pq.write_table(
        pa.table(columns).replace_schema_metadata(table.schema.metadata),
        run / columnar.STEPS_COLUMNAR,
    )


def _gpu(w: Path, name: str = "NVIDIA X", runs: tuple[str, ...] = ("exA", "exB")) -> None:
    gpu = {"index": 0, "name": name, "uuid": "GPU-x", "driver": "1"}
    for run in runs:
        _edit(w, lambda d: d.update(gpu=gpu, device="cuda"), run)


def _recording(w: Path, pid: int) -> None:
    import psutil

    runner = {
        "pid": pid,
        "start_time": psutil.Process(pid).create_time(),
        "uid": os.geteuid(),
        "host": os.uname().nodename,
        "detached": True,
    }
    _edit(w, lambda d: d.update(status="recording", duration_s=None, runner=runner))


def _alive(proc: subprocess.Popen) -> Callable[[str, str], str]:
    return lambda out, err: (
        "" if proc.poll() is None else "signalled a process gpumon did not start"
    )


def _fake_python(w: Path, printed: str) -> str:
    (w / "out/payload").write_text(printed + "\n")
    fake = w / "out/python"
    fake.write_text(f"#!/bin/sh\ncat {w / 'out/payload'}\n")
    fake.chmod(0o755)
    return str(fake)


def _pairs(w: Path, rows: str) -> str:
    _gpu(w)
    (w / "out/pairs.csv").write_text("run_a,run_b,r_a,r_b\n" + rows)
    return str(w / "out/pairs.csv")


CMP = ["compare", "--exclusive", "exA", "--exclusive", "exB", "--shared", "pair"]
PRED = ["predict", "--exclusive", "exA", "--exclusive", "exB"]


def _spec(w: Path, text: str) -> str:
    (w / "out/spec.toml").write_text(text)
    return str(w / "out/spec.toml")


def _shipped_named(name: str) -> str:
    text = (Path(__file__).parents[2] / "experiments" / "q2_pairwise.toml").read_text()
    return re.sub(
        r"^name\s*=.*$", lambda _: f"name = {json.dumps(name)}", text, count=1, flags=re.M
    )


# --- the cases: (command, what is planted) -> the attack ------------------------------------------------------------


def _runs_cases() -> dict[str, Callable[[Path], Attack]]:
    def held(w: Path) -> Attack:
        a = Attack(["runs"])
        _fifo(w / "runs/pair/run.json", a)
        return a

    def sparse(w: Path) -> Attack:
        with open(w / "runs/pair/run.json", "r+b") as f:
            f.truncate(4 << 30)
        return Attack(["runs"])

    def recording_fifo(w: Path) -> Attack:
        _edit(
            w, lambda d: d.update(status="recording", runner={"pid": 1, "start_time": 0, "uid": 0})
        )
        _fifo(w / "runs/pair/steps.csv")
        return Attack(["runs"])

    def names(w: Path) -> Attack:
        os.rename(w / "runs/pair", w / "runs" / ("pair" + ESC))
        os.rename(bytes(w / "runs/exB"), bytes(w / "runs") + b"/exB\xff\xfe\x9b2J")
        return Attack(["runs", "--all"])

    def foreign_cache(w: Path) -> Attack:
        _edit(w, lambda d: d.pop("summary", None))
        _link(w / "cache", w / "victimdir", foreign=True)
        return Attack(["runs"])

    return {
        "run.json a FIFO nobody writes": lambda w: (
            _fifo(w / "runs/pair/run.json"),
            Attack(["runs"]),
        )[1],
        "run.json a FIFO a silent writer holds": held,
        "run.json a link to a victim's file": lambda w: (
            _link(w / "runs/pair/run.json", w / "victim"),
            Attack(["runs"]),
        )[1],
        "run.json a 4 GB sparse file": sparse,
        "a recording run whose steps.csv is a FIFO": recording_fifo,
        "run directories named with ESC and invalid UTF-8": names,
        "a label with OSC, CSI, bidi and a newline (--json)": lambda w: (
            _edit(w, lambda d: d.update(label=ESC)),
            Attack(["runs", "--json"]),
        )[1],
        "GPUMON_RUNS with an ESC in its path": lambda w: Attack(
            ["runs"], env={"GPUMON_RUNS": str(w / ("none" + ESC))}
        ),
        "XDG_CACHE_HOME a link another user made": foreign_cache,
    }


def _compare_cases() -> dict[str, Callable[[Path], Attack]]:
    def held_steps(w: Path) -> Attack:
        a = Attack(CMP)
        _no_copy(w)
        _fifo(w / "runs/pair/steps.csv", a)
        return a

    def zero(w: Path) -> Attack:
        _no_copy(w)
        _link(w / "runs/pair/steps.csv", "/dev/zero")
        _fifo(w / "runs/pair/device.csv")
        _link(w / "runs/pair/processes.csv", "/dev/zero")
        return Attack(CMP)

    def long_line(w: Path) -> Attack:
        _no_copy(w)
        with open(w / "runs/pair/steps.csv", "a") as f:
            f.write("9" * (8 << 20))
        return Attack(CMP)

    def nul(w: Path) -> Attack:
        _no_copy(w)
        path = w / "runs/pair/steps.csv"
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] + b"\0" * 64 + data[len(data) // 2 :])
        return Attack(CMP)

    def jobs(w: Path) -> Attack:
        _no_copy(w)
        _rewrite_column(w / "runs/pair/steps.csv", "process", "C\x1b[2J", every=7)
        return Attack(CMP, check=lambda out, err: "" if "Pair" in out else f"no comparison: {err}")

    def numbers(w: Path) -> Attack:
        """Every fifth row's values (its job kept) out of range or not numbers at all."""
        _no_copy(w)
        path = w / "runs/pair/steps.csv"
        lines = path.read_text().splitlines()
        bad = ["1e308", "-1e308", "nan", "inf", "-inf", "9" * 400, "0x10", "1_0"]
        for i in range(1, len(lines), 5):
            cells = lines[i].split(",")
            lines[i] = ",".join(
                [cells[0]] + [bad[(i + j) % len(bad)] for j in range(1, len(cells))]
            )
        path.write_text("\n".join(lines) + "\n")
        return Attack(CMP)

    def others(w: Path) -> Attack:
        path = w / "runs/pair/gpu_others.csv"
        head = path.read_text().splitlines()[0].split(",")
        row = {"pid": "31337", "used_mib": "30000", "user": "x" + ESC[:-2], "command": ESC[:-2]}
        lines = [",".join(head)] + [
            ",".join(str(float(t)) if c == "t" else row.get(c, "0") for c in head)
            for t in range(60)
        ]
        path.write_text("\n".join(lines) + "\n")
        return Attack(CMP)

    def words(w: Path) -> Attack:
        def change(d: dict) -> None:
            d.update(label=ESC, gpu={"index": 0, "name": "G" + ESC, "uuid": "GPU-x", "driver": "1"})
            for job in d["workloads"]:
                job["spec"] += ESC
            d["workloads"][1].update(state="exited", exit_status=1, tail=ESC * 3)

        _edit(w, change)
        return Attack(["compare", "--shared", "pair"])

    def summary_fifo(w: Path) -> Attack:
        (w / "out/report").mkdir()
        _fifo(w / "out/report/summary.json")
        return Attack(CMP + ["--report", str(w / "out/report"), "--force"])

    def foreign_steps_cache(w: Path) -> Attack:
        _no_copy(w, "exA", "exB", "pair")
        (w / "cache/gpumon").mkdir()
        _link(w / "cache/gpumon/steps", w / "victimdir", foreign=True)
        return Attack(CMP)

    return {
        "steps.csv a FIFO a silent writer holds": held_steps,
        "steps.csv and processes.csv links to /dev/zero, device.csv a FIFO": zero,
        "steps.csv ending in an 8 MB line": long_line,
        "steps.csv with NUL bytes": nul,
        "steps rows naming a job C with ESC": jobs,
        "steps rows of 1e308, nan, 400 digits, 0x10": numbers,
        "steps.parquet (its key right) with NaN times and 2**62 steps": lambda w: (
            _hostile_copy(w, {"t": float("nan"), "step": 2**62}),
            Attack(CMP),
        )[1],
        "steps.parquet (its key right) naming job C": lambda w: (
            _hostile_copy(w, {"process": "C\x1b[2J"}),
            Attack(CMP),
        )[1],
        "steps.parquet a FIFO a silent writer holds": lambda w: (
            a := Attack(CMP),
            _fifo(w / "runs/pair/steps.parquet", a),
        )[0],
        "gpu_others.csv naming users and commands with escapes": others,
        "label, specs, GPU name and a tail with escapes": words,
        "--report into the shared run's own folder": lambda w: Attack(
            CMP + ["--report", str(w / "runs/pair"), "--force"]
        ),
        "--report DIR a link another user made": lambda w: (
            _link(w / "out/report", w / "victimdir", foreign=True),
            Attack(CMP + ["--report", str(w / "out/report")]),
        )[1],
        "--report DIR/summary.json a FIFO": summary_fifo,
        "the steps cache folder a link another user made": foreign_steps_cache,
    }


def _predict_cases() -> dict[str, Callable[[Path], Attack]]:
    def calibration_fifo(w: Path) -> Attack:
        _gpu(w)
        (w / "cal").mkdir()
        a = Attack(PRED, env={"GPUMON_CALIBRATION": str(w / "cal")})
        _fifo(w / "cal/NVIDIA_X.json", a)
        return a

    def calibration_words(w: Path) -> Attack:
        _gpu(w)
        (w / "cal").mkdir()
        bad = {"schema": 1, "gpu": "NVIDIA X", "constants": {"slice_s": ESC}, "device": ESC}
        (w / "cal/NVIDIA_X.json").write_text(json.dumps(bad))
        return Attack(PRED, env={"GPUMON_CALIBRATION": str(w / "cal")})

    def absurd(w: Path) -> Attack:
        for run in ("exA", "exB"):
            _rewrite_column(w / "runs" / run / "processes.csv", "cpu_pct", "1e308")
        return Attack(PRED + ["--share", "all"])

    return {
        "the runs' GPU named with escapes": lambda w: (_gpu(w, "H" + ESC), Attack(PRED))[1],
        "the GPU's calibration a FIFO a silent writer holds": calibration_fifo,
        "a calibration holding escapes": calibration_words,
        "cpu 1e308 in the solo runs": absurd,
    }


def _export_cases() -> dict[str, Callable[[Path], Attack]]:
    def named(w: Path) -> Attack:
        os.rename(w / "runs/pair", w / "runs" / ("p" + ESC.replace("\n", "")))
        return Attack(["export", "last", "--csv"])

    return {
        "--csv into the run's own folder, --force": lambda w: Attack(
            ["export", "pair", "--csv", str(w / "runs/pair"), "--force"]
        ),
        "--parquet into a folder inside the run": lambda w: Attack(
            ["export", "pair", "--parquet", str(w / "runs/pair/sub"), "--force"]
        ),
        "OUTDIR a link another user made": lambda w: (
            _link(w / "out/x", w / "victimdir", foreign=True),
            Attack(["export", "pair", "--csv", str(w / "out/x")]),
        )[1],
        "OUTDIR/steps.csv a link to a victim's file": lambda w: (
            (w / "out/x").mkdir(),
            _link(w / "out/x/steps.csv", w / "victim"),
            Attack(["export", "pair", "--csv", str(w / "out/x"), "--force"]),
        )[2],
        "the default OUTDIR of a run named with escapes": named,
    }


def _stop_attach_cases() -> dict[str, Callable[[Path], Attack]]:
    def foreign_runner(w: Path) -> Attack:
        sleeper = subprocess.Popen(["sleep", "300"])
        _recording(w, sleeper.pid)
        return Attack(["stop", "pair", "--timeout", "3"], procs=[sleeper], check=_alive(sleeper))

    def lock_link(w: Path) -> Attack:
        holder = _flock_holder(w / "victim")
        _recording(w, holder.pid)
        _link(w / "runs/pair/runner.lock", w / "victim")
        return Attack(["stop", "pair", "--timeout", "3"], procs=[holder], check=_alive(holder))

    def baseline_fifo(w: Path) -> Attack:
        a = Attack(["attach", "pair", "--baseline", "A=exA"])
        _no_copy(w, "exA")
        _fifo(w / "runs/exA/steps.csv", a)
        return a

    return {
        "a runner PID that is a process gpumon did not start": foreign_runner,
        "runner.lock a link to a file another process locks": lock_link,
        "--timeout nan": lambda w: Attack(["stop", "pair", "--timeout", "nan"]),
        "run.json a FIFO": lambda w: (_fifo(w / "runs/pair/run.json"), Attack(["stop", "pair"]))[1],
        "attach --baseline a run whose steps.csv a silent writer holds": baseline_fifo,
    }


def _calibrate_cases() -> dict[str, Callable[[Path], Attack]]:
    def held(w: Path) -> Attack:
        a = Attack(["calibrate", "--from-pairs", str(w / "out/pairs.csv")])
        _fifo(w / "out/pairs.csv", a)
        return a

    rows = "".join(
        f"../runs/exA,../runs/exB,{a},{b}\n"
        for a, b in [("nan", "1"), ("inf", "1"), ("1e400", "2"), ("-1", "1"), ("1e308", "1e-308")]
    )
    return {
        "--from-pairs a FIFO a silent writer holds": held,
        "--from-pairs r of nan, inf, 1e400, -1": lambda w: Attack(
            ["calibrate", "--from-pairs", _pairs(w, rows)]
        ),
        "--from-pairs 20,000 rows of one pair": lambda w: Attack(
            ["calibrate", "--from-pairs", _pairs(w, "../runs/exA,../runs/exB,1.43,1.32\n" * 20000)]
        ),
        "--from-pairs a 1 MB field": lambda w: Attack(
            ["calibrate", "--from-pairs", _pairs(w, "a" * (1 << 20) + ",b,1,1\n")]
        ),
        "--from-pairs runs of a GPU named with escapes": lambda w: (
            _pairs(w, "../runs/exA,../runs/exB,1.43,1.32\n"),
            _gpu(w, "../" + ESC),
            Attack(["calibrate", "--from-pairs", str(w / "out/pairs.csv")]),
        )[2],
        "--from-pairs, GPUMON_CALIBRATION a link another user made": lambda w: (
            _link(w / "out/cal", w / "victimdir", foreign=True),
            Attack(
                ["calibrate", "--from-pairs", _pairs(w, "../runs/exA,../runs/exB,1.43,1.32\n")],
                env={"GPUMON_CALIBRATION": str(w / "out/cal")},
            ),
        )[1],
    }


def _experiment_cases() -> dict[str, Callable[[Path], Attack]]:
    def held(w: Path) -> Attack:
        a = Attack(["experiment", str(w / "out/spec.toml"), "--dry-run"])
        _fifo(w / "out/spec.toml", a)
        return a

    def lock_note(w: Path) -> Attack:
        (w / "out/exp").mkdir()
        lock = w / "out/exp/.gpumon-experiment.lock"
        lock.write_text(json.dumps({"pid": 1, "user": ESC, "host": ESC, "command": ESC}))
        holder = _flock_holder(lock)
        return Attack(
            ["experiment", "q2_pairwise", "--out", str(w / "out/exp"), "--device", "cpu"],
            procs=[holder],
        )

    return {
        "a spec a FIFO a silent writer holds": held,
        "a spec a link to /dev/zero": lambda w: (
            _link(w / "out/spec.toml", "/dev/zero"),
            Attack(["experiment", str(w / "out/spec.toml"), "--dry-run"]),
        )[1],
        "a spec nested 50,000 deep": lambda w: Attack(
            ["experiment", _spec(w, "x = " + "[" * 50000 + "]" * 50000 + "\n"), "--dry-run"]
        ),
        "a spec named with escapes": lambda w: Attack(
            ["experiment", _spec(w, _shipped_named(ESC)), "--dry-run"]
        ),
        "--out a link another user made": lambda w: (
            _link(w / "out/exp", w / "victimdir", foreign=True),
            Attack(["experiment", "q2_pairwise", "--out", str(w / "out/exp"), "--device", "cpu"]),
        )[1],
        "--out locked by a holder whose note holds escapes": lock_note,
    }


def _doctor_snapshot_cases() -> dict[str, Callable[[Path], Attack]]:
    def named_process(w: Path) -> Attack:
        busy = subprocess.Popen(
            ["bash", "-c", f"exec -a $'\\e]0;pwned\\a\\e[2J\\u202eevil' {sys.executable} -c "
             "'import sys; print(1, flush=True); sys.stdin.read()'"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert busy.stdout is not None and busy.stdout.readline() == b"1\n"
        return Attack(["snapshot", "--no-nvml", "--top", "100000"], procs=[busy])

    return {
        "doctor: the torch check prints JSON 100,000 deep": lambda w: Attack(
            ["doctor", "--python", _fake_python(w, "[" * 100000)]
        ),
        "doctor: the torch check prints escapes": lambda w: Attack(
            ["doctor", "--python", _fake_python(w, json.dumps({"torch": ESC, "error": ESC}))]
        ),
        "snapshot: a process named with escapes": named_process,
        "snapshot: a recording run labelled with escapes": lambda w: (
            _edit(w, lambda d: d.update(label=ESC, status="recording", runner={"pid": 1})),
            Attack(["snapshot", "--no-nvml", "--runs-dir", str(w / "runs")]),
        )[1],
    }


CASES = {
    f"{group} | {name}": make
    for group, cases in (
        ("runs", _runs_cases()),
        ("compare", _compare_cases()),
        ("predict", _predict_cases()),
        ("export", _export_cases()),
        ("stop/attach", _stop_attach_cases()),
        ("calibrate", _calibrate_cases()),
        ("experiment", _experiment_cases()),
        ("doctor/snapshot/wrap", _doctor_snapshot_cases()),
    )
    for name, make in cases.items()
}


# --- running one --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("base")
    exclusive(root / "exA", "A", 40.0, "fcn:preset=tiny")
    exclusive(root / "exB", "A", 25.0, "gemm:preset=tiny")
    staggered_pair(root / "pair")
    return root


def _tree(root: Path) -> dict[str, tuple]:
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def _cli(argv: list[str], timeout: float = 90.0) -> tuple[int, str, str]:
    """The real CLI in this process, on a thread so a hang fails the case instead of the suite."""
    box: queue.SimpleQueue = queue.SimpleQueue()

    def run() -> None:
        out, err = io.StringIO(), io.StringIO()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 2
            box.put((code, out.getvalue(), err.getvalue(), None))
        except BaseException as exc:  # noqa: BLE001 - a traceback: the case's defect
            box.put((None, out.getvalue(), err.getvalue(), exc))

    threading.Thread(target=run, daemon=True).start()
    try:
        code, out, err, exc = box.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"gpumon {argv[0]} hung for {timeout:.0f} s") from None
    if exc is not None:
        raise AssertionError(f"gpumon {argv[0]} raised {type(exc).__name__}: {exc}") from exc
    return code, out, err


@pytest.mark.skipif(os.geteuid() != 0, reason="links another user owns take root to make")
@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_input_gets_a_result_or_one_line_and_harms_nothing(
    case, base, tmp_path, monkeypatch
):
    w = tmp_path
    shutil.copytree(base, w / "runs", symlinks=True)
    (w / "victim").write_text(VICTIM)
    (w / "victimdir").mkdir()
    (w / "victimdir/keep.txt").write_text(VICTIM)
    for folder in ("cache", "data", "home", "cwd", "out"):
        (w / folder).mkdir()
    env = {
        "GPUMON_RUNS": str(w / "runs"),
        "XDG_CACHE_HOME": str(w / "cache"),
        "XDG_DATA_HOME": str(w / "data"),
        "XDG_RUNTIME_DIR": str(w / "rt"),
        "HOME": str(w / "home"),
        "GPUMON_CALIBRATION": None,
        "GPUMON_CACHE_DIR": None,
        "GPUMON_PYTHON": None,
        "NO_COLOR": "1",
    }
    attack = CASES[case](w)
    for key, value in {**env, **attack.env}.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    monkeypatch.chdir(w / "cwd")
    runs_before = _tree(w / "runs")
    try:
        code, out, err = _cli(attack.argv)
        wrong = attack.check(out, err) if attack.check else ""
    finally:
        for fd in attack.held:
            os.close(fd)
        for proc in attack.procs:
            proc.kill()
            proc.wait()
    assert code in (0, 1, 2), f"exit {code}: {err}"
    if (
        code and err.strip()
    ):  # one line (argparse's usage before it); doctor's report says why on stdout
        lines = [x for x in err.splitlines() if not x.startswith(("usage:", " "))]
        assert len(lines) == 1 and re.match(r"gpumon( \w+)?: error: ", lines[0]), err
    elif code:
        assert out.strip(), f"exit {code} and nothing said"
    for where, text in (("stdout", out), ("stderr", err)):
        raw = RAW.search(text)
        assert raw is None, (
            f"a raw control character in {where}: {text[max(0, raw.start() - 40) :][:80]!r}"
        )
    assert (w / "victim").read_text() == VICTIM
    assert sorted(os.listdir(w / "victimdir")) == ["keep.txt"], "written into the victim's folder"
    assert _tree(w / "runs") == runs_before, "written into a run it reads"
    assert not wrong, wrong


# --- the run command: real processes ------------------------------------------------------------------------------

RUN = ["run", "--headless", "--device", "cpu", "--no-nvml", "--warmup", "0"]
# A job that writes the probe protocol itself: junk of every kind, one row from before the run began (t_ns 1, which
# once read as a step 12,000 s before the others and made the rate "1 step / 64 s"), then 200 valid steps 2 ms apart.
PROBE_JUNK = textwrap.dedent(
    """
    import json, os, time
    fd, pid = int(os.environ["GPUMON_PROBE_FD"]), os.getpid()
    send = lambda b: os.write(fd, b + b"\\n")
    t = time.monotonic_ns()
    send(json.dumps({"v": 1, "pid": pid, "type": "hello", "process": "A", "t_ns": t}).encode())
    send(b"x" * (3 << 20))
    send(b"\\xff\\xfe\\x00 not json")
    send(b'{"v":1,"pid":%d,"type":"steps","rows":[[0,1,1,null,0,0,null]]}' % pid)
    send(json.dumps({"v": 1, "pid": pid, "type": "meta", "info": {"\\x1b[2J": "\\x1b]0;x\\x07"}}).encode())
    send(b'{"v":1,"pid":%d,"type":"steps","rows":' % pid + b"[" * 100000)
    for i in range(200):
        time.sleep(0.002)
        t = time.monotonic_ns()
        send(json.dumps({"v": 1, "pid": pid, "type": "steps", "rows": [[i, t, 2_000_000, 8, 0, 0, None]]}).encode())
    """
)


def test_probe_junk_and_an_impossible_step_cost_no_step_and_no_rate(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(PROBE_JUNK)
    runs = tmp_path / "runs"
    done = gpumon(*RUN, "--cmd", f"{sys.executable} {job}", "--duration", "60", "--out", str(runs))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert not RAW.search(done.stdout + done.stderr)
    run = only_run(runs)
    steps = (run / "steps.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[2]) for row in steps] == list(range(200)), "exactly the valid steps"
    listed = json.loads(gpumon("runs", str(runs), "--json").stdout)
    rate = listed[0]["iter_per_s"]["A"]
    assert rate > 50, f"the rate is the valid steps' (hundreds a second), not {rate}"


def test_wrap_refuses_a_runtime_folder_reached_through_another_users_link(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a link another user owns takes root to make")
    mine = tmp_path / "mine"
    mine.mkdir()
    _link(tmp_path / "rt", mine, foreign=True)
    done = gpumon(
        "wrap",
        "--",
        "true",
        env={"GPUMON_RUNTIME_DIR": "", "XDG_RUNTIME_DIR": str(tmp_path / "rt")},
    )
    assert "Traceback" not in done.stderr and not RAW.search(done.stdout + done.stderr)
    assert list(mine.iterdir()) == [], "nothing created through the link"


def test_a_jobs_escape_sequences_and_a_foreign_link_out(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(f"import sys\nprint({ESC!r} * 3, flush=True)\nsys.exit(3)\n")
    done = gpumon(
        *RUN, "--cmd", f"{sys.executable} {job}", "--label", ESC, "--out", str(tmp_path / "runs")
    )
    assert done.returncode == 1 and not RAW.search(done.stdout + done.stderr), done.stderr
    if os.geteuid() == 0:
        mine = tmp_path / "mine"
        mine.mkdir()
        _link(tmp_path / "theirs", mine, foreign=True)
        done = gpumon(*RUN, "--cmd", "true", "--out", str(tmp_path / "theirs"))
        assert done.returncode == 2 and "symbolic link of another user" in done.stderr, done.stderr
        assert list(mine.iterdir()) == []


def _flock_holder(path: Path) -> subprocess.Popen:
    """A process of the test's own holding an exclusive flock on ``path`` (opened for reading) until killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, time\n"
         f"f = open({str(path)!r}); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('held', flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder
