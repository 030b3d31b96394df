"""The physical bounds of a recorded step row, checked where the tables are decoded (``trace.py`` calls these).

A steps.csv row is a step only of a known job slot (``is_job``: A or B; a stray row naming another job would make
a pair of jobs three) with a finite run time within ``T_LIMIT_S`` and a whole step number within
``STEP_LIMIT``: a row of another shape, a 309-digit number, ``inf`` or NaN there is left out (the valid rows still
give the rate); out-of-range measurements of a step that is kept (``iter_s``, ``samples``, the copy) read as not
recorded (NaN): ``checked_steps``. How the tables are stored and parsed is trace.py's; what a valid row is, this module's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpumon.core.records.slots import is_slot

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

T_LIMIT_S = 1e8  # seconds of run time either way (three years)
STEP_LIMIT = 2**53  # step numbers a float holds exactly
# A sampled table's (device, processes, host) value beyond this either way is no measurement: no utilisation, size,
# byte rate, power or temperature gpumon samples comes near it (a petabyte a second); such a value reads as unknown.
SAMPLE_LIMIT = 1e15
# Each number of a step row and its bounds (beyond them: NaN, "not recorded")
BOUNDS = {
    "t": (-T_LIMIT_S, T_LIMIT_S),
    "step": (0, STEP_LIMIT),
    "iter_s": (0.0, 1e6),
    "samples": (0.0, 1e15),
    "copy_bytes": (0.0, 2.0**50),
    "copy_s": (0.0, 1e6),
}


def is_job(name: object) -> bool:
    """Whether a steps row's ``process`` names a job gpumon records (a slot); another name's rows are no steps."""
    return is_slot(name)


def step_point(t: str, step: str) -> tuple[float, int] | None:
    """A steps.csv row's (time, step number) from its text, or None when it is not a step's."""
    try:
        when, number = float(t), int(step)
    except ValueError:
        return None
    if not (math.isfinite(when) and abs(when) <= T_LIMIT_S and 0 <= number <= STEP_LIMIT):
        return None
    return when, number


def counted(t: "np.ndarray", n: "np.ndarray", warmup: "np.ndarray") -> "np.ndarray":
    """Which rows of the step columns count for a rate: a step's (``step_point``'s bounds), not a warm-up one."""
    # deferred: +0.08 s CPU (numpy) on gpumon runs
    import numpy as np

    with np.errstate(invalid="ignore"):
        return (
            np.isfinite(t)
            & (np.abs(t) <= T_LIMIT_S)
            & np.isfinite(n)
            & (n == np.floor(n))
            & (n >= 0)
            & (n <= STEP_LIMIT)
            & (warmup != 1)
        )


def checked_steps(frame: "pd.DataFrame") -> "pd.DataFrame":
    """The steps table with every value out of its bounds made NaN ("not recorded"): a row whose time or step number
    is then NaN is no step (``counted`` leaves it out, as a row that did not parse), the others keep their place."""
    for column, (low, high) in BOUNDS.items():
        if column in frame and frame[column].dtype.kind in "iuf":
            values = frame[column]
            out = ~values.between(low, high) & values.notna()
            if out.any():
                frame[column] = values.astype(float).mask(out)
    return frame
