"""An experiment folder's cells.json is outside data: whatever it holds, resuming gives a manifest or one line."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpumon.errors import UsageError
from gpumon.experiments.runner.manifest import MANIFEST, Manifest

HEADER = {"name": "tiny", "title": "t", "spec": "tiny.toml", "analysis": "pairwise"}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _resume(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / MANIFEST).write_bytes(content)
        try:
            Manifest.open(Path(folder), HEADER)
            Manifest.recorded_python(Path(folder))
        except UsageError as exc:
            assert "\n" not in str(exc) and "\x1b" not in str(exc)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_in_cells_json_resume_or_refuse_in_one_line(content):
    _resume(content)


@settings(max_examples=150, deadline=None)
@given(JSON, JSON)
def test_any_json_in_cells_json_resume_or_refuse_in_one_line(cells, experiment):
    _resume(json.dumps({"cells": cells, "experiment": experiment}).encode())


def test_json_nested_too_deep_is_one_line_not_a_recursion_error():
    _resume(b"[" * 100_000 + b"]" * 100_000)
