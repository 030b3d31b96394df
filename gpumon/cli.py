"""Command line: builds the parser from ``gpumon/commands`` (one module per subcommand) and dispatches."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
import sys
from typing import NoReturn, Sequence

from gpumon import __version__
from gpumon.commands.base import EPILOG, Command
from gpumon.commands.sessionargs import MONITOR, OPTIONS, add_session_options, given
from gpumon.console import stopsignals
from gpumon.core.records.printable import printable
from gpumon.errors import GpumonError, UsageError

# In the order ``gpumon --help`` lists them.
COMMANDS = (
    "run",
    "attach",
    "stop",
    "runs",
    "export",
    "compare",
    "predict",
    "calibrate",
    "doctor",
    "experiment",
    "wrap",
    "snapshot",
)

DESCRIPTION = """\
Watch, capture and compare co-resident training jobs on a shared GPU.

Run one or two training processes on the same GPU (or on the CPU when there is
none), watch their iteration rate, host-to-device copy bandwidth and GPU
utilisation live, capture the run to a run directory, and compare exclusive and
shared captures: slowdown r = exclusive rate / shared rate for each job and the
combined throughput STP = 1/r_A + 1/r_B (sharing pays when STP > 1).

With no command, opens the live monitor with nothing launched (a and b launch
jobs from it); it takes the options below, e.g. gpumon --python PATH --device cpu."""


def command(name: str) -> Command:
    """The module of subcommand ``name`` (``gpumon/commands/<name>.py``)."""
    module: Command = importlib.import_module(f"gpumon.commands.{name}")
    return module


class MainParser(argparse.ArgumentParser):
    """``gpumon``'s own parser: a workload or an option that belongs to a command says which command takes it."""

    seen: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        self.seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        super().error(self.hint(message) or message)

    def hint(self, message: str) -> str | None:
        """Which command takes the workload or the option that the monitor does not (None: argparse's message)."""
        # deferred: +0.004 s CPU on gpumon --help (only a mistyped command needs it)
        from gpumon.workloads.spec import WORKLOADS

        choice = re.search(r"argument COMMAND: invalid choice: '([^']*)'", message)
        if choice and choice.group(1).split(":", 1)[0] in WORKLOADS:
            return f"{choice.group(1)} is a workload: launch it with gpumon run {choice.group(1)} (gpumon run --help)"
        commands = self.commands()
        if (
            choice is None
            and not message.startswith("unrecognized arguments")
            or set(self.seen) & set(commands)
        ):
            return (
                None  # not about the monitor, or a command was given: argparse's message is right
            )
        for flag in (token.split("=", 1)[0] for token in self.seen if token.startswith("--")):
            takers = [
                name for name, parser in commands.items() if flag in parser._option_string_actions
            ]
            if takers and flag not in self._option_string_actions:
                return (
                    f"{flag} is an option of gpumon {' and gpumon '.join(takers)}, not of the monitor (gpumon "
                    f"alone takes {', '.join(flag for flag, _ in OPTIONS)}): gpumon {takers[0]} … {flag}"
                )
        return None

    def commands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """gpumon's parser; ``only``: for a command line that begins with that command, only its parser (neither the
    monitor's options nor another command can follow it; building every parser was a third of ``gpumon runs``'s
    start, benchmarks/scale.py)."""
    parser = MainParser(
        prog="gpumon",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpumon {__version__}")
    if only is None:
        add_session_options(
            parser.add_argument_group("the monitor's options (gpumon with no command)"), MONITOR
        )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser
    )
    for name in COMMANDS if only is None else (only,):
        command(name).register(sub)
    return parser


def misplaced_words(
    parser: argparse.ArgumentParser, argv: list[str], name: str, misplaced: list[str]
) -> str:
    """The monitor's options given before the command ``name``: the command line with them after it, if ``name``
    takes them (a hint that names a command ``name`` would refuse is itself a usage error)."""
    said = f"{' '.join(misplaced)} before the command {name} would be the monitor's option"
    assert isinstance(parser, MainParser)
    takes = parser.commands()[name]._option_string_actions
    missing = [flag for flag in misplaced if flag not in takes]
    if missing:
        return f"{said}, and {name} has no {missing[0]}: leave it out (gpumon {name} --help)"
    at = argv.index(name)  # only options come before the command
    moved = [name, *argv[:at], *argv[at + 1 :]]
    return f"{said}: give it after the command (gpumon {shlex.join(moved)})"


def main(argv: Sequence[str] | None = None, *, quick_exit: bool = False) -> int:
    """Run one gpumon command; ``quick_exit`` (the ``gpumon`` program, not a caller in Python): see ``console``."""
    stopsignals.unblock()
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    name = raw_argv[0] if raw_argv and raw_argv[0] in COMMANDS else None
    if name is not None:
        # what a command starts before its arguments are parsed (compare: the scipy helper's import)
        start_early = getattr(command(name), "start_early", None)
        if start_early is not None:
            start_early(raw_argv[1:])
    parser = build_parser(name)
    args = parser.parse_args(raw_argv)
    args.raw_argv = raw_argv  # what --detach hands its runner
    handler = getattr(args, "handler", None) or command("monitor").run
    try:
        misplaced = given(args, MONITOR) if args.command else []
        if misplaced:
            raise UsageError(misplaced_words(parser, args.raw_argv, args.command, misplaced))
        status = int(handler(args) or 0)
    except (
        GpumonError
    ) as exc:  # bad input (2) or a failure of the machine (1): one line, no traceback
        # escaped: a message quotes paths, names and values from outside (a runs folder named with an ESC)
        print(f"gpumon: error: {printable(exc)}", file=sys.stderr)
        status = exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    if quick_exit and getattr(args, "quick_exit", False):
        # deferred: ctypes and subprocess, 24 M instructions of gpumon runs' start (callgrind)
        from gpumon.core.jobs import lifeline

        lifeline.exit_now(status)
    return status


def console() -> None:
    """The ``gpumon`` program.

    A read-only command that has said its answer or its one-line error (``compare``, ``predict``: their handlers set
    ``quick_exit``) ends without the interpreter's teardown, which only frees what the exit frees anyway (and once,
    after its error line, ended a ``compare`` that had written a columnar copy with SIGABRT in CI:
    test_columnar's refuses-the-same-way test, exit -6 in one of three runs; not reproduced here). It pays:
    ``gpumon compare`` of a 700,000-step pair took a median 9.9 s and 14.3 s with ``os._exit``, 12.3 s and 18.5 s with the teardown
    (``benchmarks/startup.py --compare``, two runs of 5 each, 2026-11-27, the 2-core VM at load 12-19). Its
    output is flushed first; nothing it started is left (the scipy helper has answered and exited, or dies with
    this process: ``die_with_parent``).
    """
    status = main(quick_exit=True)
    try:
        sys.stdout.flush()
    except (
        BrokenPipeError
    ):  # the reader left (`| head -1`): the exit status stands, not the teardown's 120
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(status)
