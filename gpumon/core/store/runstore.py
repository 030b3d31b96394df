"""Where runs are stored and how a user names one: a directory, a run name, or ``last``."""

from __future__ import annotations

import os
from pathlib import Path

from gpumon.core.store.trace import TraceError, list_runs, load_run
from gpumon.errors import UsageError


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


def parse_baselines(items: list[str], runs_dir: Path) -> tuple[tuple[str, str], ...]:
    """``A=RUN`` items (``--baseline`` of run and attach) as (slot, run directory), each run checked to be readable."""
    baselines: dict[str, str] = {}
    for item in items:
        slot, equals, text = item.partition("=")
        slot = slot.strip().upper()
        if not equals or slot not in ("A", "B") or not text.strip():
            raise UsageError(f"bad --baseline {item!r} (expected A=RUN or B=RUN)")
        if slot in baselines:
            raise UsageError(f"--baseline {slot} given twice")
        baselines[slot] = str(load_run(resolve_run(text.strip(), runs_dir)).path)
    return tuple(sorted(baselines.items()))
