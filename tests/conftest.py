"""Suite-wide hooks: tests marked ``gpu`` run only where an NVIDIA GPU and a CUDA torch are usable; ``no_gpu``,
the one way for a test to say "on a box without a GPU"."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import no_gpu_environment

# Rendezvous files of every test (probes, live runs) go to a private directory of this test session,
# never to the user's own $XDG_RUNTIME_DIR/gpumon; subprocesses inherit it.
SESSION_DIRS = (
    tempfile.mkdtemp(prefix="gpumon-test-rt-"),
    tempfile.mkdtemp(prefix="gpumon-test-cache-"),
)
os.environ["GPUMON_RUNTIME_DIR"] = os.path.join(SESSION_DIRS[0], "gpumon")
# What gpumon derives from the runs it reads (columnar copies, summaries) goes to this session's own cache,
# never to the user's ~/.cache/gpumon.
os.environ["GPUMON_CACHE_DIR"] = SESSION_DIRS[1]
# Side by side (pytest-xdist, the README's test command), each worker has its own folder of runs under the one the
# suite was given: a test that reads "the newest run" there never finds another worker's.
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("GPUMON_RUNS"):
    os.environ["GPUMON_RUNS"] = os.path.join(
        os.environ["GPUMON_RUNS"], os.environ["PYTEST_XDIST_WORKER"]
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's own folders go with it (they were left in /tmp, two a run)."""
    for folder in SESSION_DIRS:
        shutil.rmtree(folder, ignore_errors=True)


# In a child: the test process imports neither torch nor the real libnvidia-ml.
GPU_PROBE = """
import json
from gpumon.checks.doctor import OK, check_nvml, check_torch
nvml = check_nvml(None)[0]
torch = check_torch()
print(json.dumps({"nvml": nvml.name == "gpu", "torch": torch.level == OK,
                  "why": [c.summary for c in (nvml, torch) if c.level != OK or c.name == "nvml"]}))
"""


@functools.lru_cache(maxsize=1)
def gpu_missing() -> str | None:
    """Why the ``gpu`` tests cannot run here, or None when they can."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", GPU_PROBE], capture_output=True, text=True, timeout=180
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return "needs an NVIDIA GPU with CUDA torch: the check for one did not finish"
    if found["nvml"] and found["torch"]:
        return None
    return "needs an NVIDIA GPU with CUDA torch; here: " + "; ".join(found["why"])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = gpu_missing()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def no_gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a box without a GPU for subprocesses, even on a box that has one (every GPU box has
    libnvidia-ml where the dynamic linker finds it): a test that assumes no GPU runs its subprocesses in this
    environment, never in its own (tests/helpers.py, no_gpu_environment)."""
    env = no_gpu_environment(Path(tmp_path_factory.mktemp("no-gpu")))
    if env is None:
        pytest.skip(
            "a real libnvidia-ml is installed and there is no C compiler to build the fake that hides it"
        )
    return env
