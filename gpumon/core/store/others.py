"""Whether a run's measured window had the GPU to its jobs alone: the other GPU processes of gpu_others.csv.

A process that was not one of the jobs *disturbs* a window when it used the GPU meaningfully
(SM % >= ``SM_PCT`` or GPU memory >= ``MEM_MIB``) in at least ``SHARE`` of the window's process
ticks (host.csv has one row per tick). docs/compare.md states the rule. No pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from gpumon.core.store.trace import Run

SM_PCT = 5.0
MEM_MIB = 1024.0
SHARE = 0.10


@dataclass(frozen=True)
class Disturbance:
    """One other process that used the GPU in a run's measured window: who, how much, for how long."""

    run: str
    pid: int
    user: str
    command: str
    share: float  # of the window's process ticks in which it used the GPU meaningfully
    seconds: float  # those ticks' time (share × the window's length)
    sm_pct: float  # its mean SM % over the ticks it was listed (NaN: NVML gave none)
    gpu_mem_mib: float  # its largest GPU memory
    role: str = ""  # what it disturbs, as compare names it: "baseline" or "pair"

    def phrase(self) -> str:
        """``pid 4242 (alice, python3) on the GPU for 9.5 s (95 % of the window): SM 30 %, 2.0 GiB``."""
        who = f"pid {self.pid} ({self.user or 'unknown user'}, {self.command or 'unknown command'})"
        use = []
        if not math.isnan(self.sm_pct):
            use.append(f"SM {self.sm_pct:.0f} %")
        if not math.isnan(self.gpu_mem_mib):
            use.append(f"{self.gpu_mem_mib / 1024:.1f} GiB")
        return f"{who} on the GPU for {self.seconds:.1f} s ({self.share:.0%} of the window): {', '.join(use) or 'use unknown'}"

    def to_dict(self) -> dict:
        return {
            "run": self.run,
            "role": self.role or None,
            "pid": self.pid,
            "user": self.user or None,
            "command": self.command or None,
            "share": self.share,
            "seconds": self.seconds,
            "sm_pct": None if math.isnan(self.sm_pct) else self.sm_pct,
            "gpu_mem_mib": None if math.isnan(self.gpu_mem_mib) else self.gpu_mem_mib,
        }


def meaningful(sm_pct: float, gpu_mem_mib: float) -> bool:
    """Whether one reading of a process is a meaningful use of the GPU (NaN counts as no use)."""
    return sm_pct >= SM_PCT or gpu_mem_mib >= MEM_MIB


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _inside(t: float, windows: Iterable[tuple[float, float]]) -> bool:
    return any(start <= t <= end for start, end in windows)


def disturbances(run: Run, windows: Iterable[tuple[float, float]]) -> list[Disturbance]:
    """The other processes that used the GPU meaningfully in ``windows`` (run seconds), most present first."""
    windows = [(s, e) for s, e in windows if e > s]
    if not windows or not (run.path / "gpu_others.csv").exists():
        return []
    length = sum(e - s for s, e in windows)
    seen: dict[int, dict] = {}
    for row in run.rows("gpu_others"):
        t = _float(row["t"])
        if not _inside(t, windows):
            continue
        sm, mem = _float(row["sm_pct"]), _float(row["gpu_mem_mib"])
        entry = seen.setdefault(
            int(row["pid"]),
            {
                "user": row["user"],
                "command": row["command"],
                "used": set(),
                "sm": [],
                "mem": math.nan,
            },
        )
        if not math.isnan(sm):
            entry["sm"].append(sm)
        if not math.isnan(mem):
            entry["mem"] = mem if math.isnan(entry["mem"]) else max(entry["mem"], mem)
        if meaningful(sm, mem):
            entry["used"].add(t)
    if not seen:  # no other process in the windows: host.csv's ticks are not read
        return []
    ticks = [t for t in map(_float, run.columns("host")["t"]) if _inside(t, windows)]
    if not ticks:
        return []
    found = []
    for pid, e in seen.items():
        share = len(e["used"]) / len(ticks)
        if share >= SHARE:
            sm = sum(e["sm"]) / len(e["sm"]) if e["sm"] else math.nan
            found.append(
                Disturbance(
                    str(run.path),
                    pid,
                    e["user"],
                    e["command"],
                    min(1.0, share),
                    min(1.0, share) * length,
                    sm,
                    e["mem"],
                )
            )
    return sorted(found, key=lambda d: (-d.share, d.pid))
