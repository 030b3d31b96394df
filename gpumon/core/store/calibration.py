"""Per-GPU-model constants measured by ``gpumon calibrate``: where they are stored and how ``predict`` reads them.

One JSON file per GPU model (``<name>.json``, the name as NVML gives it, made file-safe) in
``$GPUMON_CALIBRATION``, else ``$XDG_DATA_HOME/gpumon/calibration``, else ``~/.local/share/gpumon/calibration``
(beside the runs directory, ``runsfolder.default_runs_dir``). A later calibration of the same model replaces the
earlier one. The constants are plain numbers here (``gpumon.analysis.predict_model.Constants`` names them);
the store knows nothing of the model.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpumon.safewrite import ensure_folder, replacing
from gpumon.core.records.decode import Refused, number, read_json

ENV = "GPUMON_CALIBRATION"
SCHEMA = 1
# What a calibration may hold, each a positive number: the time slice, the switch cost, NVML utilisation's scale
# (kernel time per unit of utilisation) and, where MPS ran, the SMs a GPU-bound job's kernels fill
KNOWN = ("slice_s", "switch_s", "util_scale", "sm_fill")
# Each constant's physical bounds: a time slice and a switch of at most 10 s and 1 s (the H100's are 2 ms and
# ~50 µs), a utilisation scale of at most 100, an SM fill of at most 1 (analysis/calibration.py keeps it there).
BOUNDS: dict[str, tuple[float, float]] = {
    "slice_s": (0.0, 10.0),
    "switch_s": (0.0, 1.0),
    "util_scale": (0.0, 100.0),
    "sm_fill": (0.0, 1.0),
}
MAX_BYTES = 1 << 20  # a calibration file is read up to this size (one gpumon writes: about 2 KiB)
FROM_PAIRS = "fitted on measured pairs"  # the ``device`` of a calibration ``gpumon calibrate --from-pairs`` wrote


class CalibrationError(ValueError):
    """A calibration file that cannot be read as one (it is then ignored, with this as the reason)."""


@dataclass(frozen=True)
class Calibration:
    """What ``gpumon calibrate`` measured on one GPU model."""

    gpu: str
    constants: dict[str, float]
    measured_at: str = ""
    driver: str = ""
    gpumon: str = ""
    device: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def pair_fitted(self) -> frozenset[str]:
        """The constants fitted on measured pairs (``--from-pairs``: ``details["fitted"]``, or every one of a file
        written before that was recorded), not measured by the probes."""
        if "fitted" in self.details:
            return frozenset(self.details["fitted"])
        return frozenset(self.constants) if self.device == FROM_PAIRS else frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}


def calibration_dir() -> Path:
    """``$GPUMON_CALIBRATION``, else ``$XDG_DATA_HOME/gpumon/calibration``, else ``~/.local/share/gpumon/calibration``."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "gpumon" / "calibration"


def path_for(gpu: str) -> Path:
    """The file of GPU model ``gpu``: its name with every run of characters other than letters, digits, ``.``,
    ``-`` and ``_`` made one ``_``."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", gpu.strip()).strip("_") or "unnamed"
    return calibration_dir() / f"{slug}.json"


def load(gpu: str) -> Calibration | None:
    """The calibration of GPU model ``gpu`` (None: never calibrated here); CalibrationError when its file is not
    one (unreadable, not JSON, larger than MAX_BYTES or nested deeper than 16, another GPU's, a constant that is
    not a positive number within its physical bounds, ``BOUNDS``)."""
    path = path_for(gpu)
    try:
        data = read_json(path, max_bytes=MAX_BYTES, max_depth=16)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CalibrationError(f"{path}: {exc.strerror or exc}") from None
    except Refused as exc:
        raise CalibrationError(f"{path}: {exc}") from None
    if (
        not isinstance(data, dict)
        or data.get("gpu") != gpu
        or not isinstance(data.get("constants"), dict)
    ):
        raise CalibrationError(f"{path}: not a calibration of {gpu}")
    try:
        return _decoded(gpu, data)
    except Refused as exc:
        raise CalibrationError(f"{path}: {exc}") from None


def _decoded(gpu: str, data: dict[str, Any]) -> Calibration:
    """A calibration file's object (``load`` checked its ``gpu`` and ``constants``); Refused saying what is wrong."""
    constants = {}
    for name, value in data["constants"].items():
        if name in BOUNDS:
            low, high = BOUNDS[name]
            constants[name] = number(value, name, low, high)
            if constants[name] <= 0:
                raise Refused(f"{name} is {value!r}, not a positive number")
    details = data.get("details") or {}
    if not isinstance(details, dict):
        raise Refused("details is not an object")
    fitted = details.get("fitted", [])
    if not isinstance(fitted, list) or not all(f in BOUNDS for f in fitted):
        raise Refused(f"details.fitted is not a list of {', '.join(KNOWN)}")
    return Calibration(
        gpu=gpu,
        constants=constants,
        measured_at=str(data.get("measured_at", "")),
        driver=str(data.get("driver", "")),
        gpumon=str(data.get("gpumon", "")),
        device=str(data.get("device", "")),
        details=dict(details),
    )


def save(calibration: Calibration) -> Path:
    """Write ``calibration`` as its GPU model's file (replacing any earlier one, atomically); its path."""
    path = path_for(calibration.gpu)
    ensure_folder(path.parent)
    with replacing(path, replace=True) as f:
        json.dump(calibration.to_dict(), f, indent=2, allow_nan=False)
        f.write("\n")
    return path
