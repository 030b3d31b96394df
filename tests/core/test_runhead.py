"""``RunHead``: the fields of run.json a row of ``gpumon runs`` shows, read by RunMeta's own checks and nothing else.

A run.json RunMeta reads gives the same values in RunHead; one RunHead refuses, RunMeta refuses too; the file's
own refusals (not JSON, a non-finite number anywhere, not a plain file, a link, too big) are the same; and a listing
of runs whose row fields are wrong lists them as damaged with the reason RunMeta would give.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.core.records import jsonfields as jf
from gpumon.core.records.decode import Refused
from gpumon.core.records.enums import RunStatus
from gpumon.core.store import runmeta
from gpumon.core.store.listing import listing
from gpumon.core.store.runmeta import MAX_BYTES, RunHead, RunMeta, WorkloadHead, WorkloadRecord
from gpumon.core.store.runrecord import DamagedRun, RunSummary, TraceError, read_head, read_meta
from tests.tracegen import Job, write_run

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(min_value=-1e9, max_value=1e9)
    | st.text(max_size=6)
    | st.sampled_from([m.value for m in RunStatus] + ["mps", "timeslice"])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
RUN_KEYS = [jf.key_of(f) for f in dataclasses.fields(RunMeta)]
JOB_KEYS = [jf.key_of(f) for f in dataclasses.fields(WorkloadRecord)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Any]:
    """A run.json as the recorder writes it (with its summary, its runner's place empty)."""
    run_dir = write_run(
        tmp_path_factory.mktemp("head") / "r",
        [Job(slot="A", phases=((2.0, 0.1),)), Job(slot="B", phases=((3.0, 0.2),), pid=7)],
    )
    return json.loads((run_dir / "run.json").read_text())


@pytest.mark.parametrize(
    ("head", "whole"), [(RunHead, RunMeta), (WorkloadHead, WorkloadRecord)], ids=["run", "job"]
)
def test_each_field_is_read_by_the_whole_records_own_check(head, whole):
    fields = {f.name: f for f in dataclasses.fields(whole)}
    for f in dataclasses.fields(head):
        if f.name == "workloads":  # the same list check, its entries read as WorkloadHead
            continue
        same = fields[f.name]
        assert f.metadata["check"] is same.metadata["check"], f.name
        assert jf.key_of(f) == jf.key_of(same) and f.default == same.default, f.name
        assert f.default_factory == same.default_factory, f.name


def _outcome(kind: type, data: object) -> tuple[str, Any]:
    try:
        return "read", kind.from_json(data) if kind is RunMeta else runmeta._decoded(kind, data)
    except Refused as exc:
        return "refused", str(exc)


def _shown(meta: RunMeta | RunHead) -> tuple:
    """What a row reads of a run.json's record."""
    jobs = tuple((w.slot, w.spec, w.meta) for w in meta.workloads)
    return (meta.label, meta.mode, meta.status, meta.duration_s, meta.device, jobs, meta.share)


def _same_values(a: tuple, b: tuple) -> bool:
    return all(x == y or (x != x and y != y) for x, y in zip(a, b))  # NaN is itself here


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.data(),
    changes=st.dictionaries(st.sampled_from(RUN_KEYS + ["schema"]), JSON, max_size=3),
    job_changes=st.dictionaries(st.sampled_from(JOB_KEYS), JSON, max_size=2),
)
def test_a_run_json_reads_the_same_in_the_head_or_is_refused_by_both(
    recorded, data, changes, job_changes
):
    changed = json.loads(json.dumps(recorded))
    changed.update(changes)
    if isinstance(changed.get("workloads"), list) and changed["workloads"]:
        at = data.draw(st.integers(0, len(changed["workloads"]) - 1))
        if isinstance(changed["workloads"][at], dict):
            changed["workloads"][at].update(job_changes)
    head, whole = _outcome(RunHead, changed), _outcome(RunMeta, changed)
    if head[0] == "refused":
        assert whole[0] == "refused", (changed, head)
    if whole[0] == "read":
        assert head[0] == "read", (changed, head)
        assert _same_values(_shown(head[1]), _shown(whole[1]))
        assert head[1].runner == whole[1].runner and head[1].summary == whole[1].summary


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'{"schema": 1, "workloads": [], "host": {"cpus": 1e400}}', "out of range"),
        (b'{"schema": 1, "workloads": [], "versions": NaN}', "not a number gpumon records"),
        (b'{"schema": 1, "workloads": [], "label": "x"', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
        (b'{"schema": 1}', "no workloads list"),
        (b'{"schema": 2, "workloads": []}', "not a gpumon run of schema 1"),
    ],
)
def test_what_the_file_itself_refuses_the_head_refuses_alike(tmp_path, content, said):
    (tmp_path / "run.json").write_bytes(content)
    with pytest.raises(TraceError) as head:
        read_head(tmp_path)
    with pytest.raises(TraceError) as whole:
        read_meta(tmp_path)
    assert said in str(head.value) and str(head.value) == str(whole.value)


def test_a_link_a_folder_or_an_oversized_run_json_is_refused_by_the_head_as_by_the_whole(
    tmp_path, recorded
):
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(recorded))
    for name, make in (
        ("link", lambda p: p.symlink_to(target)),
        ("folder", lambda p: p.mkdir()),
        ("big", lambda p: p.write_text(json.dumps({**recorded, "pad": "x" * MAX_BYTES}))),
    ):
        run_dir = tmp_path / name
        run_dir.mkdir()
        make(run_dir / "run.json")
        with pytest.raises(TraceError) as head:
            read_head(run_dir)
        with pytest.raises(TraceError) as whole:
            read_meta(run_dir)
        assert str(head.value) == str(whole.value), name


def test_runs_whose_row_fields_are_wrong_are_listed_damaged_with_run_metas_reason(
    tmp_path, recorded
):
    unread = {
        **recorded,
        "host": {"cpus": "four"},
    }  # a key no row shows: to the listing, as an unknown key
    for name, meta in (
        ("20261127-000000-unread", unread),
        ("20261127-000001-status", {**recorded, "status": "bogus"}),
        ("20261127-000002-spec", {**recorded, "workloads": [{"process": "A", "spec": 3}]}),
        ("20261127-000003-twice", {**recorded, "workloads": [{"process": "A"}] * 2}),
        ("20261127-000004-duration", {**recorded, "duration_s": -1.0}),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(json.dumps(meta))
    rows, _ = listing(tmp_path)
    unread_row, *damaged = rows[::-1]
    assert isinstance(unread_row, RunSummary) and unread_row.steps == {"A": 20, "B": 15}
    assert [row.name.split("-")[-1] for row in damaged] == ["status", "spec", "twice", "duration"]
    for row in damaged:
        assert isinstance(row, DamagedRun), row
        with pytest.raises(TraceError) as whole:
            read_meta(Path(tmp_path / row.name))
        assert row.problem == str(whole.value), row.name


def test_the_head_of_a_recorded_run_is_what_the_whole_record_says(tmp_path, recorded):
    (tmp_path / "run.json").write_text(json.dumps(recorded))
    head, whole = read_head(tmp_path), read_meta(tmp_path)
    assert _shown(head) == _shown(whole) and head.summary == whole.summary
    assert [w.spec_or_unknown for w in head.workloads] == ["fcn:preset=tiny"] * 2
    assert not math.isnan(head.duration_s or math.nan)
