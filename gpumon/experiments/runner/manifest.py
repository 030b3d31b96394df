"""``cells.json``: what became of every cell (ok, failed, interrupted, skipped), for resume and tracing."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpumon.core.records.decode import read_json
from gpumon.core.records.printable import printable
from gpumon.core.store.recorder import write_json_atomic
from gpumon.errors import UsageError
from gpumon.experiments.runner.cells import Cell
from gpumon.safewrite import ensure_folder

MANIFEST = "cells.json"
MANIFEST_MAX_BYTES = 16 << 20  # cells.json is read up to this size (a cell is ~1 KiB)
OK, FAILED, INTERRUPTED, SKIPPED = "ok", "failed", "interrupted", "skipped"
FORMAT = 1


@dataclass
class CellRecord:
    """The outcome of one cell; paths are relative to the experiment directory."""

    id: str
    status: str
    config: dict[str, Any]
    reason: str | None = None
    note: str | None = None
    run: str | None = None
    command: list[str] = field(default_factory=list)
    log: str | None = None
    started_at: str | None = None
    elapsed_s: float | None = None
    profiles: dict[str, str] = field(default_factory=dict)


@dataclass
class Manifest:
    """The experiment directory's record of its cells, rewritten atomically after every cell."""

    directory: Path
    header: dict[str, Any]
    records: dict[str, CellRecord] = field(default_factory=dict)
    own: bool = False  # the folder is this experiment's (it held its manifest, or this saved it): outputs replaced

    @property
    def path(self) -> Path:
        return self.directory / MANIFEST

    @classmethod
    def open(cls, directory: Path, header: dict[str, Any]) -> Manifest:
        """The directory's manifest (checked to be of the same experiment), or a new one."""
        path = directory / MANIFEST
        if not path.exists():
            return cls(directory, header)
        try:
            data = read_json(path, max_bytes=MANIFEST_MAX_BYTES)
            records = {r["id"]: CellRecord(**r) for r in data["cells"]}
            old = data["experiment"]
            if not isinstance(old, dict):
                raise TypeError("its experiment is not an object")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(
                printable(f"{path}: not a readable experiment manifest ({exc}); use another --out")
            ) from None
        if old.get("name") != header["name"]:
            raise UsageError(
                printable(
                    f"{directory} holds experiment {old.get('name')!r}, not {header['name']!r}; use another --out"
                )
            )
        return cls(directory, header, records, own=True)

    @staticmethod
    def recorded_python(directory: Path) -> str | None:
        """The workloads' Python (``--python`` or ``$GPUMON_PYTHON``) the experiment in ``directory`` last ran with."""
        try:
            python = read_json(directory / MANIFEST, max_bytes=MANIFEST_MAX_BYTES)[
                "experiment"
            ].get("python")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return python if isinstance(python, str) and python else None

    def save(self) -> None:
        ensure_folder(self.directory)
        data = {
            "format": FORMAT,
            "experiment": self.header,
            "cells": [asdict(r) for r in self.records.values()],
        }
        write_json_atomic(self.path, data)
        self.own = True

    def completed(self, cell: Cell, retry_failed: bool) -> CellRecord | None:
        """The record of ``cell`` if it need not run again: same configuration, ok (or failed, unless retried)."""
        record = self.records.get(cell.id)
        if record is None or record.config != cell.config():
            return None
        if (
            record.status == OK
            and record.run is not None
            and (self.directory / record.run / "run.json").is_file()
        ):
            return record
        if record.status == FAILED and not retry_failed:
            return record
        return None

    def put(self, record: CellRecord) -> None:
        self.records[record.id] = record
        self.save()
