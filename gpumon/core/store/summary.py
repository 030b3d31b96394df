"""run.json's ``summary``: what ``gpumon runs`` lists of a finished run beyond run.json's own fields.

Written by the run's own recorder when it finalises (``Recorder._summarise``); a run recorded before it gets
its summary computed once into the user's cache (``trace.summary_of``). Either way, listing runs reads run.json
and nothing of a run's tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpumon.core.records.decode import INT_LIMIT

MAX_SLOTS = 64  # a summary naming more jobs than this is not gpumon's: read as none


@dataclass(frozen=True)
class RunSummaryRecord:
    """Each job's exclusive rate (iter/s; NaN: no two post-warm-up steps) and its step rows, by slot."""

    rates: dict[str, float] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "rates": {k: v if math.isfinite(v) else None for k, v in self.rates.items()},
            "steps": dict(self.steps),
        }

    @classmethod
    def from_json(cls, entry: object) -> "RunSummaryRecord | None":
        """The record, or None where ``entry`` is not one (absent, or of the wrong shape: computed again)."""
        if not isinstance(entry, dict):
            return None
        rates, steps = entry.get("rates"), entry.get("steps")
        if not isinstance(rates, dict) or not isinstance(steps, dict):
            return None
        if len(rates) > MAX_SLOTS or len(steps) > MAX_SLOTS:
            return None
        out_rates: dict[str, float] = {}
        for slot, rate in rates.items():  # keys are text: JSON's
            kind = type(rate)
            if rate is None:
                out_rates[slot] = math.nan
            elif (
                kind is float
                and rate - rate == 0.0
                or kind is int
                and -INT_LIMIT < rate < INT_LIMIT
            ):
                out_rates[slot] = float(
                    rate
                )  # finite (inf - inf is NaN); an int of any size would not convert
            else:
                return None
        if not all(type(n) is int and 0 <= n < INT_LIMIT for n in steps.values()):
            return None
        return cls(out_rates, dict(steps))
