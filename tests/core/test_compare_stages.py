"""compare's stages: distribution tests keyed by (slot, metric), and the tests' samples capped (and said so)."""

from __future__ import annotations

import pytest

from gpumon.analysis import compare as compare_module
from gpumon.analysis import stats_helper
from gpumon.analysis.compare import compare
from gpumon.core.store.trace import load_run
from tests.tracegen import Job, write_run


def _pair(root):
    a = write_run(
        root / "a",
        [Job(slot="A", phases=((12.0, 0.02),), noise=0.2, copy_bytes=1 << 20, copy_s=0.004)],
    )
    b = write_run(
        root / "b",
        [Job(slot="B", spec="fcn:preset=small", phases=((12.0, 0.05),), noise=0.2, seed=3)],
    )
    shared = write_run(
        root / "s",
        [
            Job(
                slot="A",
                phases=((12.0, 0.03),),
                noise=0.2,
                seed=1,
                copy_bytes=1 << 20,
                copy_s=0.008,
            ),
            Job(slot="B", spec="fcn:preset=small", phases=((12.0, 0.08),), noise=0.2, seed=2),
        ],
    )
    return [load_run(a), load_run(b)], [load_run(shared)]


def test_each_jobs_distributions_are_its_own(tmp_path):
    exclusive, shared = _pair(tmp_path)
    result = compare(exclusive, shared, tests=stats_helper.Tests(helper=False))
    a, b = result.workload("A"), result.workload("B")
    assert "copy_bandwidth" in {d.metric for d in a.distributions}
    assert "copy_bandwidth" not in {d.metric for d in b.distributions}, "B copies nothing"
    for w in (a, b):
        for d in w.distributions:
            xs, ss = result.samples[(w.slot, d.metric)]
            assert (d.n_exclusive, d.n_shared) == (len(xs), len(ss))
    assert not any("at most" in note for note in result.notes)


def test_the_tests_samples_are_capped_and_said_so(tmp_path, monkeypatch: pytest.MonkeyPatch):
    exclusive, shared = _pair(tmp_path)
    monkeypatch.setattr(compare_module, "MAX_TEST_SAMPLES", 50)
    result = compare(exclusive, shared, tests=stats_helper.Tests(helper=False))
    copies = next(d for d in result.workload("A").distributions if d.metric == "copy_bandwidth")
    assert copies.n_exclusive <= 50 and copies.n_shared <= 50
    (note,) = [n for n in result.notes if n.startswith("Distribution tests on at most")]
    assert "A copy_bandwidth" in note
