"""``gpumon`` with no subcommand: the live monitor, nothing launched yet (jobs are launched from it); its options are
``run``'s session options (``commands/sessionargs.py``), given before any command."""

from __future__ import annotations

import argparse

from gpumon.commands.run import run_tui
from gpumon.console.terminal import output_not_terminal
from gpumon.errors import UsageError
from gpumon.commands.sessionargs import MONITOR, session_config
from gpumon.core.jobs.interpreter import require_workload_python
from gpumon.frontends.plan import make_plan


def run(args: argparse.Namespace) -> int:
    """``gpumon`` with no command: the live monitor with nothing launched yet."""
    config = session_config(args, MONITOR)  # bad options are said before anything else
    if (
        config.python is not None
    ):  # the launch dialog's built-in workloads run in it: checked before the screen opens
        require_workload_python(config.python)
    plan = make_plan([], [], session=config, label=None, duration_s=None, stagger_s=0.0)
    not_terminal = output_not_terminal()
    if not_terminal:
        raise UsageError(
            f"the live monitor needs a terminal ({not_terminal}); without one: gpumon run WORKLOAD --headless"
        )
    return run_tui(plan)
