"""``jsonfields.decode`` takes a plain value without calling its field's check: for any JSON value, in any field
of run.json's records, it gives what the check gives (same value, same type) or refuses with the same reason."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumon.core.records import jsonfields as jf
from gpumon.core.records.decode import Refused
from gpumon.core.records.enums import JobState, PcieMethod, RunStatus, ShareKind
from gpumon.core.records.machine import GpuInfo, HostInfo
from gpumon.core.store import runmeta
from gpumon.core.store.runmeta import CaptureFailure, RunMeta, WorkloadRecord

RECORDS = (RunMeta, WorkloadRecord, HostInfo, GpuInfo, CaptureFailure, runmeta._NvmlEntry)
WORDS = [m.value for kind in (JobState, PcieMethod, RunStatus, ShareKind) for m in kind]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=-300, max_value=2000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=-1e9, max_value=1e9)
    | st.text(max_size=6)
    | st.sampled_from(WORDS)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = [(cls, name, key, check) for cls in RECORDS for name, key, check in jf._readers(cls)]


def _reference(cls: type, name: str, key: str, check: jf.Check, value: Any) -> Any:
    """The field as its check alone makes it (``decode`` before plain values were taken without it)."""
    return getattr(cls(**{name: check(value, key)}), name)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(
    ("cls", "name", "key", "check"), FIELDS, ids=[f"{c.__name__}.{n}" for c, n, _, _ in FIELDS]
)
@settings(max_examples=60, deadline=None)
@given(value=JSON)
def test_a_plain_value_decodes_as_its_check_would_decode_it(cls, name, key, check, value):
    try:
        expected = _reference(cls, name, key, check, value)
    except Refused as refused:
        with pytest.raises(Refused) as got:
            jf.decode(cls, {key: value})
        assert str(got.value) == str(refused)
        return
    assert _same(getattr(jf.decode(cls, {key: value}), name), expected)


def test_plain_values_are_taken_and_the_rest_still_refused_with_where_they_were():
    work = jf.decode(WorkloadRecord, {"process": "A", "pid": 7, "state": "exited", "start_t": 1.5})
    assert work.state is JobState.EXITED and work.pid == 7 and work.start_t == 1.5
    assert (
        type(jf.decode(WorkloadRecord, {"start_t": 2}).start_t) is float
    )  # an int is made a float
    for entry, reason in (
        ({"pid": True}, "workloads[3].pid is not an integer"),
        ({"pid": -1}, "workloads[3].pid is -1, not within [0, 4294967296]"),
        ({"state": "done"}, "workloads[3].state is 'done', not one of"),
        ({"start_t": 1e300}, "workloads[3].start_t is 1e+300, not within"),
    ):
        with pytest.raises(Refused, match=re.escape(reason)):
            jf.decode(WorkloadRecord, entry, "workloads[3].")
