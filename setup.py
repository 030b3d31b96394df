"""setuptools' one addition to pyproject.toml: the repository's top-level ``experiments/`` (the shipped experiment
specs) goes into the wheel as ``gpumon/experiments/specs/``, where an installed ``gpumon experiment`` finds them
(their files are named in pyproject.toml's package-data, which setuptools lets win over setup()'s)."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["gpumon", "gpumon.*"]), "gpumon.experiments.specs"],
    package_dir={"gpumon.experiments.specs": "experiments"},
)
