"""The two slots a job occupies: A, the first job gpumon launches, and B, the second (or the running process
``--beside`` watches). A job keeps its slot for the whole run; the records, run.json and every front end name it
by its slot (the CSV tables' column for it is ``process``, as recorded since the first runs)."""

from __future__ import annotations

from typing import Literal, TypeGuard

Slot = Literal["A", "B"]
SLOTS: tuple[Slot, Slot] = ("A", "B")


def is_slot(name: object) -> TypeGuard[Slot]:
    """``name`` is a slot (a record read from a file or a probe scanner's bus may name anything)."""
    return name in SLOTS
