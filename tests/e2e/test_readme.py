"""Every shell block of README.md, as written, on the light install (``tests/e2e/light.py``), so that the README
cannot drift from what gpumon does (issue 34).

The blocks run in order, each line in a real terminal (tmux) of its own, as a reader pastes them into one shell:
an ``export`` carries over to the lines after it. The reader's own things are there: ``~/envs/train`` is a
training environment (torch and numpy, no gpumon) and ``train.py`` a small torch script in the working
directory. What the harness changes, and nothing else:

* a ``--headless`` run's ``--duration N`` is replaced by an event: once every job's status line says it has
  STEPS_SEEN steps (past the warm-up), the run gets SIGINT, as a reader's Ctrl-C (exit status 130, the capture
  finalised); ``--duration`` stays, as a cap of LINE_TIMEOUT_S. A loaded box can take more than any fixed
  duration to start torch (8 s gave a job no step past its warm-up at a load average of 12);
* any other ``--duration N`` is shortened to SHORT_S seconds (a ``--beside`` run keeps B's lead alone on top);
* ``pip install .`` is the fixture's install of this tree without extras (one per test session), not run again;
* a line that opens the live monitor is watched until its jobs run, then quit with ``q``, as a reader would;
* ``gpumon wrap`` keeps running in a terminal of its own (the README's "in tmux"), ``PID`` in the lines after it is
  its process ID, and its training (epochs of half a second) must end by itself with status 0 after its block;
* the blocks CI runs itself on the full install (``<!-- ci:install -->``, ``<!-- ci:test -->``, .ci/run) are
  skipped here, and so is a block marked ``<!-- manual -->`` (one a reader runs once by hand, such as making a
  training environment: it downloads, which no test may).

Every other line must exit with status 0.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from gpumon.core.jobs.beside import DEFAULT_LEAD_S
from tests.e2e.light import REPO, LightVenv
from tests.helpers import Terminal, wait_for

pytestmark = [
    pytest.mark.timeout(1500),
    pytest.mark.skipif(
        shutil.which("tmux") is None, reason="needs tmux to give each line a terminal"
    ),
]

SHORT_S = 8
LINE_TIMEOUT_S = 300
STEPS_SEEN = 15  # 10 past the default warm-up of 5: compare needs two
STATUS_LINE = re.compile(r"^\s*\d+\.\ds ([AB]) .* steps (\d+)\s*$", re.M)
BLOCK = re.compile(r"(?:<!-- (?:ci:)?(\w+) -->\n)?```bash\n(.*?)```", re.S)
DURATION = re.compile(r"--duration \d+(\.\d+)?")
TRAIN_PY = '''\
"""The reader's training script in the README's examples: a small torch model, epochs of about half a second."""
import argparse
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(1, args.epochs + 1):
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        optimizer.zero_grad()
        model(torch.randn(16, 32)).pow(2).mean().backward()
        optimizer.step()
    print(f"epoch {epoch}", flush=True)
'''


def readme_blocks(text: str) -> list[list[str]]:
    """The lines of every ```bash block of ``text`` that CI does not run itself."""
    return [
        [line for line in body.splitlines() if line.strip()]
        for marker, body in BLOCK.findall(text)
        if marker not in ("install", "test", "manual")
    ]


def workloads(line: str) -> list[str]:
    """The built-in workloads a ``gpumon run`` line launches (its words after ``run`` up to the first option)."""
    words = shlex.split(line, comments=True)
    if words[:2] != ["gpumon", "run"]:
        return []
    named = []
    for word in words[2:]:
        if word.startswith("-"):
            break
        named.append(word)
    return named


def stopped_by_steps(line: str) -> bool:
    """Whether the harness stops ``line`` once its jobs stepped (a headless run with a duration, not --beside)."""
    return bool(workloads(line)) and "--headless" in line and "--beside" not in line


def shortened(line: str) -> str:
    if stopped_by_steps(line):
        return DURATION.sub(f"--duration {LINE_TIMEOUT_S}", line)
    seconds = SHORT_S + (DEFAULT_LEAD_S + SHORT_S if "--beside" in line else 0)
    return DURATION.sub(f"--duration {seconds:g}", line)


class Reader:
    """Runs README lines as a reader does, in ``work`` with ``home`` as HOME."""

    def __init__(self, light: LightVenv, home: Path, work: Path) -> None:
        drop = (
            "PYTHONPATH",
            "VIRTUAL_ENV",
            "GPUMON_PYTHON",
            "GPUMON_RUNS",
            "XDG_DATA_HOME",
            "NO_COLOR",
            "HEAVY_LOG",
        )
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env.update(
            HOME=str(home),
            TERM="xterm-256color",
            PATH=os.pathsep.join([str(light.bin), os.environ["PATH"]]),
        )
        self.work = work
        self.count = 0
        self.trainers: list[
            tuple[Terminal, int]
        ] = []  # gpumon wrap: its terminal, the wrapped job's PID
        self.detached: list[
            str
        ] = []  # the workloads of the last run started with --detach (gpumon attach shows them)

    def terminal(self, line: str) -> Terminal:
        self.count += 1
        where = self.work.parent / f"terminal-{self.count}"
        where.mkdir()
        return Terminal(where, ["bash", "-c", line], self.env, cwd=self.work)

    def run(self, line: str) -> None:
        if line == "pip install .":
            return  # the light fixture installed this tree without extras
        if line.startswith("export "):
            name = line.split()[1].split("=", 1)[0]
            done = subprocess.run(
                ["bash", "-c", f'{line}\nprintf %s "${name}"'],
                env=self.env,
                cwd=self.work,
                capture_output=True,
                text=True,
                check=True,
            )
            self.env[name] = done.stdout
            return
        if self.trainers:
            line = re.sub(r"\bPID\b", str(self.trainers[-1][1]), line)
        line = shortened(line)
        if line.startswith("gpumon wrap "):
            self.start_trainer(line)
            return
        if "--detach" in line:
            self.detached = workloads(line)
        terminal = self.terminal(line)
        screen = ""
        try:
            status = self.finish(terminal, line)
            screen = terminal.screen()  # read before close: the pane goes with its tmux server
        finally:
            terminal.close()
        wanted = 128 + signal.SIGINT if stopped_by_steps(line) else 0
        assert status == wanted, (
            f"{line!r} exited with status {status}:\n{screen or self.again(line)}"
        )

    def again(self, line: str) -> str:
        """What ``line`` prints when run again outside the terminal (a failed line's pane is gone with it)."""
        done = subprocess.run(
            ["bash", "-c", line],
            env=self.env,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=LINE_TIMEOUT_S,
        )
        return f"(its pane is gone; run again it printed, status {done.returncode}:)\n{done.stdout}{done.stderr}"

    def finish(self, terminal: Terminal, line: str) -> int:
        """The line's exit status; a live monitor is quit with q once every job it shows runs."""
        if stopped_by_steps(line):
            return self.interrupt_once_stepped(terminal, line)
        live = lambda: "? Help" in terminal.screen()  # noqa: E731 (the monitor's footer)
        wait_for(
            lambda: terminal.status_file.exists() or live(),
            LINE_TIMEOUT_S,
            0.2,
            f"{line!r} to end or draw",
        )
        if not terminal.status_file.exists():
            jobs = len(workloads(line) or self.detached)
            wait_for(
                lambda: terminal.screen().count("─ running ─") >= jobs,
                LINE_TIMEOUT_S,
                0.2,
                f"{jobs} jobs running in {line!r}",
            )
            terminal.keys("q")
        return terminal.status(LINE_TIMEOUT_S)

    def interrupt_once_stepped(self, terminal: Terminal, line: str) -> int:
        """SIGINT to the headless run once each of its jobs' status lines says STEPS_SEEN steps."""
        jobs = len(workloads(line))

        def stepped() -> bool:
            steps: dict[str, int] = {}
            for slot, count in STATUS_LINE.findall(terminal.screen(joined=True)):
                steps[slot] = int(count)
            return len(steps) == jobs and min(steps.values()) >= STEPS_SEEN

        wait_for(stepped, LINE_TIMEOUT_S, 0.2, f"{STEPS_SEEN} steps of each job of {line!r}")
        (
            run,
        ) = [  # the gpumon entry point: python .../bin/gpumon run ... (its jobs are python -m ...)
            p
            for p in terminal.processes()
            if Path(p.cmdline()[1]).name == "gpumon" and p.cmdline()[2] == "run"
        ]
        run.send_signal(signal.SIGINT)
        return terminal.status(LINE_TIMEOUT_S)

    def start_trainer(self, line: str) -> None:
        """``gpumon wrap`` in a terminal of its own: its training runs on while the next lines run."""
        terminal = self.terminal(line)
        terminal.wait_for_text("epoch 1", LINE_TIMEOUT_S)
        (job,) = [p for p in terminal.processes() if "train.py" in " ".join(p.cmdline())]
        self.trainers.append((terminal, job.pid))

    def wait_for_trainers(self) -> None:
        for terminal, _ in self.trainers:
            assert terminal.status(LINE_TIMEOUT_S) == 0, terminal.screen()
            terminal.close()
        self.trainers.clear()


def test_the_readme_works_as_written_on_the_light_install(light, training_env, tmp_path):
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    (home / "envs" / "train").symlink_to(Path(training_env).parents[1], target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(TRAIN_PY)
    blocks = readme_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert ["pip install .", *blocks[0][1:]] == blocks[0] and any(
        "gpumon wrap" in line for b in blocks for line in b
    )
    reader = Reader(light, home, work)
    try:
        for block in blocks:
            for line in block:
                reader.run(line)
            reader.wait_for_trainers()
    finally:
        for terminal, _ in reader.trainers:
            terminal.close()
    runs = home / ".local" / "share" / "gpumon" / "runs"
    labels = {p.name.split("-", 2)[-1] for p in runs.iterdir()}
    assert {"fcn-alone", "lstm-alone", "fcn-lstm"} <= labels, labels
    assert (work / "report" / "report.md").is_file()


def test_the_harness_reads_the_blocks_ci_runs_itself_apart():
    text = "x\n<!-- ci:install -->\n```bash\npip install -e .\n```\n```bash\ngpumon runs   # list\n\ngpumon doctor\n```\n"
    assert readme_blocks(text) == [["gpumon runs   # list", "gpumon doctor"]]
    assert (
        shortened("gpumon run fcn --duration 30 --label x")
        == f"gpumon run fcn --duration {SHORT_S} --label x"
    )
    assert (
        shlex.split(shortened("gpumon run gemm --beside 42 --duration 120"))[-1]
        == f"{DEFAULT_LEAD_S + 2 * SHORT_S:g}"
    )
    assert workloads("gpumon run fcn vgg19 --detach   # in the background") == ["fcn", "vgg19"]
    assert workloads("gpumon attach") == [] and workloads("gpumon run --cmd 'python x.py'") == []


def test_the_readme_says_how_to_make_a_training_environment_and_no_test_downloads_it():
    """Issue 43: the README's three lines that make a training environment (CPU-only wheels) are marked manual, so
    this test, which runs every other block, never downloads torch."""
    text = (REPO / "README.md").read_text()
    assert "<!-- manual -->\n```bash\npython -m venv ~/envs/train\n" in text
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
    assert not any(
        "download.pytorch.org" in line for block in readme_blocks(text) for line in block
    )
