"""The verdict in the user's words (core/interference/sentence.py)."""

from __future__ import annotations

import math

import pytest

from gpumon.core.interference.attribution import GPU, UNKNOWN, Attribution
from gpumon.core.interference.sentence import JobWords, job_words, labels, sentence

GPU_WAIT = Attribution("fcn", GPU, {GPU: 0.9}, 0.01, "mostly waiting for the GPU", "")


def test_the_issue_example_reads_as_written() -> None:
    jobs = [JobWords("lstm", "fcn", 1.03), JobWords("fcn", "lstm", 2.4, GPU_WAIT)]
    assert sentence("pays", 1.39, "1.39 [1.35, 1.43]", jobs) == (
        "sharing pays: together they do 1.39× the work of one alone (STP 1.39 [1.35, 1.43]); "
        "lstm barely notices fcn (r 1.03); fcn runs 2.4× slower, mostly waiting for the GPU"
    )


@pytest.mark.parametrize(
    "r, words",
    [
        (0.9499, "lstm runs faster beside fcn (r 0.95)"),
        (0.95, "lstm barely notices fcn (r 0.95)"),
        (1.0499, "lstm barely notices fcn (r 1.05)"),
        (1.05, "lstm runs 1.05× slower, mostly waiting for the GPU"),
        (
            1.19,
            "lstm runs 1.19× slower, mostly waiting for the GPU",
        ),  # issue 34: BARELY = 1.2 called it "barely notices"
        (1.5, "lstm runs 1.5× slower, mostly waiting for the GPU"),
    ],
)
def test_a_slowdown_is_called_by_its_band_at_the_edges(r: float, words: str) -> None:
    """Within 5 % of its speed alone a job barely notices the other; from 1.05 it runs slower, below 0.95 faster."""
    assert job_words(JobWords("lstm", "fcn", r, GPU_WAIT)) == words


def test_losing_undecided_and_live_heads() -> None:
    assert sentence("loses", 0.91, "0.91 [0.90, 0.92]", []).startswith(
        "sharing loses: together they do only 0.91×"
    )
    assert "straddles 1" in sentence("cannot tell", 1.01, "1.01 [0.97, 1.05]", [])
    assert sentence("cannot tell", 1.0, "1.00", [], interval=False).startswith(
        "sharing breaks even"
    )
    assert sentence("cannot tell", math.nan, "n/a", []).startswith(
        "cannot tell whether sharing pays: STP needs"
    )


def test_jobs_that_cannot_be_explained_or_have_no_baseline() -> None:
    no_nvml = Attribution("fcn", UNKNOWN, {}, 0.01, "cannot tell: no NVML data", "no NVML data")
    text = sentence(
        "pays",
        1.2,
        "1.20",
        [JobWords("fcn", "gemm", 2.0, no_nvml), JobWords("gemm", "fcn", math.nan)],
    )
    assert "fcn runs 2.0× slower (cannot tell: no NVML data)" in text
    assert "gemm: no exclusive rate, so no slowdown" in text
    assert "runs faster beside" in sentence("pays", 2.1, "2.10", [JobWords("a", "b", 0.9)])


def test_labels_tell_two_copies_of_one_job_apart() -> None:
    assert labels(["fcn", "lstm"], ["A", "B"]) == ["fcn", "lstm"]
    assert labels(["fcn", "fcn"], ["A", "B"]) == ["fcn A", "fcn B"]
