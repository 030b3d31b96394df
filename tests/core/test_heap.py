"""commands/heap.py: compare's process keeps the memory it frees for its next row group instead of faulting it in
again (glibc)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from gpumon.commands import heap

# eight arrays of 1.6 MB made and freed fifty times, as compare does for each row group; the page faults it took
ROUNDS = """
import resource, sys
import numpy as np
from gpumon.commands import heap
if sys.argv[1] == "keep":
    assert heap.keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    arrays = [np.ones(200_000) for _ in range(8)]
    del arrays
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_arrays_are_reused_instead_of_faulted_in_again():
    kept, default = _faults("keep"), _faults("default")
    # fifty rounds of 12.8 MB: glibc's default hands them back each round (~3,000 faults a round); kept, the first
    # round's pages serve the rest
    assert kept * 5 < default, (kept, default)


def test_a_c_library_without_mallopt_is_left_as_it_is(monkeypatch):
    import ctypes

    class NoMallopt:
        def __init__(self, name: object) -> None:
            pass

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert heap.keep_freed_memory() is False
