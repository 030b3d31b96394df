"""The light install and a training environment, built once per test session (per pytest-xdist worker that needs
them) for the tests that use them (``test_install.py``, ``test_readme.py``): building and installing the wheel is most
of their time. And the box's one MPS daemon, for the modules that start one."""

from __future__ import annotations

import importlib.util
from typing import Iterator

import pytest

from tests.e2e.light import LightVenv, install_light, make_training_env
from tests.helpers import box_lock


@pytest.fixture(scope="session")
def light(tmp_path_factory: pytest.TempPathFactory) -> LightVenv:
    return install_light(tmp_path_factory.mktemp("light"))


@pytest.fixture(scope="session")
def training_env(light: LightVenv) -> str:
    """The python of an environment with torch and numpy and no gpumon (skipped where this test's Python has no torch)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("this test's Python has no torch to give a training environment")
    return make_training_env(light.root / "training-env", light.env)


@pytest.fixture(scope="module")
def one_mps_daemon() -> Iterator[None]:
    """The module runs (fake) MPS daemons: no other module's may run meanwhile. gpumon finds an MPS daemon by its
    process, box-wide as a real one is, so a test that expects none would see another worker's."""
    with box_lock("mps"):
        yield
