"""``--python`` / ``GPUMON_PYTHON``: which interpreter runs the built-in workloads, checked before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpumon.core.jobs import interpreter
from gpumon.errors import UsageError
from tests.helpers import gpumon


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory) -> str:
    """A real interpreter whose environment has no torch: a bare venv (no pip, no system site-packages)."""
    root = tmp_path_factory.mktemp("bare")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120
    )
    return str(root / "venv" / "bin" / "python")


def _bad_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``gpumon run fcn`` with ``args``: must fail with one line, exit 2, and create no run directory."""
    runs = tmp_path / "runs"
    done = gpumon(
        "run",
        "fcn",
        "--headless",
        "--out",
        str(runs),
        *args,
        env={"GPUMON_PYTHON": "", **(env or {})},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("gpumon: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert not runs.exists()
    return done.stderr


def test_missing_directory_and_non_python_interpreters_are_refused(tmp_path):
    assert "--python /no/such/python: no such file" in _bad_run(
        tmp_path, "--python", "/no/such/python"
    )
    assert "not an executable file" in _bad_run(tmp_path, "--python", str(tmp_path))
    script = tmp_path / "not-python"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    assert "does not run as a Python interpreter" in _bad_run(tmp_path, "--python", str(script))
    assert "GPUMON_PYTHON /no/such/python: no such file" in _bad_run(
        tmp_path, env={"GPUMON_PYTHON": "/no/such/python"}
    )


def test_an_interpreter_without_torch_is_refused_with_what_it_lacks(tmp_path, python_without_torch):
    line = _bad_run(tmp_path, "--python", python_without_torch)
    assert f"--python {python_without_torch} has no torch and numpy" in line
    line = _bad_run(tmp_path, env={"GPUMON_PYTHON": python_without_torch})
    assert f"GPUMON_PYTHON {python_without_torch} has no torch" in line


def test_choose_prefers_the_flag_then_the_environment_then_our_own(
    monkeypatch, python_without_torch
):
    monkeypatch.delenv(interpreter.ENV_PYTHON, raising=False)
    assert interpreter.choose() == interpreter.WorkloadPython(sys.executable, "gpumon's own")
    monkeypatch.setenv(interpreter.ENV_PYTHON, python_without_torch)
    assert interpreter.choose().chosen_by == interpreter.ENV_PYTHON
    assert interpreter.choose(sys.executable) == interpreter.WorkloadPython(
        sys.executable, "--python"
    )
    with pytest.raises(UsageError, match="has no torch"):
        interpreter.require_workload_python()


def test_a_bare_name_is_looked_up_on_path(monkeypatch, python_without_torch):
    monkeypatch.setenv("PATH", str(Path(python_without_torch).parent))
    assert interpreter.choose("python").path == python_without_torch
    with pytest.raises(UsageError, match="no such command on PATH"):
        interpreter.choose("no-such-python-here")


def test_the_childrens_path_holds_the_gpumon_package_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    directory = Path(interpreter.child_path())
    assert directory.is_relative_to(tmp_path)
    assert [p.name for p in directory.iterdir()] == ["gpumon"]
    assert (directory / "gpumon").resolve() == interpreter.PACKAGE_DIR
    assert interpreter.child_path() == str(directory), "made once, then reused"


def test_builtin_workloads_start_with_the_chosen_python(tmp_path, monkeypatch):
    """The request's argv names the interpreter; the workload's own check would refuse a bad one first."""
    from gpumon.frontends.plan import builtin_request

    monkeypatch.delenv(interpreter.ENV_PYTHON, raising=False)
    request = builtin_request("fcn:steps=3", "cpu", sys.executable)
    assert request.argv[:3] == (sys.executable, "-m", "gpumon.workloads")


def test_doctor_names_the_workloads_interpreter_and_its_torch(python_without_torch):
    done = gpumon("doctor", "--json", "--python", python_without_torch, env={"GPUMON_PYTHON": ""})
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "torch")
    assert check["level"] == "warn" and check["detail"]["python"] == python_without_torch
    assert f"workloads' python {python_without_torch} (--python): no torch" in check["summary"]

    done = gpumon("doctor", "--json", env={"GPUMON_PYTHON": ""})
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "torch")
    assert (
        check["detail"]["python"] == sys.executable
        and check["detail"]["chosen_by"] == "gpumon's own"
    )
    if "error" not in check["detail"]:
        assert check["detail"]["torch"] in check["summary"]


def test_experiments_pass_the_chosen_python_to_their_cells(tmp_path, python_without_torch):
    """Profiled cells name it in their command; a Python without torch stops the experiment before any cell."""
    dry = gpumon(
        "experiment",
        "q3_operators",
        "--dry-run",
        "--device",
        "cpu",
        "--python",
        python_without_torch,
        "--out",
        str(tmp_path / "exp"),
        env={"GPUMON_PYTHON": ""},
    )
    assert dry.returncode == 0, dry.stderr
    assert f"--cmd '{python_without_torch} -I -c" in dry.stdout
    real = gpumon(
        "experiment",
        "q2_pairwise",
        "--device",
        "cpu",
        "--python",
        python_without_torch,
        "--out",
        str(tmp_path / "exp2"),
        env={"GPUMON_PYTHON": ""},
    )
    assert real.returncode == 2 and f"--python {python_without_torch} has no torch" in real.stderr
    assert not (tmp_path / "exp2").exists()


def test_the_launch_dialog_checks_the_sessions_python(monkeypatch, python_without_torch):
    from gpumon.tui.screens.launch import build_request

    monkeypatch.delenv(interpreter.ENV_PYTHON, raising=False)
    with pytest.raises(UsageError, match="has no torch"):
        build_request("fcn", "steps=3", "cpu", "", python_without_torch)
    assert build_request("fcn", "steps=3", "cpu", "", sys.executable).argv[0] == sys.executable
    assert build_request("command", "", "cpu", "true", python_without_torch).argv == ("true",)


@pytest.mark.parametrize("shadow", ["an empty gpumon folder", "a gpumon package"])
def test_gpumons_own_children_import_this_gpumon_whatever_their_working_directory_holds(
    tmp_path, shadow
):
    """``python -m gpumon`` puts the working directory first on sys.path: a ``gpumon/`` there shadowed the package in
    the detached runner and in every experiment cell. ``module_argv`` runs the module from gpumon's own directory."""
    from gpumon.experiments.runner.cells import expand
    from gpumon.experiments.runner.cellrun import cell_argv, operator_command
    from tests.core.test_experiments import PAIRWISE, spec_of

    work = tmp_path / "work"
    (work / "gpumon").mkdir(parents=True)
    if shadow == "a gpumon package":
        (work / "gpumon" / "__init__.py").write_text(
            "raise SystemExit('the working directory s gpumon was imported')\n"
        )
    spec = spec_of(PAIRWISE, tmp_path)
    cell = expand(spec, spec.presets["tiny"], "cpu")[0]
    prefix = interpreter.module_argv("gpumon")
    assert (
        cell_argv(cell, tmp_path / "runs", tmp_path / "scratch", interpreter.choose())[
            : len(prefix)
        ]
        == prefix
    )  # every cell's gpumon
    for argv in (
        prefix + ["--version"],
        interpreter.module_argv("gpumon", isolated=True) + ["--version"],
    ):
        done = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("gpumon "), done.stderr
    profiled = operator_command(
        cell, "A", "fcn:preset=tiny", tmp_path / "scratch", interpreter.choose()
    )
    assert interpreter.RUN_MODULE in profiled and " -I " in profiled
