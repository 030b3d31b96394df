"""The bad inputs and faults a careful tester tried (issue 33): each ends in one clear line and the right exit
status, never a traceback, a wrong status or silent nonsense. Real processes, real files, the real CLI."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers import gpumon, headless_cpu, in_private_mount, one_line_error, tiny_pairs_spec

STEPPER = "import time\nfrom gpumon import probe\nwhile True:\n    time.sleep(0.01)\n    probe.step(samples=8)\n"
DATA = Path(__file__).parents[1] / "data" / "cpu_same_core"


@pytest.mark.parametrize("shadow", ["an empty folder", "a package"])
def test_1_a_gpumon_folder_in_the_working_directory_does_not_shadow_the_detached_runner(
    tmp_path, shadow
):
    program = Path(sys.executable).parent / "gpumon"  # the installed command, as a user runs it
    if not program.exists():
        pytest.skip("needs the gpumon console script next to the interpreter (pip install)")
    work = tmp_path / "x"
    (work / "gpumon").mkdir(parents=True)
    if shadow == "a package":
        (work / "gpumon" / "__init__.py").write_text(
            "raise SystemExit('imported the working directory s gpumon')\n"
        )
    env = {**os.environ, "GPUMON_RUNS": str(tmp_path / "runs"), "NO_COLOR": "1"}
    # a job that imports nothing: whatever the user's own command does in its working directory is the user's
    done = subprocess.run(
        [
            str(program),
            "run",
            "--cmd",
            "sleep 60",
            "--device",
            "cpu",
            "--no-nvml",
            "--detach",
            "--duration",
            "60",
            "--json",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    runner = psutil.Process(json.loads(done.stdout)["runner_pid"])
    try:
        stopped = subprocess.run(
            [str(program), "stop"], cwd=work, env=env, capture_output=True, text=True, timeout=90
        )
        assert stopped.returncode == 0 and "run saved to" in stopped.stderr, stopped.stderr
    finally:
        if runner.is_running():
            runner.kill()


def _copy_run(source: Path, runs: Path, name: str, **changes: object) -> Path:
    """A copy of a recorded run under ``runs`` with run.json's top-level fields ``changes``."""
    target = runs / name
    shutil.copytree(source, target)
    meta = json.loads((target / "run.json").read_text())
    meta.update(changes)
    (target / "run.json").write_text(json.dumps(meta))
    return target


@pytest.mark.parametrize("pid", [-1, 0, 2**80])
def test_2_a_runner_pid_that_is_not_a_process_id_breaks_no_command(tmp_path, pid):
    runs = tmp_path / "runs"
    _copy_run(DATA / "x-fcn", runs, "20260101-000000-fine")
    here = os.uname().nodename
    _copy_run(
        DATA / "x-gemm",
        runs,
        "20260101-000001-garbled",
        status="recording",
        runner={"pid": pid, "started": 0.0, "uid": os.getuid(), "user": "me", "host": here},
    )
    env = {"GPUMON_RUNS": str(runs), "NO_COLOR": "1"}
    listed = gpumon("runs", env=env)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert "20260101-000000-fine" in listed.stdout and "20260101-000001-garbled" in listed.stdout
    as_json = gpumon("runs", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    assert {r["name"]: r["status"] for r in json.loads(as_json.stdout)}[
        "20260101-000001-garbled"
    ] == "interrupted"
    for command in ("stop", "attach"):
        assert "no running run" in one_line_error(gpumon(command, env=env))
    stopped = gpumon("stop", "20260101-000001-garbled", env=env)
    assert stopped.returncode == 0 and "not running (interrupted)" in stopped.stderr, stopped.stderr


@pytest.mark.parametrize(
    "folder, said",
    [("size=8k", "No space left on device"), ("ro,size=64k", "Read-only file system")],
)
def test_3_export_onto_a_full_or_read_only_folder_fails_in_one_line_and_leaves_nothing(
    tmp_path, folder, said
):
    export = shlex.join(
        [
            sys.executable,
            "-m",
            "gpumon",
            "export",
            str(DATA / "x-fcn"),
            "--csv",
            str(tmp_path / "mnt"),
        ]
    )
    listing = (
        tmp_path / "left.txt"
    )  # what the folder holds afterwards, seen from inside the namespace
    done = in_private_mount(
        tmp_path, folder, f"{export}; rc=$?; ls -A {tmp_path / 'mnt'} > {listing}; exit $rc"
    )
    assert "Traceback" not in done.stderr
    line = one_line_error(
        done, status=1
    )  # the machine failed, not the input (exit 1, docs/architecture.md)
    assert f"cannot write {tmp_path / 'mnt' / 'steps.csv'}: {said}" in line, line
    assert listing.read_text() == "", "files were left behind"


def test_3_export_never_overwrites_silently(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "steps.csv").write_text("mine\n")
    line = one_line_error(gpumon("export", str(DATA / "x-fcn"), "--csv", str(out)))
    assert "already has steps.csv" in line and "--force" in line
    assert (out / "steps.csv").read_text() == "mine\n" and sorted(
        p.name for p in out.iterdir()
    ) == ["steps.csv"]
    forced = gpumon("export", str(DATA / "x-fcn"), "--csv", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    exported = (out / "steps.csv").read_text().splitlines()
    recorded = (DATA / "x-fcn" / "steps.csv").read_text().splitlines()
    assert exported[0].startswith("job,counts,slot,") and len(exported) == len(recorded)


def test_4_beside_refuses_a_process_whose_tree_holds_gpumon(tmp_path):
    runs = tmp_path / "runs"
    args = [
        "run",
        "fcn",
        "--device",
        "cpu",
        "--no-nvml",
        "--headless",
        "--duration",
        "6",
        "--stagger",
        "1",
        "--out",
        str(runs),
    ]
    line = one_line_error(gpumon(*args, "--beside", str(os.getpid())))  # this test: gpumon's parent
    assert f"--beside {os.getpid()}" in line and "is an ancestor of gpumon" in line
    shell = subprocess.run(
        [
            "bash",
            "-c",
            shlex.join([sys.executable, "-m", "gpumon", *args]) + " --beside $$; exit $?",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "is an ancestor of gpumon" in one_line_error(shell)
    init = one_line_error(gpumon(*args, "--beside", "1"))
    assert ("is an ancestor of gpumon" if os.getuid() == 0 else "belongs to") in init
    assert not runs.exists()


SPEC = tiny_pairs_spec("big", "Big", "How many cells?", 3)  # [run] last: a test appends repeats


def test_5_an_experiment_may_not_ask_for_more_cells_than_it_could_ever_run(tmp_path):
    spec = tmp_path / "big.toml"
    spec.write_text(SPEC)
    args = ["experiment", str(spec), "--dry-run", "--device", "cpu", "--out", str(tmp_path / "exp")]
    line = one_line_error(gpumon(*args, "--repeats", "1000000000", timeout=60))
    assert (
        "asks for 3,000,000,000 cells" in line
        and "at most 10,000" in line
        and "each cell is a real run" in line
    )
    spec.write_text(SPEC + "repeats = 1000000000\n")
    line = one_line_error(gpumon(*args, timeout=60))
    assert f"{spec}: [run] asks for 3,000,000,000 cells" in line
    spec.write_text(SPEC + "repeats = 3333\n")  # 9,999 cells: allowed, and listed
    listed = gpumon(*args, timeout=120)
    assert listed.returncode == 0 and listed.stdout.startswith("9999 cells into"), listed.stderr


def _unsafe_runtime_dirs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Rendezvous directories gpumon must refuse, each with what the refusal says."""
    cases: dict[str, tuple[Path, str]] = {}
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    os.chmod(open_to_all, 0o777)
    cases["mode 0777"] = (
        open_to_all,
        "is open to other users (mode 777); chmod 700 it or remove it",
    )
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(private)
    cases["a symlink"] = (
        tmp_path / "link",
        "is a symbolic link, not a directory of yours; remove it",
    )
    probes_open = tmp_path / "probes-open"
    (probes_open / "probes").mkdir(parents=True)
    os.chmod(probes_open, 0o700)
    os.chmod(probes_open / "probes", 0o755)
    cases["probes/ 0755"] = (probes_open, "probes is open to other users (mode 755); chmod 700 it")
    if os.getuid() == 0:  # only root can give a directory to another user
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        cases["another user's"] = (theirs, "belongs to uid 65534, not to you")
    return cases


def test_6_wrap_refuses_an_unsafe_rendezvous_directory_and_says_why(tmp_path):
    for case, (directory, said) in _unsafe_runtime_dirs(tmp_path).items():
        line = one_line_error(
            gpumon("wrap", "--", "true", env={"GPUMON_RUNTIME_DIR": str(directory)})
        )
        assert "the probe's rendezvous cannot be made:" in line and said in line, (case, line)


def test_6_beside_says_why_it_cannot_read_a_probe(tmp_path):
    directory, said = _unsafe_runtime_dirs(tmp_path)["mode 0777"]
    env = {"GPUMON_RUNTIME_DIR": str(directory)}
    stepper = subprocess.Popen([sys.executable, "-c", STEPPER], env={**os.environ, **env})
    try:
        done = gpumon(
            *headless_cpu(
                tmp_path / "runs",
                "--beside",
                str(stepper.pid),
                "--stagger",
                "0",
                "--duration",
                "1",
            ),
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert (
            f"gpumon: cannot read the probe of pid {stepper.pid}: {directory} {said}" in done.stderr
        ), done.stderr
        assert stepper.poll() is None
    finally:
        stepper.kill()
        stepper.wait()


def test_7_predict_and_compare_take_each_run_once_and_one_job_per_slot():
    fcn, gemm, shared = (str(DATA / name) for name in ("x-fcn", "x-gemm", "s-fcn+gemm"))
    mixed = one_line_error(gpumon("predict", "--exclusive", f"A={fcn}", "--exclusive", f"A={gemm}"))
    assert (
        "A=x-fcn (fcn:threads=1,cpus=0) and A=x-gemm (gemm:threads=1,cpus=0) are different jobs"
        in mixed
    )
    for argv in (
        ["predict", "--exclusive", fcn, "--exclusive", fcn],
        ["predict", "--exclusive", fcn, "--exclusive", f"B={fcn}/"],
        [
            "compare",
            "--exclusive",
            fcn,
            "--exclusive",
            fcn,
            "--exclusive",
            gemm,
            "--shared",
            shared,
        ],
        [
            "compare",
            "--exclusive",
            fcn,
            "--exclusive",
            gemm,
            "--shared",
            shared,
            "--shared",
            shared,
        ],
    ):
        line = one_line_error(gpumon(*argv))
        assert "is given twice: a run counts once" in line, (argv, line)
    assert gpumon("predict", "--exclusive", f"A={fcn}", "--exclusive", f"B={gemm}").returncode == 0


def test_8_predict_says_when_a_jobs_cpu_use_is_unknown_and_widens_the_interval(tmp_path):
    fcn, gemm = (shutil.copytree(DATA / name, tmp_path / name) for name in ("x-fcn", "x-gemm"))
    predict = ("predict", "--exclusive", str(fcn), "--exclusive", str(gemm))
    whole = json.loads(gpumon(*predict, "--json").stdout)
    assert not whole["notes"]
    header = (gemm / "processes.csv").read_text().splitlines()[0]
    (gemm / "processes.csv").write_text(header + "\n")  # the job's CPU use was never sampled
    done = gpumon(*predict, "--json")
    assert done.returncode == 0, done.stderr
    blind = json.loads(done.stdout)
    assert [n for n in blind["notes"] if n.startswith("no CPU samples for B")], blind["notes"]
    r = blind["workloads"]["A"][
        "slowdown"
    ]  # A's slowdown depends on B's use of the shared core: now unknown
    assert r["low"] <= 1.0 and r["high"] >= 2.0, r  # from B idle on the core to B filling it
    text = gpumon(*predict).stdout
    assert "note: no CPU samples for B" in text


def test_9_a_capture_that_cannot_start_on_a_full_disk_leaves_no_run_directory(tmp_path):
    runs = tmp_path / "mnt" / "runs"
    run = shlex.join(
        [
            sys.executable,
            "-m",
            "gpumon",
            "run",
            "--cmd",
            "sleep 30",
            "--device",
            "cpu",
            "--no-nvml",
            "--headless",
            "--out",
            str(runs),
        ]
    )
    listing = tmp_path / "left.txt"
    done = in_private_mount(
        tmp_path, "size=64k", f"{run}; rc=$?; ls -A {runs} > {listing}; exit $rc"
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, (
        done.stderr
    )  # the disk failed, not the input
    assert "gpumon: error: cannot write the capture: no space left on" in done.stderr, done.stderr
    assert listing.read_text() == "", "a half-made run directory was left behind"


def test_10_runs_lists_a_run_whose_run_json_is_damaged_as_damaged(tmp_path):
    runs = tmp_path / "runs"
    _copy_run(DATA / "x-fcn", runs, "20260101-000000-good")
    whole = (DATA / "x-gemm" / "run.json").read_bytes()
    for name, content in (
        ("empty", b""),
        ("truncated", whole[: len(whole) // 2]),
        ("corrupt", b"\x00\xff not json"),
    ):
        broken = _copy_run(DATA / "x-gemm", runs, f"20260101-00000{len(name)}-{name}")
        (broken / "run.json").write_bytes(content)
    done = gpumon("runs", str(runs))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert set(rows) == {
        "20260101-000000-good",
        "20260101-000005-empty",
        "20260101-000009-truncated",
        "20260101-000007-corrupt",
    }
    for name in ("empty", "truncated", "corrupt"):
        row = next(line for key, line in rows.items() if key.endswith(name))
        assert " damaged " in row and "run.json: corrupt (not valid JSON)" in row, row
    assert done.stderr == f"gpumon: 3 damaged run(s) in {runs}, listed with what is wrong\n"
    listed = {r["name"]: r for r in json.loads(gpumon("runs", str(runs), "--json").stdout)}
    assert (
        listed["20260101-000005-empty"]["status"] == "damaged"
        and listed["20260101-000005-empty"]["problem"]
    )
    assert (
        listed["20260101-000000-good"]["status"] == "complete"
        and listed["20260101-000000-good"]["problem"] is None
    )


@pytest.mark.parametrize(
    "argv, said",
    [
        (["stop", "--timeout", "nan"], "not a finite number: 'nan'"),
        (["stop", "--timeout", "inf"], "not a finite number: 'inf'"),
        (["stop", "--timeout", "-1"], "must be a number of seconds > 0: '-1'"),
        (["stop", "--timeout", "0"], "must be a number of seconds > 0: '0'"),
        (
            ["run", "fcn", "--device", "cpu", "--headless", "--warmup", "-1"],
            "must be 0 or more: '-1'",
        ),
    ],
)
def test_11_a_timeout_or_warm_up_that_means_nothing_is_refused(tmp_path, argv, said):
    done = gpumon(*argv, env={"GPUMON_RUNS": str(tmp_path / "runs")})
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, (
        done.stderr
    )
    assert not (tmp_path / "runs").exists()


def test_12_a_run_whose_job_failed_says_so(tmp_path):
    runs = tmp_path / "runs"
    failing = shlex.join([sys.executable, "-c", "import sys; print('bad input'); sys.exit(1)"])
    done = gpumon(
        "run", "--cmd", failing, "--device", "cpu", "--no-nvml", "--headless", "--out", str(runs)
    )
    assert done.returncode == 1 and "run failed: workload A" in done.stderr, done.stderr
    fine = gpumon(
        *headless_cpu(
            runs,
            "--cmd",
            shlex.join([sys.executable, "-c", "pass"]),
            "--label",
            "fine",
        ),
    )
    assert fine.returncode == 0, fine.stderr
    statuses = {
        r["label"]: r["status"] for r in json.loads(gpumon("runs", str(runs), "--json").stdout)
    }
    assert statuses == {"cmd": "failed", "fine": "complete"}
    (failed,) = [p for p in runs.iterdir() if not p.name.endswith("-fine")]
    meta = json.loads((failed / "run.json").read_text())
    assert meta["status"] == "failed" and meta["workloads"][0]["exit_status"] == 1
    assert " failed " in next(
        line for line in gpumon("runs", str(runs)).stdout.splitlines() if failed.name in line
    )


def test_13_attach_without_a_terminal_points_at_a_log_only_where_there_is_one(tmp_path):
    runs = tmp_path / "runs"
    foreground = _copy_run(
        DATA / "x-fcn", runs, "20260101-000000-fcn"
    )  # a run started in a terminal: no runner.log
    line = one_line_error(gpumon("attach", foreground.name, env={"GPUMON_RUNS": str(runs)}))
    assert (
        "needs a terminal" in line
        and "runner.log" not in line
        and f"its run directory: {foreground}" in line
    )
    (foreground / "runner.log").write_text(
        "gpumon: capturing to …\n"
    )  # what a detached runner leaves
    line = one_line_error(gpumon("attach", foreground.name, env={"GPUMON_RUNS": str(runs)}))
    assert f"its log: {foreground / 'runner.log'}" in line


def test_13_a_program_that_exists_but_cannot_run_is_not_called_not_found(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")  # not executable
    for argv in (
        ["wrap", "--", str(script)],
        ["run", "--cmd", str(script), "--device", "cpu", "--headless"],
    ):
        line = one_line_error(gpumon(*argv, env={"GPUMON_RUNS": str(tmp_path / "runs")}))
        assert f"cannot run {script}: it is not executable (chmod +x it" in line, line
        directory = [
            *argv[: argv.index(str(script))],
            str(tmp_path),
            *argv[argv.index(str(script)) + 1 :],
        ]
        assert "is a directory" in one_line_error(
            gpumon(*directory, env={"GPUMON_RUNS": str(tmp_path / "runs")})
        )
    assert "command not found: no-such-program" in one_line_error(
        gpumon("wrap", "--", "no-such-program")
    )


def test_13_predict_says_gpu_share_modes_do_not_apply_to_cpu_runs_and_keeps_the_modes_shape():
    fcn, gemm = str(DATA / "x-fcn"), str(DATA / "x-gemm")
    both = json.loads(
        gpumon(
            "predict", "--exclusive", fcn, "--exclusive", gemm, "--share", "all", "--json"
        ).stdout
    )
    assert set(both) == {"modes", "better"} and [m["share"] for m in both["modes"]] == ["cpu"]
    assert both["modes"][0]["notes"][0].startswith(
        "--share all: GPU sharing modes do not apply to CPU runs"
    )
    mps = gpumon("predict", "--exclusive", fcn, "--exclusive", gemm, "--share", "mps")
    assert (
        mps.returncode == 0
        and "note: --share mps: GPU sharing modes do not apply to CPU runs" in mps.stdout
    )
    plain = json.loads(gpumon("predict", "--exclusive", fcn, "--exclusive", gemm, "--json").stdout)
    assert plain["share"] == "cpu" and not any("--share" in n for n in plain["notes"])
