"""What every NVML child of tests/core/test_nvml.py has: pynvml, NvmlSource, the fake's clock and counters, emit().

Each child runs with LD_LIBRARY_PATH at the fake libnvidia-ml (tests/fakenvml) and FAKENVML_CLOCK at a file it
writes the fake's time to; it prints one ``RESULT {json}`` line for the test.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
from pathlib import Path

import pynvml

from gpumon.core.sources.nvml import NvmlSource

__all__ = ["NvmlSource", "clock", "emit", "fake", "pynvml", "row", "pids"]


def clock(t: float) -> None:
    """Set the fake's time (seconds since its start)."""
    path = Path(os.environ["FAKENVML_CLOCK"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(repr(t))
    tmp.replace(path)


def fake(symbol: str, restype: type = ctypes.c_ulonglong) -> object:
    """One of the fake's own inspection functions (``fakenvml_*``), called."""
    fn = getattr(pynvml.nvmlLib, symbol)
    fn.restype = restype
    return fn()


def row(sample: object) -> dict | None:
    return None if sample is None else dataclasses.asdict(sample)  # type: ignore[call-overload]


def emit(**values: object) -> None:
    print("RESULT " + json.dumps(values, default=repr))


def pids(argv: list[str]) -> list[int]:
    """The PIDs the test named on the command line."""
    return [int(a) for a in argv]
