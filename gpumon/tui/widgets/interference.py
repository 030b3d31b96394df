"""The interference line: each job's slowdown against its exclusive rate, STP and the verdict."""

from __future__ import annotations

import math

from rich.text import Text

from gpumon.core.interference.attribution import NONE
from gpumon.core.records.rates import CANNOT_TELL, LOSES, PAYS, SLOWER, effect
from gpumon.core.records.units import DASH
from gpumon.core.records import units as fmt
from gpumon.tui.view import View, WorkloadView
from gpumon.tui.widgets.lines import TextLine


NO_RATES = "no exclusive rates yet: use --baseline A=RUN or --stagger S"  # gpumon run's; other screens say theirs


def interference_text(view: View, no_rates: str = NO_RATES) -> Text:
    """``sharing pays: STP 1.55 │ A r 1.42 (812→571 it/s)  B r 1.18 (…)  A: mostly waiting for the GPU``, or what
    is missing.

    The verdict comes first, so a narrow terminal cuts the detail, not the answer. The cause shows
    beside r once the job's baseline came with its evidence (``--baseline`` runs).
    """
    text = Text("sharing ", style="dim")
    result = view.interference
    known = [w for w in view.workloads if w.exclusive_rate > 0]
    if result is None:
        text.append("needs two running jobs", style="dim")
        return _exclusive_rates(text, known)
    if not any(w.slot in result.shared for w in known):
        text.append(no_rates, style="dim")
        return text
    if (
        result.measuring
    ):  # "measuring… (3 s left)": no r and no verdict before the window can hold one
        text = _exclusive_rates(Text(result.text, style="yellow"), known)
        if view.predicted:
            text.append(f" │ {view.predicted}", style="cyan")
        return text
    if result.text:
        style = {PAYS: "bold green", LOSES: "bold red", CANNOT_TELL: "bold yellow"}.get(
            result.verdict, "dim"
        )
        text = Text(result.text, style=style)
        text.append(" │ ", style="dim")
    causes = []  # after every job's r: a narrow terminal cuts a cause, never the other job's slowdown
    for slot, r in result.slowdown.items():
        w = view.workload(slot)
        shared = result.shared.get(slot, math.nan)
        text.append(f"{slot} ", style="bold")
        if math.isnan(r):
            text.append(f"r {DASH}  ", style="dim")
            continue
        text.append(f"r {r:.2f}", style="bold")
        text.append(f" ({fmt.num(w.exclusive_rate)}→{fmt.num(shared)} it/s)  ", style="dim")
        why = view.causes.get(slot)
        if why is not None and why.cause != NONE and effect(r) == SLOWER:
            causes.append((slot, why.phrase))
    for slot, phrase in causes:
        text.append(f"{slot}: ", style="dim")
        text.append(f"{phrase}  ", style="yellow")
    if view.predicted:
        text.append(f"│ {view.predicted}", style="cyan")
    return text


def _exclusive_rates(text: Text, known: list[WorkloadView]) -> Text:
    """``text  ·  xB 91.2 it/s (exclusive phase)``: the exclusive rates known so far."""
    for w in known:
        text.append(
            f"  ·  x{w.slot} {fmt.num(w.exclusive_rate)} it/s ({w.exclusive_source})", style="dim"
        )
    return text


class InterferenceLine(TextLine):
    """Shown under the workload panels."""

    def show_view(self, view: View, no_rates: str = NO_RATES) -> None:
        """``no_rates``: how to get exclusive rates on the screen shown (a replay takes no --baseline)."""
        self.show(interference_text(view, no_rates))
