"""Built-in workload names, presets and options, and the ``NAME:key=value,...`` spec parser.

The parent process imports this module to validate user input before it launches anything, so it
must never import torch (nor numpy).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable

from gpumon.errors import UsageError

WORKLOADS: dict[str, str] = {
    "fcn": "5 fully connected layers with ReLU on MNIST-sized vectors (dense GEMMs, small copies)",
    "vgg19": "torchvision VGG-19 image classifier (conv-heavy, large images to copy)",
    "resnet50": "torchvision ResNet-50 image classifier (conv + batch norm, large images to copy)",
    "lstm": "word-level LSTM language model, truncated BPTT over a Zipf token stream",
    "h2d": "copy-bound: a large pinned host buffer to the device every step, almost no compute",
    "gemm": "compute-bound: a stack of N x N matmuls on device-resident data, no copies",
}

DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")  # match with fullmatch
PRESET_NAMES = ("tiny", "paper")

PRESETS: dict[str, dict[str, dict[str, int | float]]] = {
    "paper": {
        "fcn": {"batch": 64, "inputs": 784, "width": 4096, "classes": 10},
        "vgg19": {"batch": 32, "image": 224, "classes": 1000, "head": 4096},
        "resnet50": {"batch": 32, "image": 224, "classes": 1000},
        "lstm": {
            "batch": 20,
            "vocab": 10000,
            "emsize": 650,
            "nhid": 650,
            "layers": 2,
            "bptt": 35,
            "dropout": 0.5,
        },
        "h2d": {"batch": 64, "sample_kib": 1024},
        "gemm": {"batch": 8192, "n": 8192, "layers": 3},
    },
    "tiny": {
        "fcn": {"batch": 64, "inputs": 784, "width": 512, "classes": 10},
        "vgg19": {"batch": 4, "image": 32, "classes": 10, "head": 512},
        "resnet50": {"batch": 4, "image": 32, "classes": 10},
        "lstm": {
            "batch": 8,
            "vocab": 1000,
            "emsize": 64,
            "nhid": 64,
            "layers": 2,
            "bptt": 16,
            "dropout": 0.2,
        },
        "h2d": {"batch": 32, "sample_kib": 1024},
        "gemm": {"batch": 256, "n": 256, "layers": 3},
    },
}

WORKLOADS_WITHOUT_INPUT = frozenset({"gemm"})


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(raw)
    return value


def _positive_seconds(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(raw)
    return value


def _fraction(raw: str) -> float:
    value = float(raw)
    if not 0 < value <= 1:
        raise ValueError(raw)
    return value


def _boolean(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(raw)


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.lower() not in choices:
            raise ValueError(raw)
        return raw.lower()

    return parse


def parse_cpus(raw: str) -> tuple[int, ...]:
    """Parse a CPU list such as ``0``, ``0-3`` or ``0,2,4-5`` into sorted unique CPU numbers."""
    cpus: set[int] = set()
    for part in raw.split(","):
        first, dash, last = part.strip().partition("-")
        low = int(first)
        high = int(last) if dash else low
        if low < 0 or high < low:
            raise ValueError(raw)
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))


def format_cpus(cpus: Iterable[int]) -> str:
    """Format CPU numbers as a compact list (``0-2,5``)."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


@dataclass(frozen=True)
class Option:
    """One ``key=value`` option of a workload spec."""

    name: str
    parse: Callable[[str], object]
    expected: str
    help: str


OPTIONS: dict[str, Option] = {
    option.name: option
    for option in (
        Option(
            "batch", _positive_int, "an integer > 0", "samples per step (default: the preset's)"
        ),
        Option(
            "preset",
            _choice(*PRESET_NAMES),
            "tiny or paper",
            "model and input sizes (paper on CUDA, tiny on CPU)",
        ),
        Option("threads", _positive_int, "an integer > 0", "torch intra-op threads"),
        Option(
            "cpus",
            parse_cpus,
            "a CPU list like 0, 0-1 or 0,2",
            "CPU affinity of the training process",
        ),
        Option(
            "memory_fraction",
            _fraction,
            "a number with 0 < f <= 1",
            "cap of the CUDA caching allocator",
        ),
        Option(
            "input",
            _choice("synthetic", "disk"),
            "synthetic or disk",
            "in-memory batches or a DataLoader",
        ),
        Option(
            "workers",
            _non_negative_int,
            "an integer >= 0",
            "DataLoader processes for input=disk (default 2)",
        ),
        Option(
            "pin",
            _boolean,
            "true or false",
            "pinned host memory for the batches (default: true on CUDA)",
        ),
        Option("seed", int, "an integer", "seed of every random generator (default 0)"),
        Option("steps", _positive_int, "an integer > 0", "stop after this many steps"),
        Option(
            "duration",
            _positive_seconds,
            "a number of seconds > 0",
            "stop after this many seconds of training",
        ),
        Option(
            "warmup", _non_negative_int, "an integer >= 0", "steps flagged as warm-up (default 5)"
        ),
    )
}


def format_value(value: object) -> str:
    """The canonical text of a typed option value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return format_cpus(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


@dataclass(frozen=True)
class WorkloadSpec:
    """A validated built-in workload: its name, the options given (typed), and the canonical text."""

    name: str
    options: dict[str, object] = field(hash=False)
    text: str


def _choices(names: Iterable[str]) -> str:
    return ", ".join(names)


def _check_name(name: str) -> str:
    lowered = name.strip().lower()
    if lowered not in WORKLOADS:
        shown = name.strip() or "(empty)"
        raise UsageError(f"unknown workload '{shown}' (choose from {_choices(WORKLOADS)})")
    return lowered


def spec_from_options(name: str, pairs: Iterable[tuple[str, str]]) -> WorkloadSpec:
    """Validate a workload name and ``(key, raw value)`` pairs into a spec."""
    name = _check_name(name)
    options: dict[str, object] = {}
    for raw_key, raw_value in pairs:
        key = raw_key.strip().lower()
        value = raw_value.strip()
        option = OPTIONS.get(key)
        if option is None:
            raise UsageError(
                f"unknown option '{raw_key.strip()}' for {name} (choose from {_choices(OPTIONS)})"
            )
        if key in options:
            raise UsageError(f"option '{key}' given twice for {name}")
        try:
            options[key] = option.parse(value)
        except ValueError:
            raise UsageError(
                f"bad value for {key}: '{value}' (expected {option.expected})"
            ) from None
    if name in WORKLOADS_WITHOUT_INPUT and options.get("input") == "disk":
        raise UsageError(
            f"{name} reads no input data, so input=disk is not available (use input=synthetic)"
        )
    ordered = {key: options[key] for key in OPTIONS if key in options}
    text = name + (
        ":" + ",".join(f"{k}={format_value(v)}" for k, v in ordered.items()) if ordered else ""
    )
    return WorkloadSpec(name=name, options=ordered, text=text)


def split_option(item: str) -> tuple[str, str]:
    """Split one ``key=value`` item; a missing ``=`` is a UsageError."""
    key, equals, value = item.partition("=")
    if not equals or not key.strip():
        raise UsageError(f"bad option '{item}' (expected key=value)")
    return key, value


def parse_workload_spec(text: str) -> WorkloadSpec:
    """Parse ``NAME`` or ``NAME:key=value,key=value`` (a CPU list may continue after a comma)."""
    name, colon, rest = text.strip().partition(":")
    if not colon:
        return spec_from_options(name, ())
    items: list[str] = []
    for piece in rest.split(","):
        if "=" not in piece and items and piece.strip():
            items[-1] += "," + piece
        elif piece.strip():
            items.append(piece)
        else:
            raise UsageError(f"empty option in workload spec '{text.strip()}'")
    return spec_from_options(name, (split_option(item) for item in items))


def to_argv(spec: WorkloadSpec, device: str, python: str | None = None) -> list[str]:
    """The command line of the child process that runs ``spec`` on ``device`` (with ``python``, default ours)."""
    argv = [python or sys.executable, "-m", "gpumon.workloads", spec.name, "--device", device]
    for key, value in spec.options.items():
        argv += ["--opt", f"{key}={format_value(value)}"]
    return argv
