"""Command line: builds the parser from ``gpumon/commands`` (one module per subcommand) and dispatches."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from gpumon import __version__
from gpumon.commands.base import EPILOG, Command
from gpumon.console import stopsignals
from gpumon.core.jobs import lifeline
from gpumon.errors import GpumonError

# In the order ``gpumon --help`` lists them.
COMMANDS = ("run", "attach", "stop", "runs", "export", "compare", "predict", "doctor", "experiment", "wrap")

DESCRIPTION = """\
Watch, capture and compare co-resident training jobs on a shared GPU.

Run one or two training processes on the same GPU (or on the CPU when there is
none), watch their iteration rate, host-to-device copy bandwidth and GPU
utilisation live, capture the run to a run directory, and compare exclusive and
shared captures: slowdown r = exclusive rate / shared rate for each job and the
combined throughput STP = 1/r_A + 1/r_B (sharing pays when STP > 1).

With no command, opens the live monitor."""


def command(name: str) -> Command:
    """The module of subcommand ``name`` (``gpumon/commands/<name>.py``)."""
    module: Command = importlib.import_module(f"gpumon.commands.{name}")  # type: ignore[assignment]
    return module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpumon",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpumon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        command(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None, *, quick_exit: bool = False) -> int:
    """Run one gpumon command; ``quick_exit`` (the ``gpumon`` program, not a caller in Python): see ``console``."""
    stopsignals.unblock()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.raw_argv = list(sys.argv[1:] if argv is None else argv)  # what --detach hands its runner
    handler = getattr(args, "handler", None) or command("monitor").run
    try:
        status = int(handler(args) or 0)
    except GpumonError as exc:  # bad input (2) or a failure of the machine (1): one line, no traceback
        print(f"gpumon: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    if quick_exit and status == 0 and getattr(args, "quick_exit", False):
        lifeline.exit_now(status)
    return status


def console() -> None:
    """The ``gpumon`` program.

    A read-only command that succeeded (``compare``: its handler sets ``quick_exit``) ends without the
    interpreter's teardown: with pandas, pyarrow and an hour of steps loaded that is 0.15 s of a
    2-second budget, spent freeing what the exit frees anyway. Its output is flushed first; nothing it
    started is left (the scipy helper has answered and exited).
    """
    status = main(quick_exit=True)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`| head -1`): the exit status stands, not the teardown's 120
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(status)
