"""stop and attach print a run directory's name, which is anyone's text: control characters come out escaped."""

from __future__ import annotations

import subprocess

import pytest

from gpumon.core.records.printable import printable
from tests.helpers import gpumon
from tests.tracegen import exclusive


@pytest.mark.parametrize(
    ("verb", "name", "status", "says"),
    [
        ("stop", "\x1b[2J\x07bell", 0, "is not running"),  # and nothing to stop
        ("attach", "\x1b]0;title\x07", 2, "needs a terminal"),  # its one line of refusal
    ],
)
def test_a_run_named_with_escapes_is_printed_escaped(
    tmp_path, verb: str, name: str, status: int, says: str
):
    run = exclusive(tmp_path / f"20261122-110000-{name}")
    done = gpumon(verb, str(run), stdin=subprocess.DEVNULL)
    assert done.returncode == status, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr, done.stderr
    assert says in done.stderr and printable(run.name) in done.stderr, done.stderr
    if verb == "attach":
        assert done.stderr.count("\n") == 1, done.stderr
