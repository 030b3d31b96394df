"""``gpumon`` with no subcommand: the live monitor, nothing launched yet (jobs are launched from it)."""

from __future__ import annotations

import argparse

from gpumon.commands.run import run_tui
from gpumon.console.terminal import output_not_terminal
from gpumon.errors import UsageError


def run(args: argparse.Namespace) -> int:
    """``gpumon`` with no command: the live monitor with nothing launched yet."""
    from gpumon.frontends.plan import make_plan
    from gpumon.core.capture.session import SessionConfig

    not_terminal = output_not_terminal()
    if not_terminal:
        raise UsageError(
            f"the live monitor needs a terminal ({not_terminal} is not one); without one: gpumon run WORKLOAD --headless"
        )
    plan = make_plan([], [], session=SessionConfig(), label=None, duration_s=None, stagger_s=0.0)
    return run_tui(plan)
