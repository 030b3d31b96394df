"""run.json's ``summary``: what ``gpumon runs`` lists of a finished run beyond run.json's own fields.

Written by the run's own recorder when it finalises (``Recorder._summarise``); a run recorded before it gets
its summary computed once into the user's cache (``trace.summary_of``). Either way, listing runs reads run.json
and nothing of a run's tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

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
        for slot, rate in rates.items():
            if rate is None:
                out_rates[str(slot)] = math.nan
            elif (
                isinstance(rate, (int, float))
                and not isinstance(rate, bool)
                and math.isfinite(rate)
            ):
                out_rates[str(slot)] = float(rate)
            else:
                return None
        if not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in steps.values()
        ):
            return None
        return cls(out_rates, {str(slot): n for slot, n in steps.items()})
