"""Generated on-disk data sets: one raw binary file per field, created once and atomically."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from gpumon.safewrite import ensure_folder, open_new, write_text
from gpumon.workloads.samples import Field, generate

ENV_DATA_DIR = "GPUMON_DATA_DIR"
FORMAT_VERSION = 1


def data_root() -> Path:
    """``$GPUMON_DATA_DIR``, else ``$XDG_CACHE_HOME/gpumon/data``, else ``~/.cache/gpumon/data``."""
    explicit = os.environ.get(ENV_DATA_DIR)
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gpumon" / "data"


def dataset_key(workload: str, fields: tuple[Field, ...], count: int, lanes: int, seed: int) -> str:
    """A directory name that changes whenever anything that shapes the data changes."""
    described = {
        "format": FORMAT_VERSION,
        "fields": [[f.name, list(f.shape), f.kind, f.high] for f in fields],
        "count": count,
        "lanes": lanes,
        "seed": seed,
    }
    digest = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]
    return f"{workload}-n{count}-seed{seed}-{digest}"


def field_path(directory: Path, field: Field) -> Path:
    return directory / f"{field.name}.{field.storage_dtype.name}"


def open_field(directory: Path, field: Field, count: int) -> np.memmap:
    """Map one field of a data set read-only."""
    return np.memmap(
        field_path(directory, field),
        dtype=field.storage_dtype,
        mode="r",
        shape=(count, *field.shape),
    )


def ensure_dataset(
    workload: str, fields: tuple[Field, ...], count: int, lanes: int, seed: int
) -> Path:
    """Return the data set's directory, generating it first if it does not exist yet.

    The files are written into a private temporary directory which is then renamed into
    place, so concurrent processes never see a partial data set; the loser of a race
    discards its copy.
    """
    root = data_root()
    final = root / dataset_key(workload, fields, count, lanes, seed)
    if final.is_dir():
        return final
    ensure_folder(root)
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        rng = np.random.default_rng(seed)
        for field in fields:
            with open_new(field_path(scratch, field), binary=True) as out:
                generate(field, count, lanes, rng).tofile(out)
                out.flush()
                os.fsync(out.fileno())
        manifest = {
            "workload": workload,
            "count": count,
            "lanes": lanes,
            "seed": seed,
            "format": FORMAT_VERSION,
        }
        write_text(scratch / "manifest.json", json.dumps(manifest, indent=1) + "\n", replace=False)
        os.rename(scratch, final)
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and final.is_dir():
            return final
        raise
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return final
