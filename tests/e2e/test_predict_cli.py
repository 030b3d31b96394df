"""``gpumon predict`` end to end on the CPU: real captures of pinned gemm jobs, and bad input from the CLI."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.helpers import gpumon, only_run, run_until, solo_core_share, solo_cores_busy, steps_span

H100 = Path(__file__).resolve().parents[1] / "data" / "h100_q4"


def _capture(root: Path, cpus: int | None) -> Path:
    """A solo gemm stopped once its post-warm-up steps span 2 s (as long as that takes this machine)."""
    out = root / f"cpu{cpus}"
    spec = "gemm:threads=1" if cpus is None else f"gemm:cpus={cpus},threads=1"
    done = run_until(
        [spec, "--headless"], out, lambda: _solo_enough(out), what="2 s of the gemm's steps"
    )
    assert done.returncode == 128 + signal.SIGINT, done.stderr
    return only_run(out)


def _solo_enough(out: Path) -> bool:
    steps, span = steps_span(out, "A")
    return steps >= 10 and span >= 2.0


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """One short solo capture of a single-threaded gemm pinned to core 0, one pinned to core 1."""
    root = tmp_path_factory.mktemp("pinned")
    return {cpus: _capture(root, cpus) for cpus in (0, 1)}


def _slowdowns(*runs: str) -> list[float]:
    done = gpumon("predict", *[a for r in runs for a in ("--exclusive", r)], "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["share"] == "cpu"
    return [data["workloads"][s]["slowdown"]["estimate"] for s in ("A", "B")]


def test_same_core_halves_both_and_different_cores_do_not_interfere(
    pinned: dict[int, Path],
) -> None:
    same = _slowdowns(str(pinned[0]))  # one job given: beside a copy of itself, on its own core
    # r = 2 on an idle core; 1 + the copy's share where other processes took part of core 0 (a busy box)
    physics = 1 + solo_core_share(pinned[0])
    assert all(abs(r - physics) <= 0.1 for r in same), (same, physics)
    apart = _slowdowns(str(pinned[0]), str(pinned[1]))
    assert all(abs(r - 1) <= 0.25 for r in apart), apart


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores: one for each copy")
def test_unpinned_single_threaded_jobs_fit_on_a_box_of_two_cores_or_more(tmp_path: Path) -> None:
    unpinned = _capture(tmp_path, None)  # affinity: every core; it keeps one busy
    share = solo_core_share(unpinned) / (
        os.cpu_count() or 1
    )  # its CPU over the cores it may run on
    done = gpumon("predict", "--exclusive", str(unpinned))
    fits = (
        all(abs(r - 1) <= 0.1 for r in _slowdowns(str(unpinned)))
        and "their cores have room for both" in done.stdout
    )
    turns = (
        all(abs(r - (1 + share)) <= 0.1 for r in _slowdowns(str(unpinned)))
        and "take turns" in done.stdout
        and "cores were full with other work" in done.stdout
    )
    busy = solo_cores_busy(unpinned)
    # The box had a free core for a copy of it: neither waits. Other work filled the cores (a loaded box): the copy
    # takes a turn on them, r = 1 + its share of them. Within a few points of "full" (95 %) either reading is right.
    expected = [fits] if busy < 0.92 else [turns] if busy > 0.98 else [fits, turns]
    assert any(expected) and "pinned" not in done.stdout, (busy, share, done.stdout)


def test_text_names_the_physics(pinned: dict[int, Path]) -> None:
    done = gpumon("predict", "--exclusive", str(pinned[0]), "--exclusive", str(pinned[1]))
    assert done.returncode == 0, done.stderr
    assert "pinned to different cores" in done.stdout and "sharing pays" in done.stdout


@pytest.mark.parametrize(
    "runs, message",
    [
        (("x-fcn", "s-gemm+fcn"), "not an exclusive run"),
        ((), "needs --exclusive"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(runs: tuple[str, ...], message: str) -> None:
    done = gpumon("predict", *[a for r in runs for a in ("--exclusive", str(H100 / r))])
    assert done.returncode == 2
    assert done.stderr.startswith("gpumon: error:") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_cpu_run_beside_a_cuda_run_is_refused(pinned: dict[int, Path]) -> None:
    done = gpumon("predict", "--exclusive", str(pinned[0]), "--exclusive", str(H100 / "x-gemm"))
    assert done.returncode == 2 and "different devices" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
