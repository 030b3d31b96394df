"""Optional dependencies: whether one is installed, and the one-line error naming the extra that brings it."""

from __future__ import annotations

import importlib.util

from gpumon.errors import UsageError

ANALYSIS = "analysis"
TORCH = "torch"


def installed(module: str) -> bool:
    """True when ``module`` can be imported here (checked without importing it)."""
    return importlib.util.find_spec(module) is not None


def install_hint(extra: str) -> str:
    return f"pip install 'gpumon[{extra}]'"


def require(module: str, feature: str, extra: str = ANALYSIS) -> None:
    """Raise UsageError (exit 2) naming the extra to install when ``module`` is missing."""
    if not installed(module):
        raise UsageError(f"{feature} needs {module}, which is not installed: {install_hint(extra)}")
