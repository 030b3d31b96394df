"""Why a job slowed down: its extra time per step split into GPU, link, CPU and unexplained.

Pure functions over small records of evidence (no torch, no pandas), so the
live interference line, ``gpumon compare``, the report and experiments share
one rule set. A job's extra time per step is ``shared step - exclusive step``;
it is split as follows (docs/compare.md, "Why it slowed down"):

* **CPU**: only where the two jobs contend for cores (their CPU demand alone
  exceeds the cores they may run on, or the host's cores are saturated) and the
  job's CPU fell: at the same CPU work per step, a CPU that fell from c_x to c_s
  explains ``step_x * (c_x / c_s - 1)``. A CPU that falls while cores are free
  is a symptom of waiting, not a cause.
* **link** (CUDA only): the growth of the job's host-to-device copy time per step, in the
  measure that the link was busy (traffic / capacity: none below 30 %, all from
  70 %). A copy that grows while the link is idle was waiting for the GPU.
* **GPU**: the rest, when the GPU was busy while they shared (NVML utilisation
  >= 90 % or up by 10 points); GPM's SM activity then says whether the job
  waited for the other's time slices (SMs not full) or the GPU was full.
* **unexplained**: whatever no evidence accounts for; on the CPU, where there is no GPU or link, that is
  what gpumon does not measure there (shared caches, memory bandwidth), and the phrase says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpumon.core.records.rates import BARELY_BELOW
from gpumon.core.sources.pcie import link_capacity_bps

NAN = math.nan
GPU, LINK, CPU, UNEXPLAINED = "gpu", "link", "cpu", "unexplained"
NONE, UNKNOWN = "none", "unknown"
SHARE_KEYS = (GPU, LINK, CPU, UNEXPLAINED)
PHRASES = {
    GPU: "waiting for the GPU",
    LINK: "waiting for the host-to-device link",
    CPU: "short of CPU",
}
# extra time under 5 % of the exclusive step (r below BARELY_BELOW: the job "barely notices" the other): nothing to explain
NEGLIGIBLE = BARELY_BELOW - 1
MOSTLY = 0.5
LINK_IDLE, LINK_BUSY = 0.30, 0.70
GPU_BUSY_PCT, GPU_RISE_PCT = 90.0, 10.0
SM_FULL_PCT = 90.0
CPU_FELL = 0.95
CPU_OVERSUBSCRIBED = 1.05
HOST_SATURATED_PCT = 90.0
NO_NVML = "cannot tell: no NVML data"


@dataclass(frozen=True)
class Side:
    """One job in one condition (alone or shared): its step and what was measured meanwhile (NaN: unknown)."""

    step_s: float
    copy_s: float = NAN
    copy_bytes: float = NAN
    cpu_pct: float = NAN
    gpu_util: float = NAN
    sm_active: float = NAN
    sm_occupancy: float = NAN
    pcie_rx_bps: float = NAN
    host_cpu_pct: float = NAN

    @property
    def copy_bytes_per_s(self) -> float:
        """The job's own host-to-device payload over wall time."""
        if _known(self.copy_bytes) and self.step_s > 0:
            return self.copy_bytes / self.step_s
        return NAN


@dataclass(frozen=True)
class Job:
    """A job's evidence alone and shared, and the cores it may run on (empty: unknown)."""

    name: str
    exclusive: Side
    shared: Side
    cores: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Link:
    """The host-to-device link's capacity in bytes/s and where that figure comes from."""

    capacity_bps: float = NAN
    source: str = ""


@dataclass(frozen=True)
class Box:
    """The machine both jobs ran on."""

    device: str
    nvml: bool
    link: Link = field(default_factory=Link)
    host_cpus: int = 0
    pcie_method: str | None = None
    share: str = "timeslice"

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def mps(self) -> bool:
        """Under MPS the jobs' kernels share the SMs at once: no time slices to wait for."""
        return self.share.startswith("mps")


@dataclass(frozen=True)
class Attribution:
    """Why one job slowed down: the main cause, each share of its extra time, and the evidence."""

    job: str
    cause: str
    shares: dict[str, float]
    extra_s: float
    phrase: str
    evidence: str
    link_busy: tuple[float, float] = (NAN, NAN)

    def to_dict(self) -> dict[str, object]:
        return {
            "cause": self.cause,
            "phrase": self.phrase,
            "shares": {k: (None if math.isnan(v) else round(v, 4)) for k, v in self.shares.items()},
            "extra_s_per_step": None if math.isnan(self.extra_s) else self.extra_s,
            "evidence": self.evidence,
            "link_busy": {
                "exclusive": _json(self.link_busy[0]),
                "shared": _json(self.link_busy[1]),
            },
        }


def _json(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 4)


def _known(x: float) -> bool:
    return x is not None and not math.isnan(x)


def link_capacity(
    pcie_max_bps: float | None, h2d_bps: float | None, gen: int | None, width: int | None
) -> Link:
    """The link's capacity: NVML's max generation x width, else an ``h2d`` job's copies alone, else gen x width."""
    if pcie_max_bps and pcie_max_bps > 0:
        return Link(float(pcie_max_bps), "NVML max generation x width")
    if h2d_bps and h2d_bps > 0 and math.isfinite(h2d_bps):
        return Link(float(h2d_bps), "h2d alone on this box")
    capacity = (
        link_capacity_bps(gen, width) if isinstance(gen, int) and isinstance(width, int) else None
    )
    if capacity:
        return Link(capacity, f"PCIe Gen{gen} x{width}")
    return Link()


def link_traffic(box: Box, own: Side, other: Side | None) -> tuple[float, str]:
    """Bytes/s the link carried while shared: NVML RX or the jobs' own copies, whichever is larger (both undercount)."""
    copies = sum(
        s.copy_bytes_per_s for s in (own, other) if s is not None and _known(s.copy_bytes_per_s)
    )
    nvml = own.pcie_rx_bps if box.nvml else NAN
    if _known(nvml) and nvml >= copies:
        return nvml, "NVML RX"
    if copies > 0:
        return copies, "the jobs' copies" + (
            f"; NVML RX read {_gbps(nvml)}" if _known(nvml) else ""
        )
    return (nvml, "NVML RX") if _known(nvml) else (NAN, "")


def _gbps(bps: float) -> str:
    return f"{bps / 1e9:.1f} GB/s" if bps >= 1e8 or bps == 0 else f"{bps / 1e6:.0f} MB/s"


def link_busy(box: Box, own: Side, other: Side | None) -> float:
    """Share of the link's capacity in use (NaN when the traffic or the capacity is unknown, or no GPU)."""
    if not box.gpu:
        return NAN
    traffic, _ = link_traffic(box, own, other)
    return (
        traffic / box.link.capacity_bps
        if _known(traffic) and _known(box.link.capacity_bps)
        else NAN
    )


def cpu_contended(job: Job, other: Job | None, box: Box) -> bool:
    """Whether the pair wanted more CPU than the job's cores give, or the host's cores were saturated."""
    if _known(job.shared.host_cpu_pct) and job.shared.host_cpu_pct >= HOST_SATURATED_PCT:
        return True
    own_cores = job.cores or frozenset(range(box.host_cpus))
    if not own_cores or not _known(job.exclusive.cpu_pct):
        return False
    demand = job.exclusive.cpu_pct
    if other is not None and _known(other.exclusive.cpu_pct):
        other_cores = other.cores or frozenset(range(box.host_cpus))
        overlap = len(own_cores & other_cores) / len(other_cores) if other_cores else 1.0
        demand += other.exclusive.cpu_pct * overlap
    return demand > CPU_OVERSUBSCRIBED * 100 * len(own_cores)


def attribute(job: Job, other: Job | None, box: Box) -> Attribution:
    """Split ``job``'s extra time per step into GPU, link, CPU and unexplained, with one line of evidence."""
    x, s = job.exclusive, job.shared
    busy = (link_busy(box, x, None), link_busy(box, s, other.shared if other else None))
    if not (_known(x.step_s) and _known(s.step_s) and x.step_s > 0 and s.step_s > 0):
        return Attribution(
            job.name, UNKNOWN, {}, NAN, "cannot tell: no rate alone and shared", "", busy
        )
    extra = s.step_s - x.step_s
    evidence = _evidence(job, other, box)
    if extra < NEGLIGIBLE * x.step_s:
        return Attribution(job.name, NONE, {}, extra, "nothing to explain", evidence, busy)
    left = extra
    cpu = 0.0
    if (
        _known(x.cpu_pct)
        and _known(s.cpu_pct)
        and s.cpu_pct > 0
        and s.cpu_pct < CPU_FELL * x.cpu_pct
    ):
        if cpu_contended(job, other, box):
            cpu = min(left, x.step_s * (x.cpu_pct / s.cpu_pct - 1))
    left -= cpu
    link = 0.0
    if _known(x.copy_s) and _known(s.copy_s) and _known(busy[1]):
        weight = min(1.0, max(0.0, (busy[1] - LINK_IDLE) / (LINK_BUSY - LINK_IDLE)))
        link = min(left, max(0.0, s.copy_s - x.copy_s)) * weight
    left -= link
    gpu = left if _gpu_busy(x, s, box) else 0.0
    shares = {
        GPU: gpu / extra,
        LINK: link / extra,
        CPU: cpu / extra,
        UNEXPLAINED: (left - gpu) / extra,
    }
    cause, phrase = _cause(shares, box, s.sm_active)
    return Attribution(job.name, cause, shares, extra, phrase, evidence, busy)


def _gpu_busy(x: Side, s: Side, box: Box) -> bool:
    """The GPU was busy while shared: NVML utilisation >= 90 %, or 10 points above the job alone."""
    if not (box.gpu and box.nvml and _known(s.gpu_util)):
        return False
    return s.gpu_util >= GPU_BUSY_PCT or (
        _known(x.gpu_util) and s.gpu_util - x.gpu_util >= GPU_RISE_PCT
    )


def _cause(shares: dict[str, float], box: Box, sm_active: float) -> tuple[str, str]:
    """The main cause and its phrase; MPS, or GPM's SM activity where known, says what waiting for the GPU was."""
    main = max(SHARE_KEYS, key=lambda k: shares[k])
    if main == GPU and shares[GPU] >= MOSTLY and box.mps:
        return GPU, "mostly competing for the GPU's SMs (MPS)"
    if main == GPU and shares[GPU] >= MOSTLY and _known(sm_active):
        if sm_active >= SM_FULL_PCT:
            return GPU, "mostly waiting for the GPU, which was full"
        return GPU, "mostly waiting for time slices on a GPU that was not full"
    if main == UNEXPLAINED:
        if box.gpu and not box.nvml:
            return UNKNOWN, NO_NVML
        if (
            not box.gpu
        ):  # on the CPU what the CPU's fall does not explain is what no counter here measures
            cpu = f"partly {PHRASES[CPU]} ({shares[CPU]:.0%}); " if shares[CPU] >= 0.2 else ""
            return (
                UNEXPLAINED,
                f"{cpu}{shares[UNEXPLAINED]:.0%} unmeasured on the CPU (shared caches, memory bandwidth)",
            )
        return UNEXPLAINED, f"cause unexplained ({shares[UNEXPLAINED]:.0%} of the extra time)"
    if shares[main] >= MOSTLY:
        return main, f"mostly {PHRASES[main]}"
    parts = sorted(
        (k for k in SHARE_KEYS if shares[k] >= 0.2 and k != UNEXPLAINED), key=lambda k: -shares[k]
    )
    return main, ", ".join(f"partly {PHRASES[k]} ({shares[k]:.0%})" for k in parts)


def _evidence(job: Job, other: Job | None, box: Box) -> str:
    """One line of the figures the rules used."""
    x, s = job.exclusive, job.shared
    parts = []
    if box.gpu and not box.nvml:
        parts.append("no NVML data")
    traffic, source = (
        link_traffic(box, s, other.shared if other else None) if box.gpu else (NAN, "")
    )
    if _known(traffic) and _known(box.link.capacity_bps):
        capacity = box.link.capacity_bps
        parts.append(f"link busy {traffic / capacity:.0%} of its {_gbps(capacity)} ({source})")
    elif _known(traffic):
        parts.append(f"link carried {_gbps(traffic)} (capacity unknown)")
    if box.gpu and _known(x.copy_s) and _known(s.copy_s) and (x.copy_s > 0 or s.copy_s > 0):
        parts.append(f"copies {_ms(x.copy_s)} -> {_ms(s.copy_s)} a step")
    if box.gpu and box.nvml and _known(s.gpu_util):
        parts.append(f"GPU util {s.gpu_util:.0f} % shared vs {_pct(x.gpu_util)} alone")
    if _known(s.sm_active):
        full = (
            "full"
            if s.sm_active >= SM_FULL_PCT
            else "not full"
            if box.mps
            else "not full: time slices"
        )
        occupancy = f", occupancy {s.sm_occupancy:.0f} %" if _known(s.sm_occupancy) else ""
        parts.append(
            f"SMs {s.sm_active:.0f} % active shared vs {_pct(x.sm_active)} alone{occupancy} ({full})"
        )
    if _known(x.cpu_pct) and _known(s.cpu_pct):
        if abs(s.cpu_pct - x.cpu_pct) < 0.05 * max(x.cpu_pct, 1):
            cpu = f"CPU {s.cpu_pct:.0f} % both"
        else:
            cpu = f"CPU {x.cpu_pct:.0f} % alone vs {s.cpu_pct:.0f} % shared"
        cores = f"{len(job.cores)} core{'s' * (len(job.cores) != 1)}" if job.cores else ""
        if cpu_contended(job, other, box):
            cpu += f" (cores oversubscribed{': ' + cores if cores else ''})"
        parts.append(cpu)
    return "; ".join(parts) if parts else "no evidence recorded"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _pct(x: float) -> str:
    return f"{x:.0f} %" if _known(x) else "?"


def attribute_pair(a: Job, b: Job | None, box: Box) -> dict[str, Attribution]:
    """Both jobs of a pair (or one job with ``b`` None)."""
    out = {a.name: attribute(a, b, box)}
    if b is not None:
        out[b.name] = attribute(b, a, box)
    return out
