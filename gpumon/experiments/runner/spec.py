"""Experiment specs (the shipped ones: the repository's ``experiments/*.toml``, in a wheel ``gpumon/experiments/specs/``): the schema, its validation, and the
settings of one preset.

A spec has an ``[experiment]`` table (what is asked and which analysis answers it), a ``[run]``
table (what to run), ``[presets.NAME]`` tables that override ``[run]`` keys (``options`` is merged,
everything else replaced), and for ``device_cost`` a ``[prices]`` table. Every key is checked;
an unknown key or a bad value is a UsageError naming the file, the table and the key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

# Python 3.10 has the same parser as a package (pyproject: tomli before 3.11)
try:
    import tomllib
except ModuleNotFoundError:
    import tomli as tomllib

from gpumon.core.records.decode import Refused, check_depth
from gpumon.core.records.plainfile import read_plain
from gpumon.core.records.share import SHARE_SYNTAX, parse_share
from gpumon.errors import UsageError
from gpumon.workloads.spec import DEVICE_PATTERN

ANALYSES: dict[str, str] = {
    "pairwise": "every workload alone, then every pair co-resident: slowdown matrix and STP",
    "contention": "copy bandwidth and utilisation distributions, exclusive vs shared",
    "operators": "torch.profiler operator time shares, exclusive and shared, and their similarity",
    "sweep": "one workload at a time over a sweep of workload options: rate and time per iteration",
    "device_cost": "the same workload on each device: time and cost per 1000 iterations",
}
PAIRED_ANALYSES = frozenset({"pairwise", "contention", "operators"})
PAIR_MODES = ("none", "all", "distinct")
DEVICE_KINDS = ("cpu", "cuda")
REQUIREMENTS = ("cuda",)
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_]*")
EXPERIMENT_KEYS = ("name", "title", "question", "analysis", "requires", "study", "notes")
REQUIRED_EXPERIMENT_KEYS = ("name", "title", "question", "analysis")
TOP_LEVEL = ("experiment", "run", "presets", "prices")
MAX_BYTES = 1 << 20  # a spec is read up to this size (the shipped ones: under 4 KiB)
MAX_DEPTH = 8  # tables and arrays nest at most this deep (the shipped specs: 3)


def _fail(table: str, key: str, expected: str, value: object) -> UsageError:
    return UsageError(f"[{table}] {key}: expected {expected}, got {value!r}")


def _number(
    low: float, inclusive: bool, integer: bool = False
) -> Callable[[str, str, Any], float | int]:
    words = ("an integer" if integer else "a number") + (
        f" >= {low:g}" if inclusive else f" > {low:g}"
    )

    def check(table: str, key: str, value: Any) -> float | int:
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or not math.isfinite(value):
            raise _fail(table, key, words, value)
        if value < low or (value == low and not inclusive):
            raise _fail(table, key, words, value)
        return value

    return check


def _text(table: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(table, key, "a non-empty string", value)
    return value.strip()


def _scalar_text(table: str, key: str, value: Any) -> str:
    """A TOML scalar as workload-option text (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)) and not (
        isinstance(value, float) and not math.isfinite(value)
    ):
        return str(value).strip()
    raise _fail(table, key, "a string, number or boolean", value)


def _options(table: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _fail(table, key, 'a table of workload options (e.g. { preset = "tiny" })', value)
    return {k: _scalar_text(table, f"{key}.{k}", v) for k, v in value.items()}


def _workloads(table: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise _fail(table, key, "a non-empty list of workload specs", value)
    return tuple(_text(table, key, v) for v in value)


def _points(table: str, key: str, value: Any) -> tuple[dict[str, str], ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, dict) and v for v in value)
    ):
        raise _fail(table, key, "a non-empty list of option tables", value)
    return tuple(_options(table, key, v) for v in value)


def _sweep(table: str, key: str, value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict) or not value:
        raise _fail(table, key, "a table of option = [values]", value)
    out = {}
    for option, values in value.items():
        if not isinstance(values, list) or not values:
            raise _fail(table, f"{key}.{option}", "a non-empty list of values", values)
        texts = tuple(_scalar_text(table, f"{key}.{option}", v) for v in values)
        if len(set(texts)) != len(texts):
            raise _fail(table, f"{key}.{option}", "distinct values", values)
        out[option] = texts
    return out


def _pairs(table: str, key: str, value: Any) -> str | tuple[tuple[str, str], ...]:
    if isinstance(value, str) and value in PAIR_MODES:
        return value
    if (
        isinstance(value, list)
        and value
        and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in value
        )
    ):
        return tuple((a.strip(), b.strip()) for a, b in value)
    raise _fail(
        table, key, f"one of {', '.join(PAIR_MODES)} or a list of [A, B] workload pairs", value
    )


def _devices(table: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise _fail(table, key, "a non-empty list of devices (cpu, cuda, cuda:N)", value)
    for device in value:
        if not isinstance(device, str) or device == "auto" or not DEVICE_PATTERN.fullmatch(device):
            raise _fail(table, key, "devices cpu, cuda or cuda:N", value)
    if len(set(value)) != len(value):
        raise _fail(table, key, "distinct devices", value)
    return tuple(value)


def _shares(table: str, key: str, value: Any) -> tuple[str, ...]:
    """Share modes of the shared cells, each checked as ``gpumon run --share`` checks it."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _fail(table, key, f"a non-empty list of share modes ({SHARE_SYNTAX})", value)
    for mode in value:
        try:
            parse_share(mode)
        except ValueError:
            raise _fail(table, key, f"share modes {SHARE_SYNTAX}", value) from None
    if len(set(value)) != len(value):
        raise _fail(table, key, "distinct share modes", value)
    return tuple(v.strip() for v in value)


def _device(table: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not DEVICE_PATTERN.fullmatch(value):
        raise _fail(table, key, "auto, cpu, cuda or cuda:N", value)
    return value


@dataclass(frozen=True)
class Key:
    """One ``[run]``/preset key: its checker and default (None: required or unset)."""

    check: Callable[[str, str, Any], Any]
    default: Any
    help: str


RUN_KEYS: dict[str, Key] = {
    "workloads": Key(_workloads, None, 'workload specs, e.g. ["fcn", "lstm:batch=8"] (required)'),
    "options": Key(
        _options, {}, 'workload options added to every workload, e.g. { preset = "tiny" }'
    ),
    "points": Key(_points, (), "explicit option sets, each a point of the sweep"),
    "sweep": Key(_sweep, {}, "option = [values]; every combination (times every point) is a point"),
    "pairs": Key(_pairs, "none", "none, all (with self-pairs), distinct, or [[A, B], ...]"),
    "devices": Key(_devices, (), 'devices to compare (device_cost), e.g. ["cpu", "cuda"]'),
    "device": Key(_device, "auto", "auto, cpu, cuda or cuda:N (--device overrides)"),
    "share": Key(
        _shares,
        ("timeslice",),
        'how shared cells share the GPU: ["timeslice", "mps"] runs each pair both ways',
    ),
    "seconds": Key(
        _number(0, False), None, "seconds each job is measured (required; --seconds overrides)"
    ),
    "startup": Key(
        _number(0, True),
        60.0,
        "seconds allowed for start-up and warm-up before a cell stops waiting",
    ),
    "stagger": Key(_number(0, True), 0.0, "seconds B starts after A in a shared cell"),
    "repeats": Key(_number(1, True, integer=True), 1, "runs of every cell (--repeats overrides)"),
    "warmup": Key(
        _number(0, True, integer=True), None, "steps flagged as warm-up (gpumon's default 5)"
    ),
    "interval_ms": Key(_number(10, True, integer=True), 100, "sampling interval of each run"),
    "profile_steps": Key(
        _number(1, True, integer=True), 50, "operators: at most this many profiled steps"
    ),
}


@dataclass(frozen=True)
class Prices:
    """Prices per hour of a machine of each device kind (cpu, cuda)."""

    currency: str
    per_hour: dict[str, float]


@dataclass(frozen=True)
class Settings:
    """What one preset runs: every ``[run]`` key checked, defaults (RUN_KEYS) filled in."""

    workloads: tuple[str, ...]
    options: dict[str, str]
    points: tuple[dict[str, str], ...]
    sweep: dict[str, tuple[str, ...]]
    pairs: str | tuple[tuple[str, str], ...]
    devices: tuple[str, ...]
    device: str
    share: tuple[str, ...]
    seconds: float
    startup: float
    stagger: float
    repeats: int
    warmup: int | None
    interval_ms: int
    profile_steps: int


@dataclass(frozen=True)
class ExperimentSpec:
    """A whole spec file: what it asks, its analysis, and the settings of each preset."""

    path: Path
    name: str
    title: str
    question: str
    analysis: str
    requires: str | None
    study: str
    notes: str
    presets: dict[str, Settings]
    prices: Prices | None


def _check_keys(
    table: str, data: dict[str, Any], allowed: tuple[str, ...] | dict[str, Any]
) -> None:
    for key in data:
        if key not in allowed:
            raise UsageError(
                f"[{table}] unknown key {key!r} (expected one of: {', '.join(allowed)})"
            )


def _run_table(table: str, data: Any) -> dict[str, Any]:
    """The checked keys of a ``[run]`` or preset table (only those given)."""
    if not isinstance(data, dict):
        raise UsageError(f"[{table}] must be a table")
    _check_keys(table, data, RUN_KEYS)
    return {key: RUN_KEYS[key].check(table, key, value) for key, value in data.items()}


def _settings(table: str, base: dict[str, Any], override: dict[str, Any]) -> Settings:
    merged = {key: spec.default for key, spec in RUN_KEYS.items()}
    merged.update(base)
    merged.update(override)
    merged["options"] = {**base.get("options", {}), **override.get("options", {})}
    for key in ("workloads", "seconds"):
        if merged[key] is None:
            raise UsageError(f"[{table}] {key} is required ({RUN_KEYS[key].help})")
    return Settings(**merged)


def _experiment(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise UsageError("[experiment] table is required")
    _check_keys("experiment", data, EXPERIMENT_KEYS)
    for key in REQUIRED_EXPERIMENT_KEYS:
        if key not in data:
            raise UsageError(f"[experiment] {key} is required")
    out = {key: _text("experiment", key, data[key]) for key in EXPERIMENT_KEYS if key in data}
    if not NAME_PATTERN.fullmatch(out["name"]):
        raise _fail("experiment", "name", "lower-case letters, digits and _", out["name"])
    if out["analysis"] not in ANALYSES:
        raise _fail("experiment", "analysis", f"one of {', '.join(ANALYSES)}", out["analysis"])
    if out.get("requires", "cuda") not in REQUIREMENTS:
        raise _fail("experiment", "requires", f"one of {', '.join(REQUIREMENTS)}", out["requires"])
    return out


def _prices(data: Any) -> Prices | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise UsageError("[prices] must be a table")
    _check_keys("prices", data, ("currency", *DEVICE_KINDS))
    currency = _text("prices", "currency", data.get("currency", "USD"))
    per_hour = {
        kind: float(_number(0, True)("prices", kind, data[kind]))
        for kind in DEVICE_KINDS
        if kind in data
    }
    if not per_hour:
        raise UsageError(
            f"[prices] needs a price per hour for at least one of: {', '.join(DEVICE_KINDS)}"
        )
    return Prices(currency, per_hour)


def table_name(preset: str) -> str:
    """Where a preset's settings come from: ``[run]`` alone, or ``[presets.NAME]``."""
    return "[run]" if preset == "default" else f"[presets.{preset}]"


def device_kind(device: str) -> str:
    """``cpu`` or ``cuda`` (for ``cuda:N`` too)."""
    return device.split(":", 1)[0]


def _check_layout(table: str, analysis: str, s: Settings, prices: Prices | None) -> None:
    """The keys an analysis needs, and none it would ignore."""
    paired = analysis in PAIRED_ANALYSES
    if paired and s.pairs == "none":
        raise UsageError(
            f"[{table}] pairs: the {analysis} analysis needs pairs (all, distinct or a list)"
        )
    if not paired and s.pairs != "none":
        raise UsageError(f"[{table}] pairs: the {analysis} analysis runs no pairs; remove the key")
    if analysis != "sweep" and (s.sweep or s.points):
        raise UsageError(f'[{table}] sweep/points only go with analysis = "sweep"')
    if analysis == "sweep" and not (s.sweep or s.points):
        raise UsageError(f"[{table}] the sweep analysis needs a sweep table or points")
    if analysis == "device_cost":
        if not s.devices:
            raise UsageError(
                f'[{table}] devices: the device_cost analysis needs devices, e.g. ["cpu", "cuda"]'
            )
        missing = sorted(
            {device_kind(d) for d in s.devices} - set(prices.per_hour if prices else ())
        )
        if missing:
            raise UsageError(
                f"[prices] needs a price per hour for {', '.join(missing)} (devices are {list(s.devices)})"
            )
    elif s.devices:
        raise UsageError(f'[{table}] devices only go with analysis = "device_cost" (use --device)')
    if s.points and s.sweep:
        shared = sorted({k for p in s.points for k in p} & set(s.sweep))
        if shared:
            raise UsageError(f"[{table}] {', '.join(shared)} is both in points and in sweep")


def parse_spec(text: str, path: Path) -> ExperimentSpec:
    """Check a spec's text completely; errors name the file, the table and the key."""
    try:
        return _parse(text, path)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _parse(text: str, path: Path) -> ExperimentSpec:
    data = _decoded(text)
    for key in data:
        if key not in TOP_LEVEL:
            raise UsageError(f"unknown table {key!r} (expected: {', '.join(TOP_LEVEL)})")
    meta = _experiment(data.get("experiment"))
    base = _run_table("run", data.get("run", {}))
    raw_presets = data.get("presets", {})
    if not isinstance(raw_presets, dict) or not all(
        isinstance(v, dict) for v in raw_presets.values()
    ):
        raise UsageError("[presets] must hold tables, e.g. [presets.tiny]")
    prices = _prices(data.get("prices"))
    if prices is not None and meta["analysis"] != "device_cost":
        raise UsageError('[prices] only goes with analysis = "device_cost"')
    presets: dict[str, Settings] = {}
    for name, table in raw_presets.items():
        where = f"presets.{name}"
        if not NAME_PATTERN.fullmatch(name):
            raise _fail("presets", name, "a preset name of lower-case letters, digits and _", name)
        presets[name] = _settings(where, base, _run_table(where, table))
    if not presets:
        presets["default"] = _settings("run", base, {})
    for name, settings in presets.items():
        _check_layout(table_name(name).strip("[]"), meta["analysis"], settings, prices)
    return ExperimentSpec(
        path=path,
        name=meta["name"],
        title=meta["title"],
        question=meta["question"],
        analysis=meta["analysis"],
        requires=meta.get("requires"),
        study=meta.get("study", ""),
        notes=meta.get("notes", ""),
        presets=presets,
        prices=prices,
    )


def _decoded(text: str) -> dict[str, Any]:
    """A spec's TOML as values: nested at most MAX_DEPTH, every float finite; UsageError saying why not."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"not valid TOML: nested deeper than {MAX_DEPTH} levels") from None
    try:
        check_depth(data, MAX_DEPTH)
    except Refused as exc:
        raise UsageError(f"not valid TOML: {exc}") from None
    stack: list[Any] = [data]
    while stack:
        item = stack.pop()
        for value in item.values() if isinstance(item, dict) else item:
            if isinstance(value, (dict, list)):
                stack.append(value)
            elif isinstance(value, float) and not math.isfinite(value):
                raise UsageError(f"{value} is not a number an experiment can use")
    return data


def load_spec(path: Path) -> ExperimentSpec:
    """The spec in ``path``: read at most MAX_BYTES, UTF-8, then ``parse_spec``; UsageError saying what is wrong."""
    try:
        raw = read_plain(path, max_bytes=MAX_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read experiment spec {path}: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise UsageError(f"{path}: larger than {MAX_BYTES} bytes: not an experiment spec")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text: not an experiment spec") from None
    return parse_spec(text, path)


def choose_preset(spec: ExperimentSpec, requested: str | None, on_cuda: bool) -> str:
    """The preset asked for, else ``paper`` on CUDA / ``tiny`` on the CPU when defined, else the first."""
    if requested is not None:
        if requested not in spec.presets:
            raise UsageError(
                f"{spec.path}: no preset {requested!r} (choose from {', '.join(spec.presets)})"
            )
        return requested
    preferred = "paper" if on_cuda else "tiny"
    return preferred if preferred in spec.presets else next(iter(spec.presets))


def with_overrides(
    settings: Settings, *, seconds: float | None, repeats: int | None, device: str | None
) -> Settings:
    """Apply ``--seconds``, ``--repeats`` and ``--device`` (already checked by the command line)."""
    changes: dict[str, Any] = {}
    if seconds is not None:
        changes["seconds"] = seconds
    if repeats is not None:
        changes["repeats"] = repeats
    if device is not None:
        changes["device"] = device
    return replace(settings, **changes)


def shipped_dir() -> Path:
    """The shipped specs: ``gpumon/experiments/specs/`` in an installed wheel (setup.py maps them there), else the
    repository's top-level ``experiments/`` (a source checkout, an editable install)."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "specs"
    return installed if installed.is_dir() else package.parents[1] / "experiments"


def find_spec(text: str) -> Path:
    """A spec path as given, or the name of a shipped spec (``q2_pairwise``)."""
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if path.suffix != ".toml" and len(path.parts) == 1:
        candidate = shipped_dir() / f"{text}.toml"
        if candidate.is_file():
            return candidate
    shipped = ", ".join(p.stem for p in shipped_specs()) or "none found"
    raise UsageError(f"no experiment spec {text!r} (a .toml file, or a shipped spec: {shipped})")


def shipped_specs() -> list[Path]:
    directory = shipped_dir()
    return sorted(directory.glob("*.toml")) if directory.is_dir() else []
