"""How a run ended, as gpumon's exit status (the same for ``--headless`` and the TUI)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpumon.core.capture.session import Session


def exit_code(
    session: "Session", signal_received: int | None = None, start_failed: bool = False
) -> int:
    """128 + the signal that stopped gpumon; 1 when a workload failed on its own or could not be started
    (``start_failed``: the run sequence's attach or launch raised) or the capture failed (its listener or sampler
    thread died included); else 0."""
    if signal_received is not None:
        return 128 + signal_received
    dead = session.listener.failure or (session.sampler is not None and session.sampler.failure)
    failed = session.capture_error is not None or bool(dead)
    return 1 if session.launcher.failed() or start_failed or failed else 0
