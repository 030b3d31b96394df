"""``--stagger``: each job keeps its slot; the second starts at the stagger or not at all (issue 15, defect 1)."""

from __future__ import annotations

import json
import re

from gpumon.core.store.trace import load_run
from tests.helpers import gpumon, only_run

STAGGER_S = 10


def _run(tmp_path, first: str, second: str, *extra: str):
    return gpumon(
        "run",
        "--cmd",
        first,
        "--cmd",
        second,
        "--stagger",
        str(STAGGER_S),
        "--headless",
        "--no-nvml",
        "--out",
        str(tmp_path),
        *extra,
    )


def test_a_first_job_that_fails_early_is_recorded_in_its_slot_and_the_second_never_starts(tmp_path):
    result = _run(tmp_path, "bash -c 'sleep 1; exit 3'", "sleep 2")

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    failure = [
        line for line in result.stderr.splitlines() if line.startswith("gpumon: run failed:")
    ]
    assert len(failure) == 1, result.stderr
    assert "workload A (cmd:bash -c 'sleep 1; exit 3') exited with status 3" in failure[0]
    assert "workload B not started" in failure[0]

    run = load_run(only_run(tmp_path))
    a, b = (next(w for w in run.workloads if w.slot == slot) for slot in ("A", "B"))
    assert a.spec == "cmd:bash -c 'sleep 1; exit 3'"
    assert a.exit_status == 3 and a.state == "exited"
    assert a.stop_t < STAGGER_S
    assert b.spec == "cmd:sleep 2"
    assert b.start_t is None or b.start_t >= STAGGER_S
    assert b.state == "not started" and "A exited with status 3" in b.reason
    assert run.meta.mode == "shared", "a planned pair is not an exclusive run"
    assert run.meta.status == "failed"  # A failed (its own status 3): the run says so


def test_a_first_job_that_ends_well_early_leaves_the_second_to_start_at_the_stagger_in_its_own_slot(
    tmp_path,
):
    result = _run(tmp_path, "sleep 0.5", "sleep 0.5", "--json")

    assert result.returncode == 0, result.stderr
    run = load_run(only_run(tmp_path))
    a, b = (next(w for w in run.workloads if w.slot == slot) for slot in ("A", "B"))
    assert (a.spec, a.exit_status) == ("cmd:sleep 0.5", 0) and a.stop_t < STAGGER_S
    assert b.spec == "cmd:sleep 0.5" and b.exit_status == 0
    assert b.start_t >= STAGGER_S
    assert run.meta.mode == "shared"
    assert json.loads(result.stdout.splitlines()[-1])["status"] == 0


def test_a_first_job_that_cannot_be_started_is_one_line_exit_1_and_the_second_never_starts(
    tmp_path,
):
    program = tmp_path / "train"
    program.write_bytes(b"\x00\x01 not an executable format\n")
    program.chmod(0o755)
    result = _run(tmp_path / "runs", str(program), "sleep 2")

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    failure = [
        line for line in result.stderr.splitlines() if line.startswith("gpumon: run failed:")
    ]
    assert len(failure) == 1 and failure[0].startswith("gpumon: run failed: workload A (cmd:"), (
        result.stderr
    )
    # the time it failed at is the box's, not the test's: any "at N.N s" (0.1 s on a loaded box)
    assert re.search(
        rf"\) could not start: cannot start {re.escape(str(program))}: Exec format error "
        r"at \d+\.\d s; workload B not started$",
        failure[0],
    ), result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("gpumon: workload A")]
    assert len(said) == 1 and said[0].endswith(
        f"could not start: cannot start {program}: Exec format error"
    ), said
    assert any(
        line.startswith(
            "gpumon: workload B not started (cmd:sleep 2): A could not start: cannot start"
        )
        for line in result.stderr.splitlines()
    ), result.stderr
    run = load_run(only_run(tmp_path / "runs"))
    a, b = (run.meta.workload(slot) for slot in ("A", "B"))
    assert a is not None and a.state == "failed" and a.pid is None
    assert (
        b is not None
        and b.state == "not started"
        and b.reason.startswith("A could not start: cannot start")
    )
