"""Where runs are stored and how a user names one: a directory, a run name, or ``last``."""

from __future__ import annotations

import os
from pathlib import Path

from gpumon.core.trace import TraceError, list_runs


def default_runs_dir() -> Path:
    """``$GPUMON_RUNS``, else ``$XDG_DATA_HOME/gpumon/runs``, else ``~/.local/share/gpumon/runs``."""
    if os.environ.get("GPUMON_RUNS"):
        return Path(os.environ["GPUMON_RUNS"]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "gpumon" / "runs"


def runs_dir_or_default(path: Path | None) -> Path:
    """``path`` (``~`` expanded), else ``default_runs_dir()``."""
    return path.expanduser() if path is not None else default_runs_dir()


def resolve_run(text: str, runs_dir: Path) -> Path:
    """A run directory from a path, a run name in ``runs_dir``, or ``last``."""
    if text == "last":
        runs = list_runs(runs_dir)
        if not runs:
            raise TraceError(f"no runs in {runs_dir}")
        return runs[-1].path
    path = Path(text).expanduser()
    if path.exists() or os.sep in text:
        return path
    return runs_dir / text
