"""What a workload's samples look like, and the seeded generator that makes them (numpy, no torch)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STORAGE_DTYPES: dict[str, type] = {
    "pixels": np.uint8,
    "labels": np.int64,
    "normal": np.float32,
    "tokens": np.int64,
}
ZIPF_EXPONENT = 1.0


@dataclass(frozen=True)
class Field:
    """One tensor of a sample.

    ``kind`` is ``pixels`` (stored as uint8, trained on as float32 in [0, 1]), ``labels``
    (int64 class in ``[0, high)``), ``normal`` (float32 N(0, 1)) or ``tokens`` (a window of
    ``shape[0]`` int64 tokens in ``[0, high)`` from a Zipf-distributed stream).
    """

    name: str
    shape: tuple[int, ...]
    kind: str
    high: int = 0

    @property
    def storage_dtype(self) -> np.dtype:
        return np.dtype(STORAGE_DTYPES[self.kind])

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def storage_bytes(self) -> int:
        """Bytes of one sample of this field as stored on disk."""
        return self.elements * self.storage_dtype.itemsize

    @property
    def tensor_bytes(self) -> int:
        """Bytes of one sample of this field as trained on (and copied to the device)."""
        return self.elements * (4 if self.kind == "pixels" else self.storage_dtype.itemsize)


def zipf_tokens(count: int, vocab: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` token ids where id ``k`` has probability proportional to ``1 / (k + 1)``."""
    weights = 1.0 / np.arange(1, vocab + 1, dtype=np.float64) ** ZIPF_EXPONENT
    return rng.choice(vocab, size=count, p=weights / weights.sum()).astype(np.int64)


def token_windows(field: Field, count: int, lanes: int, rng: np.random.Generator) -> np.ndarray:
    """Overlapping windows of ``lanes`` token streams, laid out for truncated BPTT.

    Row ``j`` is window ``j // lanes`` of stream ``j % lanes``, so reading rows in order one
    batch of ``lanes`` rows at a time continues every stream where the previous batch stopped.
    """
    window = field.shape[0]
    segments = count // lanes
    streams = zipf_tokens(lanes * (segments * (window - 1) + 1), field.high, rng).reshape(lanes, -1)
    rows = np.empty((segments, lanes, window), dtype=np.int64)
    for segment in range(segments):
        start = segment * (window - 1)
        rows[segment] = streams[:, start : start + window]
    return rows.reshape(count, window)


def generate(field: Field, count: int, lanes: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` samples of ``field`` in its storage dtype (``lanes`` only matters for tokens)."""
    shape = (count, *field.shape)
    if field.kind == "pixels":
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    if field.kind == "labels":
        return rng.integers(0, field.high, size=shape, dtype=np.int64)
    if field.kind == "normal":
        return rng.standard_normal(size=shape, dtype=np.float32)
    if field.kind == "tokens":
        return token_windows(field, count, lanes, rng)
    raise ValueError(f"unknown field kind {field.kind!r}")
