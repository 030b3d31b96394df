"""Host-side batch sources: seeded in-memory batches, or a DataLoader over a generated on-disk data set."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Protocol, Sequence

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from gpumon.workloads.diskdata import ensure_dataset, open_field
from gpumon.workloads.samples import Field, generate

SYNTHETIC_POOL_BYTES = 64 << 20
MAX_SYNTHETIC_BATCHES = 4
DISK_BATCHES = 8
MAX_DISK_BYTES = 256 << 20

HostBatch = tuple[Tensor, ...]


class BatchSource(Protocol):
    """Yields host batches forever; ``close()`` releases workers and files."""

    def next_batch(self) -> HostBatch: ...

    def close(self) -> None: ...


def to_tensor(field: Field, stored: np.ndarray) -> Tensor:
    """A stored array as the tensor the model trains on (pixels become float32 in [0, 1])."""
    tensor = torch.from_numpy(np.ascontiguousarray(stored))
    if field.kind == "pixels":
        return tensor.float().div_(255.0)
    return tensor


def batch_storage_bytes(fields: Sequence[Field], batch: int) -> int:
    return batch * sum(f.storage_bytes for f in fields)


@dataclass
class SyntheticSource:
    """A few seeded batches made once in memory and handed out in turn."""

    batches: list[HostBatch]
    position: int = 0

    @classmethod
    def create(cls, fields: Sequence[Field], batch: int, seed: int, pin: bool) -> SyntheticSource:
        per_batch = max(1, batch_storage_bytes(fields, batch))
        count = max(1, min(MAX_SYNTHETIC_BATCHES, SYNTHETIC_POOL_BYTES // per_batch))
        rng = np.random.default_rng(seed)
        columns = [to_tensor(f, generate(f, count * batch, batch, rng)) for f in fields]
        batches = []
        for index in range(count):
            tensors = tuple(
                column[index * batch : (index + 1) * batch].clone() for column in columns
            )
            batches.append(tuple(t.pin_memory() for t in tensors) if pin else tensors)
        return cls(batches)

    def next_batch(self) -> HostBatch:
        batch = self.batches[self.position]
        self.position = (self.position + 1) % len(self.batches)
        return batch

    def close(self) -> None:
        self.batches.clear()


class EndlessBatches(Sampler[list[int]]):
    """Index batches forever: in order (truncated BPTT needs it) or reshuffled every pass."""

    def __init__(self, count: int, batch: int, shuffle: bool, seed: int) -> None:
        self.count = count
        self.batch = batch
        self.shuffle = shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self) -> Iterator[list[int]]:
        while True:
            order = (
                torch.randperm(self.count, generator=self.generator)
                if self.shuffle
                else torch.arange(self.count)
            )
            for start in range(0, self.count - self.batch + 1, self.batch):
                yield sorted(order[start : start + self.batch].tolist())


@dataclass
class DiskDataset(Dataset[HostBatch]):
    """A generated data set read through ``numpy.memmap``; indexed by a list of rows, returns a batch."""

    directory: Path
    fields: tuple[Field, ...]
    count: int
    maps: list[np.memmap] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, rows: list[int]) -> HostBatch:
        if self.maps is None:
            self.maps = [open_field(self.directory, f, self.count) for f in self.fields]
        return tuple(to_tensor(f, column[rows]) for f, column in zip(self.fields, self.maps))

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "maps": None}


def ignore_stop_signals(worker_id: int) -> None:
    """DataLoader workers leave SIGTERM/SIGINT to the trainer, which stops them after its last step."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class DiskSource:
    """Batches from a DataLoader with ``workers`` processes over a data set on disk."""

    def __init__(self, loader: DataLoader) -> None:
        self.iterator: Iterator[HostBatch] | None = iter(loader)

    @classmethod
    def create(
        cls,
        workload: str,
        fields: tuple[Field, ...],
        batch: int,
        seed: int,
        workers: int,
        pin: bool,
        sequential: bool,
    ) -> DiskSource:
        batches = max(
            1, min(DISK_BATCHES, MAX_DISK_BYTES // max(1, batch_storage_bytes(fields, batch)))
        )
        count = batches * batch
        dataset = DiskDataset(ensure_dataset(workload, fields, count, batch, seed), fields, count)
        loader = DataLoader(
            dataset,
            batch_size=None,
            sampler=EndlessBatches(count, batch, shuffle=not sequential, seed=seed),
            num_workers=workers,
            pin_memory=pin,
            worker_init_fn=ignore_stop_signals if workers else None,
        )
        return cls(loader)

    def next_batch(self) -> HostBatch:
        if self.iterator is None:
            raise RuntimeError("batch source is closed")
        return tuple(next(self.iterator))

    def close(self) -> None:
        self.iterator = None
