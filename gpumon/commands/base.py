"""What every subcommand module is (``Command``), and the examples the program's help and ``run --help`` share."""

from __future__ import annotations

import argparse
from typing import Protocol


class Command(Protocol):
    """A module of ``gpumon/commands``: one subcommand.

    ``register`` adds its parser to the CLI's subparsers with ``handler=run`` (arguments only: what the command
    needs to carry itself out is imported by ``run``, so ``gpumon --help`` and every other command stay fast);
    ``run`` carries it out and returns the exit status (bad input raises ``UsageError``: exit 2).
    """

    def register(
        self, subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]"
    ) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# How every command's help says what names a run (``core/store/runstore.resolve_run``).
RUN_HELP = "a run directory, a run's name or --label in the runs directory (a label names its newest run), or 'last'"


EPILOG = """\
examples:
  gpumon run fcn lstm                    live monitor, two built-in jobs sharing the device
  gpumon run fcn gemm --headless --duration 30
  gpumon run fcn --cmd "python train.py" --stagger 10
  gpumon run gemm --beside 4242 --duration 120   what starting gemm does to your running job (pid 4242)
  gpumon run fcn vgg19 --share mps       the same pair under NVIDIA MPS instead of time slicing
  gpumon runs                            list captures
  gpumon export last --csv               plain CSV of the newest capture, into ./RUN_NAME-csv
  gpumon compare --exclusive RUN_A --exclusive RUN_B --shared RUN_AB

Built-in workloads: fcn, vgg19, resnet50, lstm, h2d (copy-bound), gemm (compute-bound).
Options follow a colon: resnet50:batch=16,preset=tiny,input=disk (see docs/workloads.md).
Runs are stored in $GPUMON_RUNS, else $XDG_DATA_HOME/gpumon/runs, else ~/.local/share/gpumon/runs."""
