"""The light install (``tests/e2e/light.py``): a wheel of this tree, installed without extras into a fresh venv (no
torch there).

The monitor, doctor, a headless ``--cmd`` run, compare and export work there without torch; a built-in
workload runs with ``--python`` naming a training environment (torch and numpy, no gpumon), and the
auto-probe counts a plain torch script's steps there; without torch, ``gpumon run fcn`` says how to
get it in one line and leaves nothing behind, and so does a bare ``python`` in ``--cmd`` that would be the light
install's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumon.core.store.trace import Run, load_run
from tests.e2e.light import HEAVY, run_ok

# Building the wheel and installing it (about 200 MB of wheels) is most of the time: 100 s on the 2-core
# CPU box under load; the module's timeout covers the (session) fixture when this module builds it.
pytestmark = pytest.mark.timeout(900)

# A --cmd job that reports 150 steps of about 10 ms through gpumon's probe.
SHIPPED_DIR = "from gpumon.experiments.runner.spec import shipped_dir; print(shipped_dir())"
STEPPER = "import time\nfrom gpumon import probe\nfor _ in range(150):\n    time.sleep(0.01)\n    probe.step(samples=4)\n"


def test_light_install_has_no_torch_and_the_monitor_works(light, tmp_path):
    has = run_ok(
        [
            light.python,
            "-c",
            f"import importlib.util as u; print([m for m in {HEAVY!r} if u.find_spec(m)])",
        ],
        light.root,
        env=light.env,
    )
    assert has.stdout.strip() == "[]", (
        "the light install must not pull torch or the analysis libraries"
    )
    where = run_ok(
        [light.python, "-c", "import gpumon; print(gpumon.__file__)"], light.root, env=light.env
    ).stdout
    assert where.startswith(str(light.root / "venv")), (
        f"gpumon must come from the wheel, not {where}"
    )

    assert light.gpumon("--help").returncode == 0
    doctor = light.gpumon("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"workloads' python {light.python}" in doctor.stdout and "no torch" in doctor.stdout
    assert "gpumon[torch]" in doctor.stdout

    script = tmp_path / "stepper.py"
    script.write_text(STEPPER)
    cmd = f"{light.python} {script}"
    alone = light.gpumon(
        "run", "--cmd", cmd, "--headless", "--no-nvml", "--duration", "120", "--label", "alone"
    )
    assert alone.returncode == 0, alone.stderr
    both = light.gpumon(
        "run",
        "--cmd",
        cmd,
        "--cmd",
        cmd,
        "--headless",
        "--no-nvml",
        "--duration",
        "120",
        "--label",
        "both",
    )
    assert both.returncode == 0, both.stderr
    runs = sorted(p for p in light.runs.iterdir() if (p / "run.json").exists())
    assert len(runs) == 2
    for run_dir in runs:
        steps = load_run(run_dir).steps()
        assert set(steps.groupby("process").size()) == {150}, "every probe step recorded"

    compared = light.gpumon("compare", "--exclusive", str(runs[0]), "--shared", str(runs[1]))
    assert compared.returncode == 0, compared.stderr
    assert (
        "STP" in compared.stdout
        and "need scipy" in compared.stdout
        and "gpumon[analysis]" in compared.stdout
    )
    as_json = light.gpumon(
        "compare", "--exclusive", str(runs[0]), "--shared", str(runs[1]), "--json"
    )
    assert as_json.returncode == 0 and "caution" not in json.loads(as_json.stdout), (
        "no p-values: no caution about them"
    )
    assert "Caution" not in compared.stdout

    exported = light.gpumon("export", str(runs[1]), "--csv", str(tmp_path / "csv"))
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "csv" / "steps.csv").read_text().count("\n") == 1 + 300

    parquet = light.gpumon("export", str(runs[1]), "--parquet", str(tmp_path / "pq"))
    assert parquet.returncode == 2 and parquet.stderr.strip().count("\n") == 0
    assert "gpumon[analysis]" in parquet.stderr and not (tmp_path / "pq").exists()
    # the report without matplotlib: everything but the plots, and it says why there are none
    report = light.gpumon(
        "compare", "--exclusive", str(runs[0]), "--shared", str(runs[1]), "--report", "r"
    )
    assert report.returncode == 0, report.stderr
    assert (
        "plots not drawn: they need matplotlib" in report.stdout
        and "gpumon[analysis]" in report.stdout
    )
    written = {p.name for p in (light.root / "r").iterdir()}
    assert {"report.md", "summary.json", "rates.csv"} <= written and not any(
        n.endswith(".png") for n in written
    )
    assert "Plots not drawn: they need matplotlib" in (light.root / "r" / "report.md").read_text()

    # the shipped experiment specs come with the wheel; a dry run's lines are whole commands
    listed = light.gpumon("experiment", "--list")
    assert listed.returncode == 0 and "q2_pairwise" in listed.stdout, listed.stdout + listed.stderr
    # from the wheel's own gpumon/experiments/specs/ (the repository keeps them in its top-level experiments/)
    shipped = run_ok([light.python, "-c", SHIPPED_DIR], light.root, env=light.env).stdout.strip()
    assert Path(shipped).parts[-3:] == ("gpumon", "experiments", "specs"), shipped
    assert Path(shipped).is_relative_to(light.bin.parent), shipped
    dry = light.gpumon("experiment", "q2_pairwise", "--dry-run", "--device", "cpu")
    assert dry.returncode == 0, dry.stderr
    cells = [line.split() for line in dry.stdout.splitlines()[1:]]
    assert cells and all(
        cell[4].startswith(str(light.bin / "python")) and cell[5:8] == ["-m", "gpumon", "run"]
        for cell in cells
    ), dry.stdout

    # a bare python in --cmd would be this install's own, which cannot train: refused, nothing started
    bare = light.gpumon(
        "run",
        "--cmd",
        f"python {script}",
        "--headless",
        "--no-nvml",
        "--out",
        str(tmp_path / "bare"),
    )
    assert (
        bare.returncode == 2 and bare.stderr.count("\n") == 1 and not (tmp_path / "bare").exists()
    )
    assert bare.stderr.startswith(
        f"gpumon: error: python in the command is gpumon's own Python ({light.bin / 'python'})"
    )
    assert "--python PATH or GPUMON_PYTHON" in bare.stderr

    lines = light.heavy_imports()
    assert len(lines) >= 11 and all(line.endswith(": ") for line in lines), lines


def _captured(light, out: Path, *args: str) -> Run:
    """``run ARGS`` headless without NVML by the light venv's gpumon (300 s at most), recorded into ``out``, read
    back."""
    argv = ["run", *args, "--headless", "--no-nvml", "--duration", "300", "--out", str(out)]
    done = light.gpumon(*argv, timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run_dir,) = [p for p in out.iterdir() if (p / "run.json").exists()]
    return load_run(run_dir)


def test_builtin_workload_runs_in_another_python(light, training_env):
    """The light venv's gpumon runs fcn with --python naming an environment that has torch but no gpumon."""
    run = _captured(
        light,
        light.root / "with-python",
        "fcn:preset=tiny,steps=40",
        "--python",
        training_env,
        "--device",
        "cpu",
    )
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


def test_auto_probe_counts_steps_of_a_script_in_an_env_without_gpumon(
    light, training_env, tmp_path
):
    """``--cmd`` with the training env's python: the auto-probe finds gpumon's probe on the path it is given."""
    script = tmp_path / "train.py"
    script.write_text(TORCH_SCRIPT)
    run = _captured(light, light.root / "auto-probe", "--cmd", f"{training_env} {script}")
    assert len(run.steps()) == 30, "every optimizer step counted"
