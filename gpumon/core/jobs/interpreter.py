"""Which Python runs the built-in workloads (``--python`` / ``$GPUMON_PYTHON``), and what it needs.

The monitor never imports torch; the workloads run in a child interpreter, gpumon's own by default
or the user's training environment. That environment needs no gpumon install: the child gets a
directory holding only the ``gpumon`` package (``child_path``) on its PYTHONPATH, so none of the
monitor's other packages (pandas, textual, ...) shadow the user's. Stdlib only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpumon.errors import EnvironmentFailure, UsageError
from gpumon.extras import TORCH, install_hint, installed

ENV_PYTHON = "GPUMON_PYTHON"
NEEDED = ("torch", "numpy")
MIN_VERSION = (3, 10)
CHECK_TIMEOUT_S = 60.0
BARE_PYTHON = re.compile(r"python(3(\.\d+)?)?")  # a command's program that names no environment
PACKAGE_DIR = Path(__file__).resolve().parents[2]

# python [-I] -c RUN_MODULE DIR MODULE ARGS...: MODULE run as ``python -m MODULE ARGS`` runs it, but with DIR
# first on sys.path and never the working directory (which ``-m`` and ``-c`` put there: a ``gpumon/`` folder in it
# would shadow the package). Python 3.11's ``-P`` does the same, but gpumon runs on 3.10 too.
RUN_MODULE = (
    "import runpy,sys;sys.path[:]=[sys.argv.pop(1),*(p for p in sys.path if p)];"
    'runpy.run_module(sys.argv.pop(1),None,"__main__",True)'
)
# Run in the other interpreter: which of the modules named in argv it lacks (found, not imported).
FIND_MODULES = (
    "import importlib.util, json, sys; "
    "print(json.dumps({'version': list(sys.version_info[:3]), "
    "'missing': [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]}))"
)


@dataclass(frozen=True)
class WorkloadPython:
    """The interpreter the built-in workloads use, and what chose it."""

    path: str
    chosen_by: str

    @property
    def own(self) -> bool:
        return self.chosen_by == "gpumon's own"


def choose(explicit: str | None = None) -> WorkloadPython:
    """``--python`` if given, else ``$GPUMON_PYTHON``, else the interpreter gpumon runs in."""
    if explicit:
        return WorkloadPython(_absolute(explicit, "--python"), "--python")
    from_env = os.environ.get(ENV_PYTHON, "").strip()
    if from_env:
        return WorkloadPython(_absolute(from_env, ENV_PYTHON), ENV_PYTHON)
    return WorkloadPython(sys.executable, "gpumon's own")


def _absolute(text: str, source: str) -> str:
    """An interpreter path made absolute (a bare name is looked up on PATH); UsageError if unusable."""
    path = Path(text).expanduser()
    if os.sep not in text:
        found = shutil.which(text)
        if found is None:
            raise UsageError(f"{source} {text}: no such command on PATH")
        path = Path(found)
    if not path.exists():
        raise UsageError(f"{source} {text}: no such file")
    if path.is_dir() or not os.access(path, os.X_OK):
        raise UsageError(f"{source} {text}: not an executable file")
    return str(path.absolute())


def missing_modules(python: WorkloadPython) -> list[str]:
    """Which of NEEDED the interpreter lacks (UsageError if it is not a usable Python at all)."""
    if python.own:
        return [m for m in NEEDED if not installed(m)]
    answer = _ask(python.path)
    if answer is None:
        raise UsageError(f"{python.chosen_by} {python.path} does not run as a Python interpreter")
    version, missing = answer
    if tuple(version[:2]) < MIN_VERSION:
        shown = ".".join(str(v) for v in version)
        wanted = ".".join(str(v) for v in MIN_VERSION)
        raise UsageError(
            f"{python.chosen_by} {python.path} is Python {shown}; the workloads need Python >= {wanted}"
        )
    return list(missing)


@functools.lru_cache(maxsize=8)
def _ask(path: str) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    """(version, missing modules) as the interpreter at ``path`` reports them; None if it cannot say."""
    try:
        done = subprocess.run(
            [path, "-c", FIND_MODULES, *NEEDED],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        return tuple(answer["version"]), tuple(answer["missing"])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, KeyError, TypeError):
        return None


def require_workload_python(explicit: str | None = None) -> WorkloadPython:
    """The workloads' interpreter, checked to have torch and numpy; one-line UsageError otherwise."""
    return checked(choose(explicit))


def checked(python: WorkloadPython) -> WorkloadPython:
    """``python``, checked to have torch and numpy; one-line UsageError otherwise."""
    missing = missing_modules(python)
    if not missing:
        return python
    lacking = " and ".join(missing)
    if python.own:
        raise UsageError(
            f"the built-in workloads need {lacking}, not installed in gpumon's Python ({python.path}): "
            f"{install_hint(TORCH)}, or --python PATH (or {ENV_PYTHON}) naming the python of an environment that has torch"
        )
    raise UsageError(
        f"{python.chosen_by} {python.path} has no {lacking}: name the python of your training environment, "
        f"or pip install {' '.join(missing)} there"
    )


def command_argv(argv: tuple[str, ...], explicit: str | None = None) -> tuple[str, ...]:
    """A user's command (``--cmd``, ``wrap``) with a bare ``python``/``python3``/``python3.N`` as the workloads' Python.

    With ``--python`` or ``$GPUMON_PYTHON`` a bare python means that interpreter, the one that trains. Without
    either it is the ``python`` on PATH, unless that is gpumon's own environment and it has no torch (a light
    install, activated): then it would silently be the one interpreter that cannot train, and is refused in one line.
    """
    if not argv or not BARE_PYTHON.fullmatch(argv[0]):
        return argv
    python = choose(explicit)
    if not python.own:
        return (python.path, *argv[1:])
    found = shutil.which(argv[0])
    if (
        found is not None
        and Path(found).parent.resolve() == Path(sys.executable).parent.resolve()
        and "torch" in missing_modules(python)
    ):
        raise UsageError(
            f"{argv[0]} in the command is gpumon's own Python ({found}), which has no torch: name your training "
            f"environment's with --python PATH or {ENV_PYTHON} (a bare {argv[0]} then means it), or give the full "
            f"path of the Python to run"
        )
    return argv


def child_path() -> str:
    """A directory holding only a link to this ``gpumon`` package, for the children's PYTHONPATH."""
    digest = hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    directory = cache / "gpumon" / "pythonpath" / digest
    link = directory / "gpumon"
    try:
        if link.is_symlink() and os.readlink(link) == str(PACKAGE_DIR):
            return str(directory)
        directory.mkdir(parents=True, exist_ok=True)
        scratch = directory / f".gpumon.{os.getpid()}"
        scratch.unlink(missing_ok=True)
        scratch.symlink_to(PACKAGE_DIR, target_is_directory=True)
        os.replace(scratch, link)
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot prepare the workloads' path in {directory}: {exc.strerror or exc}"
        ) from None
    return str(directory)


def module_argv(module: str, python: str | None = None, isolated: bool = False) -> list[str]:
    """The command line of ``python -m MODULE`` in ``python`` (gpumon's own by default) that imports this very gpumon,
    whatever the child's working directory holds (``RUN_MODULE`` with ``child_path``); ``isolated``: with ``-I``."""
    return [
        python or sys.executable,
        *(["-I"] if isolated else []),
        "-c",
        RUN_MODULE,
        child_path(),
        module,
    ]
