"""What ``gpumon export`` writes for a notebook: each recorded table's columns named for what they are (the recorder's
live names stay as they were, and old runs read as before). Pandas reads the result as-is:

* every table with ``t`` (seconds since the run's start) gets ``wall_epoch_s`` next to it: the wall clock, Unix
  epoch seconds (UTC; ``pd.to_datetime(df.wall_epoch_s, unit="s")``), from run.json's ``started_at``;
* steps.csv's ``iter_s`` (one step's duration, not iterations per second) is ``step_s``;
* steps and processes name their job: ``job`` (its spec, ``fcn:preset=tiny`` or ``cmd:python train.py``) before
  ``slot`` (A or B, run.json's ``process``), and ``counts`` (what a step is: ``optimizer steps`` when a framework
  callback or the auto-probe said so, else ``steps``);
* steps gets ``tokens_per_sample`` after ``samples`` where a framework callback said it of a job (its meta, empty for
  a job that said nothing; tokens = samples × tokens_per_sample);
* host.csv's ``per_core`` (one string, ``"100.0 97.0"``) is one numeric column per core: ``core0_pct``, ...
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING

from gpumon.core.records.tokens import tokens_per_sample
from gpumon.core.store.runmeta import RunMeta

if TYPE_CHECKING:
    import pandas as pd

RENAMED = {"iter_s": "step_s", "process": "slot"}


def epoch_start(meta: RunMeta) -> float:
    """The run's t = 0 as Unix epoch seconds; NaN when run.json has no readable ``started_at``."""
    try:
        return datetime.fromisoformat(str(meta.started_at)).timestamp()
    except ValueError:
        return math.nan


def export_columns(meta: RunMeta, table: str, frame: "pd.DataFrame") -> "pd.DataFrame":
    """``frame`` (a recorded table as the reader gives it) with the columns export writes."""
    # deferred: +0.40 s CPU (pandas) on gpumon runs (trace.py imports this module)
    import pandas as pd

    frame = frame.copy()
    if "process" in frame.columns:
        slot = frame["process"].astype(str)
        jobs = {w.slot: w.spec or "" for w in meta.workloads}
        counts = {w.slot: str((w.meta or {}).get("counts") or "steps") for w in meta.workloads}
        frame.insert(0, "job", slot.map(lambda s: jobs.get(s, "")))
        if table == "steps":
            frame.insert(1, "counts", slot.map(lambda s: counts.get(s, "steps")))
            _tokens(meta, frame, slot)
        frame["process"] = slot
    if "t" in frame.columns:
        t = pd.to_numeric(frame["t"], errors="coerce")  # a damaged row's text reads as NaN
        wall = (t + epoch_start(meta)).round(6)
        frame.insert(frame.columns.get_loc("t") + 1, "wall_epoch_s", wall)
    if table == "host" and "per_core" in frame.columns:
        frame = _per_core(frame)
    return frame.rename(columns=RENAMED)


def _tokens(meta: RunMeta, frame: "pd.DataFrame", slot: "pd.Series") -> None:
    """``tokens_per_sample`` after ``samples``, per job as its callback said it, where any job said it."""
    said = {w.slot: tokens_per_sample(w.meta or {}) for w in meta.workloads}
    if "samples" not in frame.columns or all(v is None for v in said.values()):
        return
    per_sample = slot.map(lambda s: said.get(s) or math.nan).astype(float)
    frame.insert(frame.columns.get_loc("samples") + 1, "tokens_per_sample", per_sample)


def _per_core(frame: "pd.DataFrame") -> "pd.DataFrame":
    """``per_core``'s space-separated percentages as numeric ``coreN_pct`` columns (empty where a row had fewer)."""
    # deferred: +0.40 s CPU (pandas) on gpumon runs (trace.py imports this module)
    import pandas as pd

    cores = [v.split() if isinstance(v, str) else [] for v in frame.pop("per_core")]
    width = max(map(len, cores), default=0)
    split = pd.DataFrame(
        [[_float(v) for v in row] + [math.nan] * (width - len(row)) for row in cores],
        columns=[f"core{i}_pct" for i in range(width)],
        index=frame.index,
    )
    return pd.concat([frame, split], axis=1)


def _float(text: str) -> float:
    """A core's percentage; NaN for what is not a number (a damaged row)."""
    try:
        return float(text)
    except ValueError:
        return math.nan
