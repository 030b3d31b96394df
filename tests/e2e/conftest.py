"""The light install and a training environment, built once per test session for the tests that use them
(``test_install.py``, ``test_readme.py``): building and installing the wheel is most of their time."""

from __future__ import annotations

import importlib.util

import pytest

from tests.e2e.light import LightVenv, install_light, make_training_env


@pytest.fixture(scope="session")
def light(tmp_path_factory: pytest.TempPathFactory) -> LightVenv:
    return install_light(tmp_path_factory.mktemp("light"))


@pytest.fixture(scope="session")
def training_env(light: LightVenv) -> str:
    """The python of an environment with torch and numpy and no gpumon (skipped where this test's Python has no torch)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("this test's Python has no torch to give a training environment")
    return make_training_env(light.root / "training-env", light.env)
