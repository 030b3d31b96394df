"""Share modes: how co-resident jobs share the GPU (the driver's time slicing, or NVIDIA MPS), as
``--share`` and experiment specs name them and as run.json records them. The daemon itself: ``jobs/mps.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpumon.core.records.enums import ShareKind

SHARE_SYNTAX = "timeslice, mps, mps:threads=PCT_A,PCT_B or mps:existing"


@dataclass(frozen=True)
class ShareMode:
    """How co-resident jobs share the GPU; ``threads`` caps each job's share of the SMs (MPS only)."""

    kind: ShareKind = ShareKind.TIMESLICE
    threads: tuple[int, ...] = ()
    existing: bool = False

    @property
    def mps(self) -> bool:
        return self.kind == ShareKind.MPS

    def describe(self) -> str:
        """A short label for headers and tables: ``timeslice``, ``mps``, ``mps 30/70``, ``mps (existing)``."""
        if not self.mps:
            return "timeslice"
        text = "mps"
        if self.threads:
            text += " " + "/".join(str(t) for t in self.threads)
        return text + (" (existing)" if self.existing else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": str(self.kind),
            "threads": list(self.threads) or None,
            "existing_daemon": self.existing,
        }

    @classmethod
    def from_json(cls, entry: object) -> "ShareMode":
        """The share mode run.json recorded (``to_json``'s; runs recorded before share modes: time slicing)."""
        if not isinstance(entry, dict) or entry.get("mode") != ShareKind.MPS:
            return cls()
        threads = entry.get("threads")
        counted = (
            tuple(int(t) for t in threads if isinstance(t, int))
            if isinstance(threads, list)
            else ()
        )
        return cls(ShareKind.MPS, counted, bool(entry.get("existing_daemon")))


def parse_share(text: str) -> ShareMode:
    """A share mode's text (``--share``, an experiment spec's ``shares``) as a ShareMode.

    ValueError otherwise: with an empty message when the text is not of ``SHARE_SYNTAX`` at all, else saying
    what is wrong with it (each caller words the error for its own input: ``commands/argtypes.py``).
    """
    kind, _, options = text.strip().partition(":")
    if kind == ShareKind.TIMESLICE and not options:
        return ShareMode()
    if kind != ShareKind.MPS:
        raise ValueError("")
    if not options:
        return ShareMode(ShareKind.MPS)
    if options == "existing":
        return ShareMode(ShareKind.MPS, existing=True)
    match = re.fullmatch(r"threads=(\d+),(\d+)", options)
    if not match:
        raise ValueError("")
    threads = tuple(int(g) for g in match.groups())
    if not all(1 <= t <= 100 for t in threads):
        raise ValueError("thread percentages must be between 1 and 100")
    return ShareMode(ShareKind.MPS, threads=threads)


CPU_SHARE = "cpu cores"  # jobs on the CPU: the operating system's scheduler shares the cores; no GPU time slicing


def shown_share(label: str, device: str) -> str:
    """How a share mode reads for jobs on ``device`` (``cpu``, ``cuda:0``...): on the CPU the jobs shared its cores,
    whatever --share said (it applies to a GPU)."""
    return CPU_SHARE if device.split(":")[0] == "cpu" else label
