"""``gpumon run --detach``: a run whose jobs have already ended is never said to be recording."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.frontends.detach import detached_words


def _run(tmp_path: Path, meta: object) -> Path:
    run_dir = tmp_path / "20260101-000000-x"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(meta))
    return run_dir


def test_a_live_run_is_said_to_record(tmp_path):
    run_dir = _run(
        tmp_path, {"status": "recording", "workloads": [{"slot": "A", "state": "running"}]}
    )
    words = detached_words(run_dir, 4242, ended=False)
    assert f"runner pid 4242 records to {run_dir}" in words and "gpumon attach" in words


def test_a_run_whose_jobs_exited_is_said_to_have_ended(tmp_path):
    exited = _run(
        tmp_path, {"status": "recording", "workloads": [{"slot": "A", "state": "exited"}]}
    )
    for words in (detached_words(exited, 1, ended=False), detached_words(exited, 1, ended=True)):
        assert "has already ended" in words and "records to" not in words
    complete = _run(tmp_path, {"status": "complete", "workloads": []})
    assert "has already ended" in detached_words(complete, 1, ended=False)


def test_a_runner_that_has_exited_is_never_said_to_record(tmp_path):
    run_dir = _run(
        tmp_path, {"status": "recording", "workloads": [{"slot": "A", "state": "running"}]}
    )
    assert "records to" not in detached_words(run_dir, 1, ended=True)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(
    st.binary(max_size=300)
    | st.recursive(st.none() | st.text(max_size=8), st.lists, max_leaves=20).map(
        lambda v: json.dumps(v).encode()
    )
)
def test_any_run_json_gives_words_and_no_control_character(tmp_path, content):
    run_dir = tmp_path / "r\x1b[2Jun"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "run.json").write_bytes(content)
    words = detached_words(run_dir, 1, ended=False)
    assert all(line.isprintable() for line in words.split("\n"))
