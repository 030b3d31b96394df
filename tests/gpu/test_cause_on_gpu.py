"""On a real NVIDIA GPU: the cause of the slowdown of two real pairs (the issue's table, rows 1 and 2).

Marked ``gpu``: skipped with the reason where there is no GPU with CUDA torch (tests/conftest.py). Each capture is a real
``gpumon run --headless`` of the paper preset; the pair B starts 5 s after A.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gpumon.analysis.compare import compare
from gpumon.core.store.trace import load_run
from tests.helpers import only_run, run_until, steps_span

pytestmark = pytest.mark.gpu


def capture(out: Path, *specs: str, seconds: int = 15) -> Path:
    """A capture stopped with Ctrl-C once the last job's post-warm-up steps span ``seconds`` (B: beside A)."""
    last = "B" if len(specs) > 1 else "A"
    done = run_until(
        [*specs, "--headless", "--device", "cuda", "--stagger", "5" if len(specs) > 1 else "0"],
        out,
        enough=lambda: steps_span(out, last)[1] >= seconds,
        what=f"{seconds} s of {last}'s steps",
    )
    assert done.returncode == 128 + signal.SIGINT, done.stderr
    return only_run(out)


@pytest.mark.parametrize(
    ("job", "cause"), [("h2d:preset=paper", "link"), ("fcn:preset=paper", "gpu")]
)
def test_a_job_beside_itself_slows_for_the_expected_reason(
    tmp_path: Path, job: str, cause: str
) -> None:
    alone = capture(tmp_path / "alone", job)
    pair = capture(tmp_path / "pair", job, job, seconds=20)
    c = compare([load_run(alone)], [load_run(pair)])
    for w in c.workloads:
        assert w.slowdown.value > 1.3, w.slowdown
        assert w.why.cause == cause, w.why
