"""The fake libnvidia-ml loaded into the test's own process: pynvml here, no child interpreter.

The children of tests/core/test_nvml.py load the fake through LD_LIBRARY_PATH, which only a new process reads;
code run in a child is invisible to in-process tools (mutation testing sees which test calls which function, and
swaps the function, in the test's own process only). pynvml keeps its library in one module global and loads
it only while that is None: ``loaded`` sets it to a fresh copy of the fake (the fake reads its scenario once per
load, so each use gets its own file and its own state), with the scenario and clock in this process's
environment, and puts pynvml back as it found it after.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pynvml

from gpumon.core.sources.nvmlquery import NA, Calls, Device, Query
from tests.fakenvml import build as fake

ENV_KEYS = ("FAKENVML_SCRIPT", "FAKENVML_CLOCK", "FAKENVML_COSTS", "CUDA_VISIBLE_DEVICES")


def built(cache: Path, variant: str = "full") -> Path:
    """The fake (``variant``: build.VARIANTS) built once per source under ``cache`` (a folder only this user can
    write); another process building it at the same time is harmless (its copy is as good)."""
    digest = hashlib.sha256(fake.SOURCE.read_bytes()).hexdigest()[:16]
    lib_dir = cache / f"fakenvml-{digest}-{variant}"
    if not (lib_dir / fake.LIBRARY).exists():
        work = cache / f"fakenvml-{digest}-{variant}.{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        fake.build(work, variant)
        try:
            (work / variant).rename(lib_dir)
        except OSError:
            pass  # another process won the race
        shutil.rmtree(work, ignore_errors=True)
    return lib_dir


@contextmanager
def loaded(lib_dir: Path, work: Path, scenario: str) -> Iterator[fake.Clock]:
    """pynvml on a fresh copy of the fake in ``lib_dir`` running ``scenario``; yields the fake's clock (at 0)."""
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "fakenvml-loaded.so"  # a path of its own: dlopen gives it its own state
    shutil.copyfile(lib_dir / fake.LIBRARY, copy)
    saved = {key: os.environ.get(key) for key in ENV_KEYS}
    for key in ENV_KEYS:
        os.environ.pop(key, None)
    clock = fake.Clock(work / "clock")
    os.environ["FAKENVML_SCRIPT"] = str(fake.write_scenario(work / "scenario.txt", scenario))
    os.environ["FAKENVML_CLOCK"] = str(clock.path)
    assert pynvml.nvmlLib is None, "pynvml already has a library loaded in this process"
    refcount = pynvml._nvmlLib_refcount
    pynvml.nvmlLib = ctypes.CDLL(str(copy))
    pynvml._nvmlGetFunctionPointer_cache.clear()
    try:
        yield clock
    finally:
        pynvml.nvmlLib = None
        pynvml._nvmlLib_refcount = refcount
        pynvml._nvmlGetFunctionPointer_cache.clear()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def gpu0(stack: ExitStack, lib_dir: Path, work: Path, scenario: str) -> tuple[Device, fake.Clock]:
    """NVML initialised on the fake running ``scenario`` until ``stack`` closes: its GPU 0, and the fake's clock."""
    clock = stack.enter_context(loaded(lib_dir, work, scenario))
    q = Query(pynvml)
    assert q("init", pynvml.nvmlInitWithFlags, 0) is not NA
    stack.callback(pynvml.nvmlShutdown)
    handle = q("handle", pynvml.nvmlDeviceGetHandleByIndex, 0)
    return Device(pynvml, q, handle, Calls.bind(pynvml)), clock


Start = Callable[[str], tuple[Device, fake.Clock]]
