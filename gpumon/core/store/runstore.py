"""Where runs are stored and how a user names one: a directory, a run name, a label, or ``last``."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from gpumon.core.store.trace import Run, TraceError, baseline_rate, list_runs, load_run
from gpumon.errors import UsageError

MAX_SHOWN = 5  # candidates or close names said in an error


def resolve_run(text: str, runs_dir: Path) -> Path:
    """A run directory from a path, a run name or a label in ``runs_dir``, or ``last``.

    A label (``--label fcn-alone``) names the newest run with that label, as ``last`` names the newest run;
    a unique beginning of a run's name or label names that run. Anything else is a one-line error that lists
    the candidates of an ambiguous beginning, or the closest names.
    """
    if text == "last":
        runs = list_runs(runs_dir)
        if not runs:
            raise TraceError(f"no runs in {runs_dir}")
        return runs[-1].path
    path = Path(text).expanduser()
    if path.exists() or os.sep in text:
        return path
    if (runs_dir / text).exists() or not runs_dir.is_dir():
        return runs_dir / text
    return _by_label(text, list_runs(runs_dir), runs_dir)


def _by_label(text: str, runs: list[Run], runs_dir: Path) -> Path:
    """The newest of ``runs`` (oldest first) labelled ``text``, else of those whose name or label begins with it
    when they all have one label."""
    labelled = [run for run in runs if run.label == text]
    if (
        labelled
    ):  # the newest the user labelled so, else the newest whose label was made from its jobs' names
        given = [run for run in labelled if run.meta.label_given]
        return (given or labelled)[-1].path
    starting = [run for run in runs if run.path.name.startswith(text) or run.label.startswith(text)]
    if len({run.label for run in starting}) == 1:
        return starting[-1].path
    if starting:
        shown = ", ".join(run.path.name for run in starting[-MAX_SHOWN:])
        more = f" and {len(starting) - MAX_SHOWN} older" if len(starting) > MAX_SHOWN else ""
        raise TraceError(
            f"{text!r} is ambiguous in {runs_dir}: {shown}{more}; give one of these names"
        )
    names = list(
        dict.fromkeys(
            [run.label for run in reversed(runs)] + [run.path.name for run in reversed(runs)]
        )
    )
    closest = difflib.get_close_matches(text, names, n=MAX_SHOWN, cutoff=0.5)
    hint = f"; closest: {', '.join(closest)}" if closest else " (gpumon runs lists them)"
    raise TraceError(f"no run named or labelled {text!r} in {runs_dir}{hint}")


def export_dir(run: Path, fmt: str, root: Path | None = None) -> Path:
    """Where a run is exported when no folder is named: ``<root or cwd>/<run name>-<fmt>`` (``export``, the TUI's ``e``)."""
    return (root or Path.cwd()) / f"{run.name}-{fmt}"


def parse_baselines(items: list[str], runs_dir: Path) -> tuple[tuple[str, str], ...]:
    """``A=RUN`` items (``--baseline`` of run and attach) as (slot, run directory), each run checked to hold a rate
    for its slot before anything starts."""
    baselines: dict[str, str] = {}
    for item in items:
        slot, equals, text = item.partition("=")
        slot = slot.strip().upper()
        if not equals or slot not in ("A", "B") or not text.strip():
            raise UsageError(f"bad --baseline {item!r} (expected A=RUN or B=RUN)")
        if slot in baselines:
            raise UsageError(f"--baseline {slot} given twice")
        path = str(load_run(resolve_run(text.strip(), runs_dir)).path)
        baseline_rate(slot, path)
        baselines[slot] = path
    return tuple(sorted(baselines.items()))
