"""Expansion of one preset's settings into cells: one ``gpumon run`` each, exclusive or shared."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from gpumon.core.records.enums import ShareKind
from gpumon.errors import UsageError
from gpumon.experiments.runner.spec import ExperimentSpec, Settings, table_name
from gpumon.workloads.spec import WorkloadSpec, format_value, parse_workload_spec, spec_from_options

UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
# The most cells one experiment may ask for: each is a real run of at least ``seconds`` with its own run directory,
# so 10,000 of even 1 s each are a day of runs; a spec asking for more is a slip (repeats = 1000000000 made gpumon
# build the cells in memory for ever).
MAX_CELLS = 10_000


@dataclass(frozen=True)
class Job:
    """One workload of a cell: its key in the spec (``fcn``, ``fcn-2``) and its canonical spec text."""

    key: str
    spec: str


@dataclass(frozen=True)
class Cell:
    """One run of the experiment; ``point`` is the sweep point (or the device) it measures."""

    id: str
    mode: str
    jobs: tuple[Job, ...]
    device: str
    point: tuple[tuple[str, str], ...]
    repeat: int
    seconds: float
    startup: float
    stagger: float
    warmup: int | None
    interval_ms: int
    profile_steps: int | None = None
    share: str = "timeslice"

    @property
    def duration_s(self) -> float:
        """How long ``gpumon run`` runs: a shared cell measures ``seconds`` after B has started."""
        return (self.stagger if self.mode == "shared" else 0.0) + self.startup + self.seconds

    @property
    def group(self) -> str:
        """The cell's id without its repeat: repeats of one configuration share it."""
        return self.id.rsplit("-r", 1)[0]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(j.key for j in self.jobs)

    def config(self) -> dict[str, Any]:
        """Everything that shapes the cell's result: a completed cell is reused only if this matches."""
        data = asdict(self)
        data.pop("id")
        if data["share"] == ShareKind.TIMESLICE:
            del data["share"]  # as recorded before share modes existed, so those cells still resume
        data["jobs"] = [[j.key, j.spec] for j in self.jobs]
        data["point"] = [list(p) for p in self.point]
        return data


def workload_keys(workloads: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(key, raw spec)`` for each workload; a repeated name gets ``-2``, ``-3``..."""
    seen: dict[str, int] = {}
    out = []
    for raw in workloads:
        name = raw.split(":", 1)[0].strip().lower()
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name}-{seen[name]}", raw))
    return out


def build_workload(raw: str, options: dict[str, str], point: dict[str, str]) -> WorkloadSpec:
    """The workload ``raw`` with the spec's ``options`` (its own win) and the sweep ``point`` added."""
    try:
        own = parse_workload_spec(raw)
        clash = sorted(set(own.options) & set(point))
        if clash:
            raise UsageError(f"{raw} sets {', '.join(clash)}, which the sweep varies")
        merged = {**options, **{k: format_value(v) for k, v in own.options.items()}, **point}
        return spec_from_options(own.name, merged.items())
    except UsageError as exc:
        raise UsageError(f"workload {raw!r}: {exc}") from None


def sweep_points(settings: Settings) -> list[dict[str, str]]:
    """Every point: each explicit point times every combination of the sweep values."""
    base = list(settings.points) or [{}]
    names = list(settings.sweep)
    combos = [dict(zip(names, values)) for values in itertools.product(*settings.sweep.values())]
    return [{**p, **c} for p in base for c in combos]


def pair_list(settings: Settings, keys: list[str]) -> list[tuple[str, str]]:
    """The pairs to run as (A, B): A starts first."""
    if settings.pairs == "all":
        return list(itertools.combinations_with_replacement(keys, 2))
    if settings.pairs == "distinct":
        return list(itertools.combinations(keys, 2))
    if settings.pairs == "none" or isinstance(settings.pairs, str):
        return []
    for a, b in settings.pairs:
        for key in (a, b):
            if key not in keys:
                raise UsageError(
                    f"pairs: unknown workload {key!r} (workloads are {', '.join(keys)})"
                )
    return list(settings.pairs)


def point_label(point: tuple[tuple[str, str], ...]) -> str:
    return "-".join(UNSAFE.sub("-", v if k == "device" else f"{k}{v}") for k, v in point)


def cell_id(
    mode: str,
    keys: tuple[str, ...],
    point: tuple[tuple[str, str], ...],
    repeat: int,
    share: str = "timeslice",
) -> str:
    parts = ["x" if mode == "exclusive" else "s", "+".join(keys)]
    if point:
        parts.append(point_label(point))
    if share != ShareKind.TIMESLICE:
        parts.append(share_label(share))
    return f"{'-'.join(parts)}-r{repeat}"


def share_label(share: str) -> str:
    """A share mode as a name part: ``mps``, ``mps-threads-30-70``."""
    return UNSAFE.sub("-", share.replace("=", "-")).strip("-")


def cell_devices(settings: Settings, device: str) -> list[str]:
    """The spec's devices (``cuda`` becomes ``device`` when that is ``cuda:N``), else ``device``."""
    if not settings.devices:
        return [device]
    gpu = device if device.startswith("cuda:") else "cuda"
    return [gpu if d == "cuda" else d for d in settings.devices]


def cell_count(spec: ExperimentSpec, settings: Settings, device: str) -> int:
    """How many cells ``expand`` would make, counted without making them."""
    n = len(settings.workloads)
    pairs = {"all": n * (n + 1) // 2, "distinct": n * (n - 1) // 2, "none": 0}
    n_pairs = pairs[settings.pairs] if isinstance(settings.pairs, str) else len(settings.pairs)
    points = 1
    if spec.analysis == "sweep":
        points = max(len(settings.points), 1) * math.prod(
            len(values) for values in settings.sweep.values()
        )
    per_point = n + len(settings.share) * n_pairs
    return settings.repeats * points * len(cell_devices(settings, device)) * per_point


def check_size(spec: ExperimentSpec, settings: Settings, device: str) -> None:
    """Refuse, before any cell is made, an experiment of more than ``MAX_CELLS`` cells."""
    count = cell_count(spec, settings, device)
    if count > MAX_CELLS:
        hours = count * settings.seconds / 3600
        raise UsageError(
            f"asks for {count:,} cells (repeats {settings.repeats:,}); at most {MAX_CELLS:,}: each cell is a "
            f"real run of at least {settings.seconds:g} s ({hours:,.0f} hours of runs at the least) with a "
            "run directory of its own; lower repeats or split the experiment"
        )


def expand(spec: ExperimentSpec, settings: Settings, device: str) -> list[Cell]:
    """All cells of one preset on ``device`` (a resolved device, not ``auto``), repeats outermost."""
    check_size(spec, settings, device)
    keyed = workload_keys(settings.workloads)
    variants: list[tuple[tuple[tuple[str, str], ...], str, dict[str, Job]]] = []
    for point in sweep_points(settings) if spec.analysis == "sweep" else [{}]:
        built = {key: build_workload(raw, settings.options, point) for key, raw in keyed}
        jobs = {key: Job(key, spec.text) for key, spec in built.items()}
        canonical = tuple((k, format_value(next(iter(built.values())).options[k])) for k in point)
        for dev in cell_devices(settings, device):
            shown = canonical + ((("device", dev),) if settings.devices else ())
            variants.append((shown, dev, jobs))
    pairs = pair_list(settings, [key for key, _ in keyed])
    profile_steps = settings.profile_steps if spec.analysis == "operators" else None
    cells = []
    for repeat in range(1, settings.repeats + 1):
        for shown, dev, jobs in variants:
            # an exclusive run is the baseline of every share mode; each pair runs once per mode
            layouts: list[tuple[str, tuple[str, ...], str]] = [
                ("exclusive", (key,), "timeslice") for key in jobs
            ]
            layouts += [("shared", pair, share) for share in settings.share for pair in pairs]
            for mode, keys, share in layouts:
                cells.append(
                    Cell(
                        id=cell_id(mode, keys, shown, repeat, share),
                        mode=mode,
                        jobs=tuple(jobs[k] for k in keys),
                        device=dev,
                        point=shown,
                        repeat=repeat,
                        seconds=settings.seconds,
                        startup=settings.startup,
                        stagger=settings.stagger,
                        warmup=settings.warmup,
                        interval_ms=settings.interval_ms,
                        profile_steps=profile_steps,
                        share=share,
                    )
                )
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise UsageError(
            f"two cells would share the id {duplicate!r}; make the workloads or sweep values distinct"
        )
    return cells


def check_all_presets(spec: ExperimentSpec) -> None:
    """Expand every preset once, so a bad workload option anywhere fails before anything runs."""
    for name, settings in spec.presets.items():
        try:
            expand(spec, settings, "cpu")
        except UsageError as exc:
            raise UsageError(f"{spec.path}: {table_name(name)} {exc}") from None
