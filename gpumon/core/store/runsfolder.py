"""The runs folder: where runs are stored (``$GPUMON_RUNS``...) and the names of the folders in it, oldest first."""

from __future__ import annotations

import os
from pathlib import Path

from gpumon.core.store.runrecord import TraceError


def default_runs_dir() -> Path:
    """``$GPUMON_RUNS``, else ``$XDG_DATA_HOME/gpumon/runs``, else ``~/.local/share/gpumon/runs``."""
    if os.environ.get("GPUMON_RUNS"):
        return Path(os.environ["GPUMON_RUNS"]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "gpumon" / "runs"


def runs_dir_or_default(path: Path | None) -> Path:
    """``path`` (``~`` expanded), else ``default_runs_dir()``."""
    return path.expanduser() if path is not None else default_runs_dir()


def run_names(runs_dir: Path) -> list[str]:
    """The names of the folders directly below ``runs_dir``, sorted (a run's name begins with when it started)."""
    if not runs_dir.is_dir():
        raise TraceError(f"{runs_dir}: no such runs directory")
    try:
        with os.scandir(runs_dir) as entries:  # names and kinds from one read of the folder
            return sorted(e.name for e in entries if e.is_dir())
    except OSError as exc:
        raise TraceError(f"cannot read {runs_dir}: {exc.strerror}") from None
