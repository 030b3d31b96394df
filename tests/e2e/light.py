"""The light install, shared by the tests that use it (``tests/e2e/conftest.py``: one per test session): a wheel of
this tree installed without extras into a fresh venv (no torch there), and a "training environment" (torch and
numpy, no gpumon) for its jobs.

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


class LightVenv:
    """A fresh venv with the wheel installed without extras, and a clean environment to run it in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "venv" / "bin"
        self.python = str(self.bin / "python")
        self.gpumon_exe = str(self.bin / "gpumon")
        self.runs = root / "runs"
        self.heavy_log = root / "heavy.log"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GPUMON_PYTHON")
        }
        env.update(
            GPUMON_RUNS=str(self.runs),
            XDG_CACHE_HOME=str(root / "cache"),
            NO_COLOR="1",
            GPUMON_DATA_DIR=str(root / "data"),
            HEAVY_LOG=str(self.heavy_log),
        )
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        self.env = env

    def gpumon(
        self, *args: str, timeout: float = 180, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.gpumon_exe, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env or self.env,
            cwd=self.root,
        )

    def heavy_imports(self) -> list[str]:
        """One line per gpumon command run so far: which of HEAVY it had imported at exit."""
        return self.heavy_log.read_text().splitlines() if self.heavy_log.exists() else []


def run_ok(argv: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    """Run to completion in ``cwd`` (never the checkout: ``python -c`` would import gpumon from there)."""
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, cwd=cwd, **kw
    )
    assert done.returncode == 0, f"{argv[:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done


def install_light(root: Path) -> LightVenv:
    """Build a wheel from a copy of the tree (no build/ left in the checkout), install it without extras."""
    source = root / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in (
        "gpumon",
        "experiments",
    ):  # experiments/: the shipped specs, into the wheel's gpumon/
        shutil.copytree(
            REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    wheels = root / "wheels"
    run_ok(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(wheels),
            str(source),
        ],
        root,
    )
    (wheel,) = wheels.glob("gpumon-*.whl")
    # this test's pip installs into a venv without one; no .pyc compiling (a third of the time)
    run_ok([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], root)
    venv = LightVenv(root)
    run_ok(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            venv.python,
            "install",
            "--quiet",
            "--no-compile",
            str(wheel),
        ],
        root,
        env=venv.env,
    )
    site = run_ok(
        [venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        root,
        env=venv.env,
    )
    (Path(site.stdout.strip()) / "gpumon_watch_heavy.pth").write_text("import gpumon_watch_heavy\n")
    (Path(site.stdout.strip()) / "gpumon_watch_heavy.py").write_text(WATCH_HEAVY)
    return venv


def make_training_env(root: Path, env: dict[str, str]) -> str:
    """A "training environment" at ``root``: torch and numpy (those of this test's Python, via a .pth line), no
    gpumon; returns its python.

    Directories named in a .pth line get no .pth processing of their own, so this test's editable
    gpumon install does not come along.
    """
    run_ok([sys.executable, "-m", "venv", "--without-pip", str(root)], root.parent)
    python = str(root / "bin" / "python")
    site = run_ok(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root.parent
    ).stdout
    # where this Python finds torch and numpy (its own site-packages, or a base one under a --system-site-packages venv)
    ours = {str(Path(importlib.util.find_spec(m).origin).parents[1]) for m in ("torch", "numpy")}
    (Path(site.strip()) / "training_env.pth").write_text("\n".join(sorted(ours)) + "\n")
    has = "import importlib.util as u; print([m for m in ('torch', 'numpy', 'gpumon') if u.find_spec(m)])"
    assert run_ok([python, "-c", has], root.parent, env=env).stdout.strip() == "['torch', 'numpy']"
    return python
