"""How a run ended, as gpumon's exit status (the same for ``--headless`` and the TUI)."""

from __future__ import annotations

from typing import Iterable

from gpumon.core.launcher import Workload


def exit_code(workloads: Iterable[Workload], signal_received: int | None = None) -> int:
    """128 + the signal that stopped gpumon, else 1 when a workload failed on its own, else 0."""
    if signal_received is not None:
        return 128 + signal_received
    failed = [w for w in workloads if not w.stop_requested and w.exit_status not in (0, None)]
    return 1 if failed else 0
