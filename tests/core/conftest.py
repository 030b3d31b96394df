"""Fixtures of tests/core: the fake libnvidia-ml loaded into the test's own process (tests/fakenvml/inprocess.py)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Iterator

import pytest

from gpumon.core.sources.nvmlquery import Device
from tests.fakenvml import build as fake
from tests.fakenvml.inprocess import Start, built, gpu0


@pytest.fixture(scope="module")
def fake_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the fake's builds are kept for the session (skips without a C compiler)."""
    if fake.compiler() is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml")
    return tmp_path_factory.getbasetemp().parent


@pytest.fixture
def gpu_of(
    fake_cache: Path, tmp_path: Path
) -> Iterator[Callable[[str, str], tuple[Device, fake.Clock]]]:
    """``start(variant, scenario)``: NVML initialised on that build of the fake running ``scenario``."""
    with ExitStack() as stack:
        yield lambda variant, scenario: gpu0(stack, built(fake_cache, variant), tmp_path, scenario)


@pytest.fixture
def gpu(gpu_of: Callable[[str, str], tuple[Device, fake.Clock]]) -> Start:
    """``start(scenario)``: NVML initialised on the full fake running ``scenario``; its GPU 0 and the fake's clock."""
    return lambda scenario: gpu_of("full", scenario)
