"""`gpumon doctor --verify`: run a job whose truth is known (`h2d`) and check NVML's numbers against it.

The job runs as a real child through the same Session and launcher as `gpumon run --headless`,
captured into a temporary run directory. What the capture holds is reduced to a few numbers
(`evidence_from_run`, pure), and each check is judged by a pure function of those numbers, so
the verdicts can be tested with numbers recorded on a real GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from gpumon.console.color import use_color
from gpumon.core.records.model import StepBatch, WorkloadState
from gpumon.core.records.enums import JobState
from gpumon.core.capture.session import Session, SessionConfig
from gpumon.core.sources.nvml import pid_namespace_hint
from gpumon.core.store.runmeta import WorkloadRecord
from gpumon.core.store.trace import Run, exclusive_ends, load_run
from gpumon.core.records.units import bytes_per_s
from gpumon.checks.doctor import (
    FAIL,
    MPS_CHECK,
    OK,
    WARN,
    Check,
    check_nvml,
    check_torch,
    render_text,
)
from gpumon.errors import EnvironmentFailure, UsageError
from gpumon.frontends.plan import builtin_request, check_device

JOB = "h2d"
RX_TOLERANCE = 0.10  # NVML's PCIe RX within 10 % of the bytes the job copied
MIN_RX_COVERAGE = 0.5  # at least half of the busy samples must carry a PCIe RX value
UTIL_MOVE_PTS = 10.0  # busy minus idle GPU utilisation, in points
IDLE_UTIL_PCT = 10.0  # above this before the job starts, the GPU was not idle
MONITOR_CPU_OK_PCT = 5.0  # the monitor's own CPU, % of one core
BUSY_S = 4.0  # seconds of post-warm-up steps to observe
START_TIMEOUT_S = 180.0  # torch import + CUDA context + warm-up must fit in this
ON_CPU = "the job ran on the CPU (--device cpu): nothing crossed the GPU, so this tests gpumon's pipeline only"
PIPELINE_HOLDS = "gpumon's pipeline holds on the CPU; NVML's numbers are not verified (no GPU here)"
NAMES = {
    "pcie_rx": "PCIe RX vs copied bytes",
    "job_pid": "job PID in NVML's process list",
    "utilisation": "utilisation moves with the job",
    "monitor_cpu": "monitor CPU cost",
}


@dataclass(frozen=True)
class RunEvidence:
    """What a capture of the job says, reduced to the numbers the checks judge (NaN: not seen)."""

    device: str
    job_pid: int | None
    exit_status: int | None
    busy_s: float
    probe_rx_bps: float  # bytes the job copied host-to-device ÷ busy wall time
    nvml_rx_bps: float  # mean NVML PCIe RX over the same seconds
    rx_coverage: float  # fraction of those device samples with an RX value
    idle_util: float  # median GPU utilisation before the job's first step
    busy_util: float  # median GPU utilisation while it steps
    job_gpu_mem_mib: float  # the most GPU memory NVML attributed to the job's PID
    tail: str = ""


@dataclass(frozen=True)
class LiveEvidence:
    """What was seen while the job ran, outside the capture."""

    other_pids: frozenset[int] = frozenset()  # GPU processes before the job started
    nvml_pids: frozenset[int] = frozenset()  # every PID NVML listed while the job ran
    monitor_cpu_s: float = math.nan  # CPU seconds of the monitor process (all its threads)
    wall_s: float = math.nan


# -- evidence ---------------------------------------------------------------


def busy_span(run: Run, slot: str = "A") -> tuple[float, float]:
    """Run times of a job's first and last post-warm-up steps (NaN, NaN with fewer than two)."""
    ends = exclusive_ends(run).get(slot)
    return (
        (ends[0][0], ends[0][-1]) if ends is not None and len(ends[0]) > 1 else (math.nan, math.nan)
    )


def evidence_from_run(run: Run, slot: str = "A") -> RunEvidence:
    """Reduce a capture of one `h2d` job to the numbers the checks need."""
    entry = run.meta.workload(slot) or WorkloadRecord(slot)
    steps = run.steps()
    device = run.device()
    procs = run.processes()
    job = steps[steps["process"] == slot]
    post = job[job["warmup"].astype(int) == 0]
    nan = math.nan
    a, b = (post["t"].min(), post["t"].max()) if len(post) > 1 else (nan, nan)
    busy_s = b - a if len(post) > 1 else 0.0
    if busy_s > 0:
        copied = post.loc[post["t"] > a, "copy_bytes"].sum()
        busy = device[(device["t"] >= a) & (device["t"] <= b)]
        probe = copied / busy_s
    else:
        busy = device.iloc[0:0]
        probe = nan
    rx = busy["pcie_rx_bps"]
    idle = device[device["t"] < job["t"].min()] if len(job) else device
    mem = procs.loc[procs["process"] == slot, "gpu_mem_mib"]
    return RunEvidence(
        device=str((entry.meta or {}).get("device") or run.meta.device or "?"),
        job_pid=entry.pid,
        exit_status=entry.exit_status,
        busy_s=float(busy_s),
        probe_rx_bps=float(probe),
        nvml_rx_bps=float(rx.mean()) if rx.notna().any() else nan,
        rx_coverage=float(rx.notna().mean()) if len(rx) else 0.0,
        idle_util=float(idle["gpu_util"].median()) if idle["gpu_util"].notna().any() else nan,
        busy_util=float(busy["gpu_util"].median()) if busy["gpu_util"].notna().any() else nan,
        job_gpu_mem_mib=float(mem.max()) if mem.notna().any() else nan,
        tail=entry.tail or "",
    )


# -- judges (pure) ----------------------------------------------------------


def _others(pids: Iterable[int]) -> str:
    listed = sorted(pids)
    shown = ", ".join(str(p) for p in listed[:5]) + (" ..." if len(listed) > 5 else "")
    return f"{len(listed)} other GPU process(es) ({shown})"


def judge_pcie_rx(ev: RunEvidence, other_pids: frozenset[int] = frozenset()) -> Check:
    """NVML's PCIe RX against the bytes the job copied, over the same seconds."""
    name, title = "pcie_rx", NAMES["pcie_rx"]
    detail = {
        "probe_rx_bps": ev.probe_rx_bps,
        "nvml_rx_bps": ev.nvml_rx_bps,
        "coverage": ev.rx_coverage,
        "tolerance": RX_TOLERANCE,
        "busy_s": ev.busy_s,
    }
    if not ev.busy_s > 0 or not ev.probe_rx_bps > 0:
        return Check(name, FAIL, f"{title}: the job copied nothing to compare with", detail)
    if math.isnan(ev.nvml_rx_bps):
        return Check(
            name,
            WARN,
            f"{title}: NVML gave no PCIe RX value while the job ran",
            detail,
            ["this GPU/driver does not report PCIe bytes; the PCIe panel shows N/A"],
        )
    ratio = ev.nvml_rx_bps / ev.probe_rx_bps
    detail["ratio"] = ratio
    summary = (
        f"{title}: NVML {bytes_per_s(ev.nvml_rx_bps)}, job copied {bytes_per_s(ev.probe_rx_bps)} "
        f"(ratio {ratio:.2f}, {ev.rx_coverage:.0%} of samples)"
    )
    if ev.device == "cpu":
        return Check(name, WARN, summary, detail, [ON_CPU])
    notes = []
    if abs(ratio - 1) <= RX_TOLERANCE:
        if ev.rx_coverage < MIN_RX_COVERAGE:
            return Check(
                name, WARN, summary, detail, ["most samples had no PCIe value: the panel has gaps"]
            )
        return Check(
            name,
            OK,
            summary,
            detail,
            ["NVML counts link traffic with protocol overhead (~7 % on H100)"],
        )
    if other_pids:
        notes.append(
            f"{_others(other_pids)} also use the link: NVML counts their traffic too; "
            "rerun on an idle GPU"
        )
        return Check(name, WARN, summary, detail, notes)
    notes.append(
        f"not within {RX_TOLERANCE:.0%}: gpumon's PCIe RX is wrong on this GPU/driver; "
        "report it with `gpumon doctor --json`"
    )
    return Check(name, FAIL, summary, detail, notes)


def judge_job_pid(
    job_pid: int | None,
    gpu_mem_mib: float,
    nvml_pids: frozenset[int],
    visible: Callable[[int], bool] | None = None,
) -> Check:
    """Whether NVML lists the job's PID with its memory (it does not across PID namespaces)."""
    name, title = "job_pid", NAMES["job_pid"]
    detail = {"pid": job_pid, "gpu_mem_mib": gpu_mem_mib, "nvml_pids": sorted(nvml_pids)}
    if job_pid is None:
        return Check(name, FAIL, f"{title}: the job never started", detail)
    if not math.isnan(gpu_mem_mib) and gpu_mem_mib > 0:
        return Check(name, OK, f"{title}: PID {job_pid} found, {gpu_mem_mib:.0f} MiB", detail)
    if job_pid in nvml_pids:
        return Check(
            name,
            WARN,
            f"{title}: PID {job_pid} found, but NVML gives no memory for it",
            detail,
            [
                "per-process memory is hidden by the driver here (no permission, or a vGPU/MIG "
                "instance); the processes panel shows N/A"
            ],
        )
    hint = pid_namespace_hint((job_pid,), nvml_pids, visible)
    if hint:
        return Check(name, WARN, f"{title}: PID {job_pid} not listed", detail, [hint])
    if not nvml_pids:
        return Check(
            name,
            WARN,
            f"{title}: NVML lists no process at all while the job ran",
            detail,
            [
                "the driver hides the process list here (no permission to read other PIDs, or a "
                "container without --pid=host); per-process GPU memory and SM use show N/A"
            ],
        )
    return Check(
        name,
        WARN,
        f"{title}: PID {job_pid} not among the {len(nvml_pids)} listed",
        detail,
        ["per-process GPU memory and SM use cannot be attributed to the job"],
    )


def judge_utilisation(ev: RunEvidence, other_pids: frozenset[int] = frozenset()) -> Check:
    """GPU utilisation before the job's first step against while it steps."""
    name, title = "utilisation", NAMES["utilisation"]
    detail = {"idle_util": ev.idle_util, "busy_util": ev.busy_util, "min_move": UTIL_MOVE_PTS}
    if math.isnan(ev.idle_util) or math.isnan(ev.busy_util):
        return Check(name, WARN, f"{title}: not enough utilisation samples to judge", detail)
    summary = f"{title}: {ev.idle_util:.0f} % before the job, {ev.busy_util:.0f} % while it ran"
    if ev.busy_util - ev.idle_util >= UTIL_MOVE_PTS:
        return Check(name, OK, summary, detail)
    if ev.idle_util > IDLE_UTIL_PCT:
        who = _others(other_pids) if other_pids else "processes NVML does not list here"
        return Check(
            name,
            WARN,
            summary,
            detail,
            [f"the GPU was busy before the job ({who}); rerun on an idle GPU"],
        )
    if ev.device == "cpu":
        return Check(name, WARN, summary, detail, [ON_CPU])
    return Check(name, FAIL, summary, detail, ["NVML's utilisation did not follow the job"])


def judge_monitor_cpu(cpu_s: float, wall_s: float) -> Check:
    """The monitor's own CPU time while the job ran, as % of one core."""
    name, title = "monitor_cpu", NAMES["monitor_cpu"]
    if not wall_s > 0 or math.isnan(cpu_s):
        return Check(name, WARN, f"{title}: not measured", {"cpu_s": cpu_s, "wall_s": wall_s})
    pct = 100 * cpu_s / wall_s
    detail = {
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "pct_of_core": pct,
        "ok_below_pct": MONITOR_CPU_OK_PCT,
    }
    summary = (
        f"{title}: {pct:.1f} % of one core over {wall_s:.0f} s (sampling, listening, recording)"
    )
    if pct < MONITOR_CPU_OK_PCT:
        return Check(name, OK, summary, detail)
    return Check(
        name,
        WARN,
        summary,
        detail,
        [
            f"above {MONITOR_CPU_OK_PCT:.0f} %: a larger --interval (e.g. 250) samples NVML less often"
        ],
    )


def judge_capture(ev: RunEvidence) -> Check:
    """The job's steps reached the capture (its own pipeline: probe, listener, recorder), with its copies."""
    name = "capture"
    detail = {"busy_s": ev.busy_s, "probe_rx_bps": ev.probe_rx_bps, "pid": ev.job_pid}
    if not ev.busy_s > 0:
        return Check(
            name, FAIL, f"capture: no step of the {JOB} job after its warm-up was recorded", detail
        )
    return Check(
        name,
        OK,
        f"capture: {ev.busy_s:.1f} s of the job's steps recorded, {bytes_per_s(ev.probe_rx_bps)} "
        f"copied ({'memcpy on the CPU' if ev.device == 'cpu' else 'host to device'})",
        detail,
        [ON_CPU],
    )


def judge(ev: RunEvidence, live: LiveEvidence) -> list[Check]:
    """Every verdict of one verification capture."""
    checks = []
    if ev.exit_status not in (0, None) and not ev.busy_s > 0:
        last = [line for line in ev.tail.splitlines() if line.strip()][-1:] or ["no output"]
        checks.append(
            Check(
                "job", FAIL, f"the {JOB} job failed (exit {ev.exit_status}): {last[0]}", asdict(ev)
            )
        )
    checks += [
        judge_pcie_rx(ev, live.other_pids),
        judge_job_pid(ev.job_pid, ev.job_gpu_mem_mib, live.nvml_pids),
        judge_utilisation(ev, live.other_pids),
        judge_monitor_cpu(live.monitor_cpu_s, live.wall_s),
    ]
    return checks


def not_checked(reason: str) -> list[Check]:
    """One line per check that cannot run here, saying why."""
    return [
        Check(name, WARN, f"{title}: not checked ({reason})", {"checked": False, "reason": reason})
        for name, title in NAMES.items()
    ]


# -- the capture ------------------------------------------------------------


class _Progress:
    """Bus subscriber: when the job has stepped for ``busy_s`` after warm-up, or has ended."""

    def __init__(self, busy_s: float) -> None:
        self.busy_s = busy_s
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.half = threading.Event()
        self.done = threading.Event()

    def handle(self, item: object) -> None:
        if isinstance(item, StepBatch):
            for step in item.steps:
                if not step.warmup:
                    self._step(step.t)
        elif isinstance(item, WorkloadState) and item.state in (
            JobState.EXITED,
            JobState.STOPPED,
            JobState.FAILED,
        ):
            self.half.set()
            self.done.set()

    def _step(self, t: float) -> None:
        """A step after warm-up ended at ``t``."""
        self.first_t = t if self.first_t is None else self.first_t
        self.last_t = t
        if t - self.first_t >= self.busy_s / 2:
            self.half.set()
        if t - self.first_t >= self.busy_s:
            self.done.set()


def capture(
    device: str, gpu: int | None, runs_dir: Path, busy_s: float = BUSY_S
) -> tuple[Run, LiveEvidence]:
    """Run the job through a Session (as `gpumon run --headless` does) and capture it."""
    config = SessionConfig(device=device, gpu_index=gpu, runs_dir=runs_dir)
    session = Session(config)
    progress = _Progress(busy_s)
    session.bus.subscribe(progress.handle)
    cpu0, wall0 = time.process_time(), time.monotonic()
    other: set[int] = set()
    seen: set[int] = set()
    try:
        session.start()
        nvml = session.nvml if session.nvml_status.available else None
        other = nvml.all_gpu_pids() if nvml is not None else set()
        request = builtin_request(JOB, device)
        session.start_capture("verify", [request])
        session.launch(slot="A", request=request)
        if progress.half.wait(START_TIMEOUT_S) and nvml is not None:
            seen = nvml.all_gpu_pids()
        progress.done.wait(busy_s * 4)
    finally:
        path = session.shutdown()
    if path is None:
        raise EnvironmentFailure("the verification run recorded nothing")
    live = LiveEvidence(
        frozenset(other), frozenset(seen), time.process_time() - cpu0, time.monotonic() - wall0
    )
    return load_run(path), live


# -- command ----------------------------------------------------------------


def run_verify(args: argparse.Namespace) -> int:
    """`gpumon doctor --verify`: print one verdict per check; 0 unless a check failed."""
    device = check_device(args.device)
    if args.gpu is not None and args.gpu < 0:
        raise UsageError(f"--gpu must be a GPU index (0 or more), not {args.gpu}")
    checks = [
        c for c in check_nvml(args.gpu) if c.name != MPS_CHECK
    ]  # MPS is doctor's: not about these numbers
    facts: dict = {}
    pipeline_only = False
    if any(c.name == "nvml" for c in checks) and device == "cpu":
        checks += _verify_pipeline(args.gpu, facts)
        pipeline_only = True
    elif any(c.name == "nvml" for c in checks):
        checks += not_checked("no NVML, see above")
    else:
        torch = check_torch() if device == "auto" else None
        if torch is not None and torch.level != OK:
            checks += [torch, *not_checked("torch cannot use CUDA here, see above")]
        else:
            checks += _verify_on_gpu(device, args.gpu, facts)
    ok = not any(c.level == FAIL for c in checks)
    verified = not pipeline_only and any(
        c.name in NAMES and c.detail.get("checked", True) for c in checks
    )
    if args.json:
        report = {
            "ok": ok,
            "verified": verified,
            "job": JOB,
            **facts,
            "checks": [asdict(c) for c in checks],
        }
        print(json.dumps(_plain(report), indent=2, allow_nan=False))
    else:
        ready = (
            "NVML's numbers hold against the job"
            if verified
            else PIPELINE_HOLDS
            if pipeline_only
            else "nothing verified: no GPU to check here"
        )
        print(
            render_text(
                checks,
                ok,
                use_color(),
                title="gpumon doctor --verify",
                ready=ready,
                not_ready="do not trust these numbers",
            )
        )
    return 0 if ok else 1


def _verify_pipeline(gpu: int | None, facts: dict) -> list[Check]:
    """``--device cpu`` without NVML: the job on the CPU through the same capture; what is left to check is gpumon's
    own pipeline (the job's steps reach the capture) and its cost. NVML's numbers are not checked, and say so."""
    with tempfile.TemporaryDirectory(prefix="gpumon-verify-") as tmp:
        run, live = capture("cpu", gpu, Path(tmp))
        evidence = evidence_from_run(run)
    facts["evidence"] = asdict(evidence)
    facts["device"] = evidence.device
    failed = [c for c in judge(evidence, live) if c.name == "job"]
    no_nvml = {c.name: c for c in not_checked("no NVML, see above")}
    return [
        *failed,
        judge_capture(evidence),
        no_nvml["pcie_rx"],
        no_nvml["job_pid"],
        no_nvml["utilisation"],
        judge_monitor_cpu(live.monitor_cpu_s, live.wall_s),
    ]


def _verify_on_gpu(device: str, gpu: int | None, facts: dict) -> list[Check]:
    with tempfile.TemporaryDirectory(prefix="gpumon-verify-") as tmp:
        run, live = capture(device, gpu, Path(tmp))
        evidence = evidence_from_run(run)
    facts["evidence"] = asdict(evidence)
    facts["device"] = evidence.device
    return judge(evidence, live)


def _plain(value: object) -> object:
    """``value`` with NaN as null and sets as sorted lists, so --json is strict JSON."""
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_plain(v) for v in items]
    return value
