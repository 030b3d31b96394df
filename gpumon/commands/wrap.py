"""``gpumon wrap -- COMMAND``: run your own command with the auto-probe and the probe's rendezvous.

gpumon replaces itself with the command (exec): the command keeps gpumon's PID, runs in your
terminal and session, and gpumon owns nothing, so a gpumon started later attaches to it with
``gpumon run A --beside PID`` or from the monitor, and quitting that gpumon never touches it.
"""

from __future__ import annotations

import argparse
import os
import sys

from gpumon.errors import UsageError
from gpumon.core.jobs.interpreter import child_path, command_argv

DESCRIPTION = """\
Run your own training command with gpumon's probe, not under gpumon: gpumon execs the command
(it keeps this PID, your terminal and your session; gpumon owns nothing and stays in no process).

A bare 'python' or 'python3' as the command is your training environment's Python when --python
or $GPUMON_PYTHON names one (as in gpumon run --cmd).

The command's Python gets the auto-probe (every optimizer.step() of a PyTorch script is a step,
docs/probe.md) and the probe's rendezvous: a socket in your private runtime directory
($GPUMON_RUNTIME_DIR, else $XDG_RUNTIME_DIR/gpumon, else /tmp/gpumon-UID; mode 0700) where it
keeps its last 8,192 steps. At any time later, a gpumon of the same user can then watch it:
'gpumon' lists it with its live iteration rate, and 'gpumon run A --beside PID' measures what
starting job A does to it (its rate alone comes from those steps before A started).
Scripts that call gpumon.probe.step() themselves need no wrap: they open the rendezvous alone."""

EPILOG = """\
examples:
  gpumon wrap -- python train.py --epochs 90      in tmux: train, then attach whenever you like
  gpumon run gemm --beside PID --duration 120     (another terminal) what gemm does to it"""


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "wrap",
        help="run your own command with the probe, so a later gpumon can attach to it (--beside PID)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="what a bare 'python' or 'python3' as the command means: your training environment's "
        "Python (default: $GPUMON_PYTHON; without either, the python on PATH, refused when that is "
        "gpumon's own and has no torch)",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARG...]",
        help="the command and its arguments, run without a shell",
    )
    parser.set_defaults(handler=run)


def wrap_env(environ: dict[str, str]) -> dict[str, str]:
    """The command's environment: the auto-probe on its Python path, and no launching monitor's pipe."""
    # deferred: +0.03 s CPU (psutil) on gpumon --help
    from gpumon.core.jobs.launcher import probe_pythonpath
    from gpumon.core.probing.probe import ENV_AUTOPROBE, ENV_FD, ENV_RENDEZVOUS, ENV_SLOT

    env = {k: v for k, v in environ.items() if k not in (ENV_FD, ENV_SLOT)}
    if env.get(ENV_RENDEZVOUS, "").lower() in ("off", "0", "no"):
        raise UsageError(
            f"{ENV_RENDEZVOUS}={env[ENV_RENDEZVOUS]} switches off what wrap is for; unset it"
        )
    env[ENV_AUTOPROBE] = "1"
    env["PYTHONPATH"] = probe_pythonpath(child_path(), env.get("PYTHONPATH", ""), autoprobe=True)
    return env


def run(args: argparse.Namespace) -> int:
    argv = list(args.command)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError("wrap needs a command, e.g. gpumon wrap -- python train.py")
    # deferred: +0.03 s CPU (psutil) on gpumon --help
    from gpumon.core.jobs.launcher import find_program

    argv = list(command_argv(tuple(argv), args.python))
    program = find_program(argv[0])
    env = wrap_env(dict(os.environ))
    # deferred: +0.02 s CPU (psutil) on gpumon --help
    from gpumon.core.probing.rendezvous import problem

    unusable = (
        problem()
    )  # the probe would turn its rendezvous off quietly: nothing could attach to the command
    if unusable:
        raise UsageError(f"the probe's rendezvous cannot be made: {unusable}")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(program, argv, env)
    except OSError as exc:
        raise UsageError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    return 0  # not reached
