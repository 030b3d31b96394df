"""The commands' argument types: argparse ``type=`` converters shared by every subcommand (bad values become
argparse errors), and the options whose bad values are gpumon's one-line ``UsageError`` (exit 2): ``--gpu``,
``--share``, ``--metrics``, the A=/B= run arguments."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from gpumon.errors import UsageError
from gpumon.core.jobs.devices import UUID_PREFIXES
from gpumon.core.records.share import SHARE_SYNTAX, ShareMode, parse_share

DEFAULT_METRICS_HOST = "127.0.0.1"


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def finite_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def count(text: str) -> int:
    """A whole number of things, 0 or more (``--warmup 0``: no step is warm-up)."""
    value = whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


def positive_whole_number(text: str) -> int:
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = finite_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0: {text!r}")
    return value


_ASSIGNED = re.compile(r"^([AB])=(.+)$")


def add_exclusive(parser: argparse.ArgumentParser, help: str) -> None:
    """``--exclusive [A=|B=]RUN``, given once per solo run: the exclusive runs ``parse_runs`` reads."""
    parser.add_argument("--exclusive", metavar="[A=|B=]RUN", action="append", default=[], help=help)


def parse_runs(
    exclusive: list[str], shared: list[str]
) -> tuple[list[Path], list[Path], dict[str, str]]:
    """Absolute paths of the exclusive and shared runs, and the A=/B= assignments keyed by path.

    A run is what ``runstore.resolve_run`` resolves: a directory, a run's name or label, or ``last``. A run named
    twice among the exclusive or among the shared runs (under any name: a path, its run name or label, ``last``) is
    refused: it would count as two repeats of one measurement.
    """
    # deferred: +0.04 s CPU (psutil) on gpumon --help
    from gpumon.core.store.runstore import resolve_run
    from gpumon.core.store.runsfolder import runs_dir_or_default

    runs_dir = runs_dir_or_default(None)
    assign: dict[str, str] = {}
    exclusive_paths = []
    for item in exclusive:
        match = _ASSIGNED.match(item)
        path = resolve_run(match.group(2) if match else item, runs_dir).resolve()
        if match:
            assign[str(path)] = match.group(1)
        exclusive_paths.append(path)
    shared_paths = [resolve_run(s, runs_dir).resolve() for s in shared]
    for named in (
        exclusive_paths,
        shared_paths,
    ):  # across the two, compare's own check says which the run is
        twice = next((path for i, path in enumerate(named) if path in named[:i]), None)
        if twice is not None:
            raise UsageError(
                f"run {twice.name} is given twice: a run counts once (repeats are runs of their own)"
            )
    return exclusive_paths, shared_paths, assign


def gpu(text: str) -> int | str:
    """``--gpu``: an NVML index (``0``) or a UUID (``GPU-…``, ``MIG-…``); anything else is a UsageError."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text.startswith(UUID_PREFIXES):
        return text
    raise UsageError(
        f"--gpu {text!r}: expected a GPU index (0, 1, ...) or a UUID (GPU-..., as nvidia-smi -L lists)"
    )


def share(text: str) -> ShareMode:
    """``--share``: a share mode (``gpumon.core.records.share``, which experiment specs share), else a UsageError."""
    try:
        return parse_share(text)
    except ValueError as exc:
        if str(exc):
            raise UsageError(f"bad --share {text!r}: {exc}") from None
        raise UsageError(f"bad --share {text!r} (choose {SHARE_SYNTAX})") from None


def metrics_address(text: str) -> tuple[str, int]:
    """``--metrics [HOST:]PORT`` (``[::1]:9400`` for IPv6) as (host, port); host defaults to 127.0.0.1."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]") if sep else DEFAULT_METRICS_HOST
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UsageError(
            f"bad --metrics {text!r} (expected [HOST:]PORT, e.g. 9400 or 0.0.0.0:9400)"
        )
    if not host:
        raise UsageError(f"bad --metrics {text!r}: empty host")
    return host, int(port_text)
