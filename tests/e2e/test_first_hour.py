"""A newcomer's first hour, as real ``gpumon`` subprocesses (issue 34): runs named by their labels, export's default
folder, the shipped experiment specs and their full commands, the options of ``gpumon`` alone, a bare ``python``
in a command."""

from __future__ import annotations

import json
import re
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import GPUMON, Terminal, gpumon, headless_cpu, wait_for
from tests.tracegen import exclusive, paced_job, staggered_pair, write_run

FCN, LSTM = "fcn:preset=tiny", "lstm:preset=tiny"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs directory as the README's "Did sharing pay?" leaves it, with fcn-alone captured twice."""
    root = tmp_path_factory.mktemp("runs")
    exclusive(root / "20261122-110000-fcn-alone", "A", 50.0)
    exclusive(root / "20261122-113000-fcn-alone", "A", 40.0)
    exclusive(root / "20261122-113100-lstm-alone", "A", 25.0, LSTM)
    pair = (
        paced_job("A", FCN, 0.0, 20.0, alone=20.0, shared=20.0, shared_from=0.0),
        paced_job("B", LSTM, 0.0, 20.0, alone=12.5, shared=12.5, shared_from=0.0),
    )
    write_run(root / "20261122-114000-fcn-lstm", pair, label="fcn-lstm", interval_s=0.5)
    return root


# compare of the ``runs`` fixture's three runs, each named by its label
COMPARE_BY_LABEL = (
    "compare",
    "--exclusive",
    "fcn-alone",
    "--exclusive",
    "lstm-alone",
    "--shared",
    "fcn-lstm",
)


def in_runs(runs: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return gpumon(*args, env={"GPUMON_RUNS": str(runs), "NO_COLOR": "1"}, cwd=cwd)


def test_compare_takes_the_labels_and_a_label_names_its_newest_run(runs):
    done = in_runs(
        runs,
        *COMPARE_BY_LABEL,
        "--json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [Path(p).name for p in data["exclusive_runs"]] == [
        "20261122-113000-fcn-alone",
        "20261122-113100-lstm-alone",
    ]
    assert data["workloads"]["A"]["slowdown"]["estimate"] == pytest.approx(
        2.0, rel=0.02
    )  # 40 alone, 20 shared


def test_an_ambiguous_name_lists_the_candidates_and_a_miss_the_closest_names(runs):
    ambiguous = in_runs(runs, "compare", "--shared", "fcn")
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert ambiguous.stderr.count("\n") == 1 and "Traceback" not in ambiguous.stderr
    assert "'fcn' is ambiguous" in ambiguous.stderr
    for name in (
        "20261122-110000-fcn-alone",
        "20261122-113000-fcn-alone",
        "20261122-114000-fcn-lstm",
    ):
        assert name in ambiguous.stderr

    miss = in_runs(runs, "compare", "--shared", "fcn-lstn")
    assert miss.returncode == 2 and miss.stderr.count("\n") == 1
    assert miss.stderr.startswith("gpumon: error: no run named or labelled 'fcn-lstn'")
    assert "closest: fcn-lstm" in miss.stderr

    # a unique beginning names that run; a run directory's own name still works
    assert (
        in_runs(
            runs,
            "compare",
            "--exclusive",
            "lstm",
            "--exclusive",
            "20261122-1130",
            "--shared",
            "fcn-l",
        ).returncode
        == 0
    )


def test_export_last_csv_writes_a_folder_named_after_the_run_and_says_which_run(runs, tmp_path):
    done = in_runs(runs, "export", "last", "--csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "20261122-114000-fcn-lstm-csv"
    assert (
        done.stderr
        == f"gpumon: exported run 20261122-114000-fcn-lstm (shared, label fcn-lstm) to {out}: 5 csv files and run.json\n"
    )
    assert done.stdout.splitlines() == [
        str(out / f"{t}.csv") for t in ("steps", "device", "processes", "host", "gpu_others")
    ] + [str(out / "run.json")]
    assert (out / "steps.csv").read_text().startswith("job,counts,slot,pid,step,t,wall_epoch_s,")

    named = in_runs(runs, "export", "lstm-alone", "--csv", "mine", cwd=tmp_path)
    assert named.returncode == 0 and (tmp_path / "mine" / "steps.csv").is_file()
    assert "exported run 20261122-113100-lstm-alone (exclusive, label lstm-alone)" in named.stderr


def test_experiment_dry_run_lines_are_whole_commands_and_a_resume_keeps_the_python(tmp_path):
    out = tmp_path / "exp"
    env = {k: v for k, v in os.environ.items() if k != "GPUMON_PYTHON"}
    listed = gpumon("experiment", "--list", cwd=tmp_path, env=env)
    assert (
        listed.returncode == 0
        and listed.stdout.split()[0] == "batch_size"
        and "q2_pairwise" in listed.stdout
    )

    dry = gpumon(
        "experiment", "q2_pairwise", "--dry-run", "--device", "cpu", "--out", str(out), cwd=tmp_path
    )
    assert dry.returncode == 0, dry.stderr
    cells = [line.split() for line in dry.stdout.splitlines()[1:]]
    assert cells and all(cell[4:8] == [sys.executable, "-m", "gpumon", "run"] for cell in cells), (
        dry.stdout
    )
    assert "--python" not in dry.stdout, "gpumon's own Python is not named"

    # an experiment that ran with --python: its resume without one uses the same Python, and says so
    out.mkdir()
    (out / "cells.json").write_text(
        json.dumps(
            {
                "format": 1,
                "experiment": {"name": "q2_pairwise", "python": sys.executable},
                "cells": [],
            }
        )
    )
    resumed = gpumon(
        "experiment",
        "q2_pairwise",
        "--dry-run",
        "--device",
        "cpu",
        "--out",
        str(out),
        cwd=tmp_path,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert (
        f"the workloads' python, as {out / 'cells.json'} recorded it: {sys.executable}"
        in resumed.stderr
    )
    cells = [line.split() for line in resumed.stdout.splitlines()[1:]]
    assert all(cell[-2:] == ["--python", sys.executable] for cell in cells), resumed.stdout


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["fcn"],
            "gpumon: error: fcn is a workload: launch it with gpumon run fcn (gpumon run --help)",
        ),
        (
            ["--headless", "--duration", "5"],
            "gpumon: error: --headless is an option of gpumon run, not of the monitor",
        ),
        (
            ["--cmd", "python train.py"],
            "gpumon: error: --cmd is an option of gpumon run, not of the monitor",
        ),
        (
            ["--device", "cpu", "runs"],
            "gpumon: error: --device before the command runs would be the monitor's option, and runs has no "
            "--device: leave it out (gpumon runs --help)",
        ),
        (
            ["--device", "cpu", "run", "fcn"],
            "gpumon: error: --device before the command run would be the monitor's option: "
            "give it after the command (gpumon run --device cpu fcn)",
        ),
        (["--python", "/no/such/python"], "gpumon: error: --python /no/such/python: no such file"),
    ],
)
def test_gpumon_alone_takes_the_monitor_options_or_says_which_command_does(argv, said, tmp_path):
    done = gpumon(*argv, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(said), done.stderr


def test_a_bare_python_in_cmd_is_the_workloads_python(tmp_path):
    """With --python (or GPUMON_PYTHON) a bare ``python`` in --cmd runs that interpreter; run.json records it."""
    script = tmp_path / "which.py"
    script.write_text("import sys\nprint('ran in', sys.executable, flush=True)\n")
    training = (
        tmp_path / "training" / "bin" / "python"
    )  # another path to a Python, as a training env's
    training.parent.mkdir(parents=True)
    training.symlink_to(sys.executable)
    runs = tmp_path / "runs"
    done = gpumon(
        *headless_cpu(
            runs,
            "--cmd",
            f"python {script}",
            "--python",
            str(training),
            "--duration",
            "60",
        ),
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in runs.iterdir() if (p / "run.json").exists()]
    (workload,) = json.loads((run_dir / "run.json").read_text())["workloads"]
    assert (
        workload["argv"] == [str(training), str(script)]
        and workload["spec"] == f"cmd:python {script}"
    )
    assert f"ran in {training}" in (run_dir / "logs" / "A.out").read_text()


def training_python(tmp_path: Path) -> Path:
    """Another path to this environment's Python, as a training environment's ``bin/python`` is: a script that
    execs it. Not a symlink: a symlink to a virtual environment's python is its base interpreter, not the
    environment (``sys.prefix`` is the base's), and the base may have no torch (issue 43)."""
    training = tmp_path / "training" / "bin" / "python"
    training.parent.mkdir(parents=True)
    training.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    training.chmod(0o755)
    return training


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a terminal")
def test_gpumon_alone_with_python_and_device_launches_into_them(tmp_path):
    """``gpumon --python PATH --device cpu``: the launch dialog offers that device, and a built-in job runs in PATH."""
    training = training_python(tmp_path)
    runs = tmp_path / "runs"
    env = {**os.environ, "TERM": "xterm-256color"}
    terminal = Terminal(
        tmp_path,
        [*GPUMON, "--python", str(training), "--device", "cpu", "--no-nvml", "--out", str(runs)],
        env,
        cwd=tmp_path,
    )
    try:
        terminal.wait_for_text("not capturing")
        terminal.keys("c")
        terminal.wait_for_text("REC")
        terminal.keys("a")
        dialog = terminal.wait_for_text("Launch into slot A")
        assert "cpu" in next(line for line in dialog.splitlines() if "Device" in line)
        terminal.keys("Enter")  # fcn, the first workload: on to its options
        wait_for(lambda: "Options" in terminal.cursor_line(), what="the options field focused")
        terminal.keys("preset=tiny", "Enter")
        run_dir = wait_for(lambda: next(runs.glob("*/run.json"), None), what="the capture").parent
        wait_for(
            lambda: "\nA," in (run_dir / "steps.csv").read_text(), timeout=90, what="A stepping"
        )
        terminal.keys("q")
        assert terminal.status(timeout=90) == 0
    finally:
        terminal.close()
    (workload,) = json.loads((run_dir / "run.json").read_text())["workloads"]
    assert workload["spec"] == "fcn:preset=tiny"
    argv = workload["argv"]
    assert argv[:2] == [str(training), "-m"] and argv[argv.index("--device") + 1] == "cpu"


MANUAL_SGD = Path(__file__).resolve().parents[1] / "scripts" / "manual_sgd.py"
NO_STEPS_WORDS = (
    "no steps seen after 5 s of CPU since its first backward pass: the auto-probe counts optimizer.step(); "
    "call gpumon.probe.step() in your loop (docs/probe.md#auto-probe-unmodified-scripts)"
)
SLOW_START = """
import time
# thread_time, not process_time: the main thread's CPU, so each phase lasts at least 7 s of wall time however many
# threads torch runs (on 2 cores its OpenMP threads ran the loop below at 199 % CPU: 7 s of process CPU passed in
# 3.5 s, about three of the sampler's 1 s ticks, and whether the notice came hung on one tick; CI once missed it)
began = time.thread_time()
while time.thread_time() - began < 7.0:  # a slow import or data load: CPU, no backward pass yet
    pass
import torch
w = torch.zeros(64, 1, requires_grad=True)
x, y = torch.randn(256, 64), torch.randn(256, 1)
trained = time.thread_time()
while time.thread_time() - trained < 7.0:  # a manual SGD update: no optimizer step
    ((x @ w - y) ** 2).mean().backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad.zero_()
print("switching to an optimizer", flush=True)
optimizer = torch.optim.SGD([w], lr=0.01)
for _ in range(40):
    optimizer.zero_grad()
    ((x @ w - y) ** 2).mean().backward()
    optimizer.step()
    time.sleep(0.02)
"""


def test_no_steps_is_not_said_while_a_job_starts_and_is_withdrawn_when_steps_arrive(tmp_path):
    """7 s of CPU before the first backward pass (a slow import) is not "no steps"; 7 s of backward passes without an
    optimizer step is; the steps that follow withdraw it, in run.json too (issue 43)."""
    script = tmp_path / "slow_start.py"
    script.write_text(SLOW_START)
    runs = tmp_path / "runs"
    done = gpumon(
        *headless_cpu(
            runs,
            "--cmd",
            f"python {script}",
            "--python",
            sys.executable,
            "--duration",
            "240",
        ),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    meta = json.loads(next(runs.glob("*/run.json")).read_text())
    kinds = [
        (n["kind"], n["t"]) for n in meta["notices"] if n.get("kind", "").startswith("no steps")
    ]
    assert [kind for kind, _ in kinds] == ["no steps", "no steps withdrawn"], meta["notices"]
    log = (next(runs.glob("*/logs")) / "A.out").read_text()
    assert "switching to an optimizer" in log
    assert "the no-steps notice is withdrawn" in done.stderr, done.stderr


def test_a_script_with_a_manual_sgd_loop_is_told_why_it_shows_no_steps(tmp_path):
    """No optimizer.step(): after 5 s of CPU without a step, headless says why (stderr and the status lines) and the
    capture keeps it; the job goes on (the words are advice, not an error)."""
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                runs,
                "--cmd",
                f"python {MANUAL_SGD}",
                "--python",
                sys.executable,
                "--json",
                "--duration",
                "240",
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said, states = [], []

    def read(stream, into):
        for line in stream:
            into.append(line)

    readers = [
        threading.Thread(target=read, args=(s, into), daemon=True)
        for s, into in ((proc.stderr, said), (proc.stdout, states))
    ]
    for reader in readers:
        reader.start()
    try:
        wait_for(
            lambda: any(
                json.loads(line).get("state") == "no steps"
                for line in states
                if line.startswith("{")
            ),
            timeout=120,
            what="a status line in state 'no steps'",
        )
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for reader in readers:
        reader.join(10)
    # the CPU seconds said are those the job had when it was noticed: 5 or more on a loaded box (6 was seen)
    words = re.compile(
        re.escape(NO_STEPS_WORDS).replace("after\\ 5\\ s", r"after\ ([5-9]|\d\d+)\ s")
    )
    told = [
        line
        for line in said
        if line.startswith("gpumon: A ") and words.fullmatch(line[len("gpumon: A ") : -1])
    ]
    assert told, "".join(said)
    assert proc.returncode == 128 + signal.SIGINT, "".join(said)
    meta = json.loads(next(runs.glob("*/run.json")).read_text())
    (notice,) = [n for n in meta["notices"] if n.get("kind") == "no steps"]
    assert notice["process"] == "A" and words.fullmatch(notice["text"]) and notice["t"] > 0
    assert meta["workloads"][0]["state"] == "stopped", "the job ran on until it was stopped"


SLOW_WARMUP = (
    "import time\nfrom gpumon import probe\nfor i in range(10**6):\n"
    "    time.sleep(0.6 if i < 5 else 0.05)\n    probe.step()\n"
)
STEADY = (
    "import time\nfrom gpumon import probe\nwhile True:\n    time.sleep(0.05)\n    probe.step()\n"
)


def test_a_lost_stagger_is_said_when_b_starts_and_by_compare(tmp_path):
    """B starts at the stagger while A is still in its warm-up: A never ran alone. Headless says so when B starts, the
    run keeps it, and compare --shared (no exclusive phase to be the baseline) says why instead of a generic line."""
    runs = tmp_path / "runs"
    done = gpumon(
        *headless_cpu(
            runs,
            "--cmd",
            shlex.join([sys.executable, "-c", SLOW_WARMUP]),
            "--cmd",
            shlex.join([sys.executable, "-c", STEADY]),
            "--stagger",
            "1",
            "--duration",
            "7",
        ),
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "--stagger 1 was lost" in line]
    assert len(said) == 1 and said[0].startswith("gpumon: B --stagger 1 was lost: B started at "), (
        done.stderr
    )
    assert "before A took a step after its warm-up, so A never ran alone" in said[0]
    (run_dir,) = [p for p in runs.iterdir() if (p / "run.json").exists()]
    assert [n["kind"] for n in json.loads((run_dir / "run.json").read_text())["notices"]] == [
        "lost stagger"
    ]

    compared = gpumon("compare", "--shared", str(run_dir))
    assert compared.returncode == 2 and compared.stderr.count("\n") == 1
    assert compared.stderr.startswith(
        f"gpumon: error: no exclusive baseline: {run_dir.name}: --stagger 1 was lost: B started at "
    ), compared.stderr
    assert (
        "so A never ran alone (a longer --stagger on this box, or --exclusive runs)"
        in compared.stderr
    )


def test_beside_with_no_nvml_says_nvml_was_off_not_that_it_gave_nothing(tmp_path):
    """A job without a probe watched with --no-nvml: nothing is known of it, and the words say why."""
    blind = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True:\n    time.sleep(0.05)\n"],
        start_new_session=True,
    )
    try:
        done = gpumon(
            *headless_cpu(
                tmp_path / "runs",
                "--cmd",
                shlex.join([sys.executable, "-c", STEADY]),
                "--beside",
                str(blind.pid),
                "--stagger",
                "2",
                "--duration",
                "6",
            ),
        )
        assert done.returncode == 0, done.stderr
    finally:
        blind.kill()
        blind.wait()
    why = "no GPU figures for it (NVML unavailable: disabled (--no-nvml))"
    live = [
        line
        for line in done.stdout.splitlines()
        if f" B pid{blind.pid}" in line or f"B pid {blind.pid}" in line
    ]
    assert live and all(why in line for line in live), done.stdout
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "run.json").exists()]
    compared = gpumon("compare", "--shared", str(run_dir))
    assert compared.returncode == 0, compared.stderr
    assert f"B: rate unknown (no probe); what is known: {why}" in compared.stdout
    assert "NVML gave none" not in compared.stdout + done.stdout


def test_headless_shows_the_whole_spec_and_says_a_job_stopped_at_duration(tmp_path):
    """The spec column holds the whole command (it was cut to 'cmd:python main.py --epo'), and the end line says
    'stopped at --duration', not the status of the SIGTERM gpumon sent."""
    (tmp_path / "main.py").write_text(STEADY)
    done = gpumon(
        *headless_cpu(
            tmp_path / "runs",
            "--cmd",
            "python main.py --epochs 3",
            "--python",
            sys.executable,
            "--duration",
            "3",
        ),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    status = [line for line in done.stdout.splitlines() if " A " in line]
    # the script first, then the whole command (issue 43)
    assert status and all(" A main.py (python main.py --epochs 3) " in line for line in status), (
        done.stdout
    )
    assert "gpumon: workload A stopped at --duration 3 s\n" in done.stderr
    assert "status -15" not in done.stderr


def test_cpu_runs_are_said_to_share_cores_and_copy_with_memcpy(runs, tmp_path):
    """Runs on the CPU: runs' SHARE column and compare's pair line say 'cpu cores' (not time slicing), and compare's
    note says what a copy is there (no CUDA-event note)."""
    listed = in_runs(runs, "runs")
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines()[1:] if line.strip()]
    assert rows and all(line.split()[2:4] == ["cpu", "cores"] for line in rows), listed.stdout
    compared = in_runs(
        runs,
        *COMPARE_BY_LABEL,
    )
    assert compared.returncode == 0, compared.stderr
    assert "Pair (cpu cores): STP " in compared.stdout and "timeslice" not in compared.stdout
    assert "CUDA-event" not in compared.stdout, "no copies in these runs: no note on copies"

    with_copies = gpumon("compare", "--shared", str(staggered_pair(tmp_path / "staggered")))
    assert with_copies.returncode == 0, with_copies.stderr
    assert (
        "On the CPU a job's 'copies' are RAM-to-RAM memcpy timed on the host" in with_copies.stdout
    )
    assert "CUDA-event" not in with_copies.stdout

    # the built-in job says it trains on the CPU: once it runs, its copies are memcpy (stopped after 3 such lines)
    proc = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                tmp_path / "fcn",
                "fcn:preset=tiny",
                "--duration",
                "240",
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    running = []
    try:
        for line in proc.stdout:
            if " running " in line:
                running.append(line)
                if len(running) == 3:
                    proc.send_signal(signal.SIGINT)
                    break
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(running) == 3 and all(
        " memcpy " in line and " copy " not in line for line in running
    ), running


def _loop(steps: int) -> str:
    """A probed loop of ``steps`` steps of about 10 ms (a training job that ends by itself)."""
    return shlex.join(
        [
            sys.executable,
            "-c",
            "import time\nfrom gpumon import probe\n"
            f"for _ in range({steps}):\n    time.sleep(0.01)\n    probe.step()\n",
        ]
    )


def test_the_live_line_measures_before_its_first_verdict_and_never_prints_nan(tmp_path):
    """Issue 34 item 9: the headless interference line of a --baseline run says 'measuring… (N s left)', with no r
    and no verdict, until the overlap holds MIN_OVERLAP_S and MIN_OVERLAP_STEPS of each job; then r and the
    verdict. On the base it printed 'A r nan' and then a verdict from its first steps."""
    runs = tmp_path / "runs"
    exclusive(tmp_path / "x-a", "A", 90.0)
    exclusive(tmp_path / "x-b", "A", 90.0)
    done = gpumon(
        *headless_cpu(
            runs,
            "--cmd",
            _loop(1500),
            "--cmd",
            _loop(1500),
            "--baseline",
            f"A={tmp_path / 'x-a'}",
            "--baseline",
            f"B={tmp_path / 'x-b'}",
            "--duration",
            "240",
        ),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = [
        line.split(" interference  ", 1)[1]
        for line in done.stdout.splitlines()
        if " interference  " in line
    ]
    first = next(
        (i for i, line in enumerate(lines) if not line.startswith("measuring…")), len(lines)
    )
    assert first > 0 and first < len(lines), done.stdout
    assert any(re.fullmatch(r"measuring… \(\d+ s left\)", line) for line in lines[:first]), (
        done.stdout
    )
    assert all(
        re.fullmatch(
            r"measuring… \((\d+ s left|waiting for (A|B|A and B) to pass (its|their) warm-up)\)",
            line,
        )
        for line in lines[:first]
    ), done.stdout
    assert all(
        re.match(
            r"A r \d\.\d\d  B r \d\.\d\d  (sharing pays|sharing loses|cannot tell): STP \d\.\d\d",
            line,
        )
        for line in lines[first:]
    ), done.stdout
    assert "nan" not in done.stdout


def test_runs_never_cuts_a_run_name(tmp_path):
    """Issue 43: a name longer than the RUN column widens it, so a name copied from the list names the run."""
    label = "a-label-long-enough-to-pass-the-old-34-columns"
    exclusive(tmp_path / f"20261122-110000-{label}", "A", 50.0)
    exclusive(tmp_path / "20261122-120000-short", "A", 40.0)
    done = gpumon("runs", str(tmp_path))
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert f"20261122-110000-{label}" in [row.split()[0] for row in rows]
    assert rows[1].index("exclusive") == rows[0].index("exclusive") == header.index("MODE")


def test_experiment_help_names_every_spec_that_list_lists():
    """Issue 43: the help's list of shipped specs left out q2_mps."""
    listed = gpumon("experiment", "--list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    helped = gpumon("experiment", "--help").stdout
    shipped = helped.split("shipped specs (gpumon experiment --list):", 1)[1].split("examples:")[0]
    assert sorted(shipped.split()) == sorted(names) and "q2_mps" in names
