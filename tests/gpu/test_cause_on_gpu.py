"""On a real NVIDIA GPU: the cause of the slowdown of two real pairs (the issue's table, rows 1 and 2).

Marked ``gpu``: skipped with the reason where there is no GPU with CUDA torch (tests/conftest.py). Each capture is a real
``gpumon run --headless`` of the paper preset; the pair B starts 5 s after A.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpumon.analysis.compare import compare
from gpumon.core.store.trace import load_run
from tests.helpers import gpumon

pytestmark = pytest.mark.gpu
SAVED = re.compile(r"run saved to (\S+)")


def capture(out: Path, *specs: str, seconds: int = 20) -> Path:
    done = gpumon("run", *specs, "--headless", "--device", "cuda", "--duration", str(seconds), "--stagger",
                  "5" if len(specs) > 1 else "0", "--out", str(out), timeout=seconds + 240)
    assert done.returncode == 0, done.stderr
    return Path(SAVED.search(done.stderr + done.stdout).group(1))


@pytest.mark.parametrize(("job", "cause"), [("h2d:preset=paper", "link"), ("fcn:preset=paper", "gpu")])
def test_a_job_beside_itself_slows_for_the_expected_reason(tmp_path: Path, job: str, cause: str) -> None:
    alone = capture(tmp_path, job)
    pair = capture(tmp_path, job, job, seconds=30)
    c = compare([load_run(alone)], [load_run(pair)])
    for w in c.workloads:
        assert w.slowdown.value > 1.3, w.slowdown
        assert w.why.cause == cause, w.why
