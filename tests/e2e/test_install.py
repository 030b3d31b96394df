"""The light install: a wheel of this tree, installed without extras into a fresh venv (no torch there).

The monitor, doctor, a headless ``--cmd`` run, compare and export work there without torch; a built-in
workload runs with ``--python`` naming a training environment (torch and numpy, no gpumon), and the
auto-probe counts a plain torch script's steps there; without torch, ``gpumon run fcn`` says how to
get it in one line and leaves nothing behind.

Installing uses pip's own configuration (on the CPU box: local indexes and wheel cache, offline).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpumon.core.store.trace import load_run

# Building the wheel and installing it (about 200 MB of wheels) is most of the time: 100 s on the 2-core
# CPU box under load; the module's timeout covers the fixture.
pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 600
HEAVY = ("torch", "scipy", "matplotlib", "pyarrow")
# Run before anything else in the light venv's gpumon: records which heavy modules get imported.
WATCH_HEAVY = textwrap.dedent(
    """
    import atexit, os, sys
    def _report():
        with open(os.environ["HEAVY_LOG"], "a") as out:
            out.write(" ".join(sys.argv[:2]) + ": " + ",".join(m for m in {heavy!r} if m in sys.modules) + "\\n")
    if os.environ.get("HEAVY_LOG"):
        atexit.register(_report)
    """
).format(heavy=HEAVY)
# A --cmd job that reports 150 steps of about 10 ms through gpumon's probe.
STEPPER = "import time\nfrom gpumon import probe\nfor _ in range(150):\n    time.sleep(0.01)\n    probe.step(samples=4)\n"


class LightVenv:
    """A fresh venv with the wheel installed without extras, and a clean environment to run it in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = str(root / "venv" / "bin" / "python")
        self.gpumon_exe = str(root / "venv" / "bin" / "gpumon")
        self.runs = root / "runs"
        self.heavy_log = root / "heavy.log"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GPUMON_PYTHON")}
        env.update(GPUMON_RUNS=str(self.runs), XDG_CACHE_HOME=str(root / "cache"), NO_COLOR="1",
                   GPUMON_DATA_DIR=str(root / "data"), HEAVY_LOG=str(self.heavy_log))
        env["PATH"] = os.pathsep.join([str(root / "venv" / "bin"), env.get("PATH", "")])
        self.env = env

    def gpumon(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([self.gpumon_exe, *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env, cwd=self.root)

    def heavy_imports(self) -> list[str]:
        """One line per gpumon command run so far: which of HEAVY it had imported at exit."""
        return self.heavy_log.read_text().splitlines() if self.heavy_log.exists() else []


def _run(argv: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    """Run to completion in ``cwd`` (never the checkout: ``python -c`` would import gpumon from there)."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, cwd=cwd, **kw)
    assert done.returncode == 0, f"{argv[:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


@pytest.fixture(scope="module")
def light(tmp_path_factory) -> LightVenv:
    """Build a wheel from a copy of the tree (no build/ left in the checkout), install it without extras."""
    root = tmp_path_factory.mktemp("light")
    source = root / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "gpumon", source / "gpumon", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = root / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(source)], root)
    (wheel,) = wheels.glob("gpumon-*.whl")
    # this test's pip installs into a venv without one; no .pyc compiling (a third of the time)
    _run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], root)
    venv = LightVenv(root)
    _run([sys.executable, "-m", "pip", "--python", venv.python, "install", "--quiet", "--no-compile", str(wheel)],
         root, env=venv.env)
    site = _run([venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root, env=venv.env)
    (Path(site.stdout.strip()) / "gpumon_watch_heavy.pth").write_text("import gpumon_watch_heavy\n")
    (Path(site.stdout.strip()) / "gpumon_watch_heavy.py").write_text(WATCH_HEAVY)
    return venv


def test_light_install_has_no_torch_and_the_monitor_works(light, tmp_path):
    has = _run([light.python, "-c", f"import importlib.util as u; print([m for m in {HEAVY!r} if u.find_spec(m)])"],
               light.root, env=light.env)
    assert has.stdout.strip() == "[]", "the light install must not pull torch or the analysis libraries"
    where = _run([light.python, "-c", "import gpumon; print(gpumon.__file__)"], light.root, env=light.env).stdout
    assert where.startswith(str(light.root / "venv")), f"gpumon must come from the wheel, not {where}"

    assert light.gpumon("--help").returncode == 0
    doctor = light.gpumon("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"workloads' python {light.python}" in doctor.stdout and "no torch" in doctor.stdout
    assert "gpumon[torch]" in doctor.stdout

    script = tmp_path / "stepper.py"
    script.write_text(STEPPER)
    cmd = f"{light.python} {script}"
    alone = light.gpumon("run", "--cmd", cmd, "--headless", "--no-nvml", "--duration", "120", "--label", "alone")
    assert alone.returncode == 0, alone.stderr
    both = light.gpumon("run", "--cmd", cmd, "--cmd", cmd, "--headless", "--no-nvml", "--duration", "120",
                        "--label", "both")
    assert both.returncode == 0, both.stderr
    runs = sorted(p for p in light.runs.iterdir() if (p / "run.json").exists())
    assert len(runs) == 2
    for run_dir in runs:
        steps = load_run(run_dir).steps()
        assert set(steps.groupby("process").size()) == {150}, "every probe step recorded"

    compared = light.gpumon("compare", "--exclusive", str(runs[0]), "--shared", str(runs[1]))
    assert compared.returncode == 0, compared.stderr
    assert "STP" in compared.stdout and "need scipy" in compared.stdout and "gpumon[analysis]" in compared.stdout

    exported = light.gpumon("export", str(runs[1]), "--csv", str(tmp_path / "csv"))
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "csv" / "steps.csv").read_text().count("\n") == 1 + 300

    parquet = light.gpumon("export", str(runs[1]), "--parquet", str(tmp_path / "pq"))
    assert parquet.returncode == 2 and parquet.stderr.strip().count("\n") == 0
    assert "gpumon[analysis]" in parquet.stderr and not (tmp_path / "pq").exists()
    report = light.gpumon("compare", "--exclusive", str(runs[0]), "--shared", str(runs[1]), "--report", "r")
    assert report.returncode == 2 and "gpumon[analysis]" in report.stderr and not (light.root / "r").exists()

    lines = light.heavy_imports()
    assert len(lines) >= 8 and all(line.endswith(": ") for line in lines), lines


@pytest.fixture(scope="module")
def training_env(light) -> str:
    """A "training environment": torch and numpy (those of this test's Python, via a .pth line), no gpumon.

    Directories named in a .pth line get no .pth processing of their own, so this test's editable
    gpumon install does not come along.
    """
    root = light.root / "training-env"
    _run([sys.executable, "-m", "venv", "--without-pip", str(root)], light.root)
    python = str(root / "bin" / "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], light.root).stdout
    # where this Python finds torch and numpy (its own site-packages, or a base one under a --system-site-packages venv)
    ours = {str(Path(importlib.util.find_spec(m).origin).parents[1]) for m in ("torch", "numpy")}
    (Path(site.strip()) / "training_env.pth").write_text("\n".join(sorted(ours)) + "\n")
    has = "import importlib.util as u; print([m for m in ('torch', 'numpy', 'gpumon') if u.find_spec(m)])"
    assert _run([python, "-c", has], light.root, env=light.env).stdout.strip() == "['torch', 'numpy']"
    return python


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="this test's Python has no torch")
def test_builtin_workload_runs_in_another_python(light, training_env):
    """The light venv's gpumon runs fcn with --python naming an environment that has torch but no gpumon."""
    out = light.root / "with-python"
    done = light.gpumon("run", "fcn:preset=tiny,steps=40", "--python", training_env, "--device", "cpu",
                        "--headless", "--no-nvml", "--duration", "300", "--out", str(out), timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").exists()]
    run = load_run(run_dir)
    steps = run.steps()
    assert len(steps[steps.process == "A"]) == 40
    assert run.meta.versions["torch"], "the child's torch version is recorded"
    (workload,) = run.workloads
    assert workload.exit_status == 0


def test_builtin_workload_without_torch_says_how_to_get_it(light):
    runs = light.root / "no-torch-runs"
    done = light.gpumon("run", "fcn", "--headless", "--out", str(runs))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpumon: error: ")
    assert "pip install 'gpumon[torch]'" in done.stderr and "--python" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not runs.exists(), "nothing is left behind"


TORCH_SCRIPT = """
import torch
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(30):
    optimizer.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="this test's Python has no torch")
def test_auto_probe_counts_steps_of_a_script_in_an_env_without_gpumon(light, training_env, tmp_path):
    """``--cmd`` with the training env's python: the auto-probe finds gpumon's probe on the path it is given."""
    script = tmp_path / "train.py"
    script.write_text(TORCH_SCRIPT)
    out = light.root / "auto-probe"
    done = light.gpumon("run", "--cmd", f"{training_env} {script}", "--headless", "--no-nvml", "--duration", "300",
                        "--out", str(out), timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").exists()]
    assert len(load_run(run_dir).steps()) == 30, "every optimizer step counted"
