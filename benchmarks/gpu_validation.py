"""Validate gpumon on whatever GPU this box has, in one command: every row of docs/validation.md's GPU table.

    python benchmarks/gpu_validation.py --out DIR                  # a GPU box: ~9.5 min on an H100
    python benchmarks/gpu_validation.py --out DIR --only mps       # one row again
    python benchmarks/gpu_validation.py --out DIR --preset short --device cpu   # its test, on the fake driver
        [--calibrate-device sliced:SOCKET]                                       # and the fake time-sliced device

Rows, in order (each its own captures, each with a timeout; one failing or running out of time does not stop
the others; whatever a row starts is stopped before the next begins):

  pcie_gpm        `h2d` alone, GPM path: NVML's PCIe RX against the bytes h2d copied (steps.csv) and nvidia-smi dmon
  pcie_counters   the same with the wrap-safe 32-bit counters forced (GPUMON_NO_GPM=1)
  gpm_sm          GPM SM activity idle, copying (h2d) and in a GEMM (gemm)
  per_process_sm  fcn + vgg19 time-sliced: each job's SM share against nvidia-smi pmon; never above the device
  doctor_verify   `gpumon doctor --verify`
  mps             fcn and vgg19 alone, together time-sliced and under --share mps, each pair compared with the
                  exclusive runs; nvidia-cuda-mps-server present during the MPS run and gone after
  live_line       the live verdict (`--headless --json`, the TUI's computation) of fcn + vgg19 with --baseline runs,
                  and of vgg19 started --beside fcn under `gpumon wrap`: "measuring…" first, then r and STP as
                  `gpumon compare` of the same run gives them
  calibrate       `gpumon calibrate`: the GPU model's time slice, switch cost, utilisation scale and MPS SM fill,
                  in under a minute (stored in the evidence, not in the user's calibration directory)
  observer_cost   benchmarks/observer_cost.py, shortened: the TUI and nvitop --interval 0.25
  pytest_gpu      `pytest -m gpu`, less the two tests pcie_gpm and doctor_verify repeat

Writes DIR/validation.md (the table: measured, pass when, result; the device, driver and gpumon commit),
DIR/validation.json (the same for scripts), DIR/nvidia-smi-dmon.txt and DIR/nvidia-smi-pmon.txt (the
witnesses, the whole session) and DIR/evidence.tar.gz (every capture's run directory, each command's log).

Exit status: 0 every check passed; 1 a check failed; 3 none failed but some could not be checked here (a tool
missing, a GPU without GPM); 2 no GPU here (one line) or bad arguments. Details: docs/validation.md.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402
from smi_witness import MB_BYTES, Witness, between, read_table  # noqa: E402

from gpumon import __version__  # noqa: E402
from gpumon.core.jobs.lifeline import die_with_parent  # noqa: E402
from gpumon.core.jobs.mps import CONTROL, SERVER, processes_running  # noqa: E402
from gpumon.core.probing import rendezvous  # noqa: E402
from gpumon.core.records.rates import overlap_window  # noqa: E402
from gpumon.core.sources.nvml import NvmlSource  # noqa: E402
from gpumon.core.sources.nvmlpcie import NO_GPM_ENV  # noqa: E402
from gpumon.core.sources.nvmlprocs import SM_SUM_TOLERANCE_PCT, clamp_to_device  # noqa: E402
from gpumon.core.store.trace import Run, load_run  # noqa: E402
from gpumon.core.records.units import bytes_per_s  # noqa: E402
from gpumon.checks.verify import RX_TOLERANCE, busy_span, evidence_from_run  # noqa: E402
from gpumon.workloads.spec import parse_workload_spec, to_argv  # noqa: E402

PASS, FAIL, SKIP = "pass", "fail", "not checked"
MIN_SAMPLES = 0.9  # share of a busy window's device samples that must carry the figure
IDLE_SM_MAX, COPY_SM_MAX, GEMM_SM_MIN = 5.0, 10.0, 90.0  # GPM SM active, %
SHARE_TOLERANCE_PTS = 10.0  # a job's SM share, gpumon against pmon
CALIBRATE_MAX_S = 60.0  # gpumon calibrate's promise
# What a calibration may read and still be a GPU's (outside: the measurement went wrong): a slice of 0.1-100 ms, a
# switch cost below the slice, a utilisation scale of 0.2-1.5, an MPS fill of 0.05-1
CALIBRATE_SANE = {"slice_s": (1e-4, 0.1), "util_scale": (0.2, 1.5), "sm_fill": (0.05, 1.0)}
TUI_RATIO_MAX = 0.5  # TUI CPU ÷ nvitop@0.25 s CPU (issue 10)
LIVE_TOLERANCE = 0.02  # the live line's last r and STP against compare's, plus one step (the H100: the same to two digits)
STP_SANE = (0.3, 2.5)  # outside: the comparison itself went wrong
START_ALLOWANCE_S = (
    120.0  # torch import, CUDA context and warm-up, on top of a capture's busy seconds
)
STOP_GRACE_S = 20.0  # after Ctrl-C, before SIGKILL
SERVER_GONE_S = 15.0
MIN_ROW_S = 20.0  # a row is not started with less time than this left
DUPLICATES = (  # pytest -m gpu tests that other rows run themselves
    "tests/gpu/test_gpu.py::test_h2d_alone_pcie_rx_matches_the_bytes_copied",
    "tests/gpu/test_gpu.py::test_doctor_verify_passes_on_the_gpu",
)
IDLE_SAMPLER = """
import json, math, sys, time
from gpumon.core.sources.nvml import NvmlSource
source = NvmlSource(int(sys.argv[1]))
status = source.open()
values, t0 = [], time.monotonic()
while status.available and time.monotonic() - t0 < float(sys.argv[2]):
    time.sleep(0.1)
    sample = source.sample(time.monotonic() - t0)
    values.append(math.nan if sample is None else sample.sm_active_pct)
source.close()
print(json.dumps({"reason": status.reason, "sm_active_pct": [None if math.isnan(v) else v for v in values]}))
"""


@dataclass(frozen=True)
class Preset:
    """How long the captures step, which pair shares the GPU, and the whole script's budget."""

    busy_s: (
        float  # a capture is stopped once every job has stepped (past warm-up) this many seconds
    )
    pair: tuple[str, str]
    idle_s: float
    observer_warmup_s: float
    observer_s: float  # measured per monitor
    budget_s: float


PRESETS = {
    "full": Preset(
        busy_s=10, pair=("fcn", "vgg19"), idle_s=3, observer_warmup_s=8, observer_s=12, budget_s=570
    ),
    # The script's own test on a CPU: gemm starts in a second where vgg19 takes several.
    "short": Preset(
        busy_s=3, pair=("fcn", "gemm"), idle_s=1, observer_warmup_s=1, observer_s=1, budget_s=400
    ),
}


@dataclass
class Check:
    """One comparison inside a row: ``ok`` None when it could not be made here."""

    name: str
    measured: str
    criterion: str
    ok: bool | None
    figures: dict = field(default_factory=dict)


@dataclass
class RowResult:
    key: str
    title: str
    status: str
    checks: list[Check]
    notes: list[str]
    commands: list[str]
    files: list[str]
    seconds: float


class NotHere(Exception):
    """The row cannot run on this box (a tool missing, a GPU without the feature): not checked, with why."""


@dataclass
class Finished:
    argv: list[str]
    returncode: int | None
    timed_out: bool
    log: Path

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def last_line(self) -> str:
        lines = [line for line in self.output.splitlines() if line.strip()]
        return lines[-1].strip() if lines else "no output"

    def json(self) -> dict | None:
        """The JSON object the command printed (its log also holds stderr, before or after), or None."""
        text = self.output
        for start in (
            i for i, c in enumerate(text) if c == "{" and (i == 0 or text[i - 1] == "\n")
        ):
            try:
                found = json.JSONDecoder().raw_decode(text, start)[0]
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict):
                return found
        return None


# -- judges (pure: numbers in, a Check out) ----------------------------------------------------


def judge_ratio(name: str, value: float, reference: float, what: str, against: str) -> Check:
    """``value`` within RX_TOLERANCE of ``reference`` (bytes/s)."""
    criterion = f"within {RX_TOLERANCE:.0%}"
    figures = {"value_bps": value, "reference_bps": reference}
    if not reference > 0 or math.isnan(value):
        return Check(
            name,
            f"{what} {bytes_per_s(value)}, {against} {bytes_per_s(reference)}",
            criterion,
            False,
            figures,
        )
    ratio = value / reference
    figures["ratio"] = ratio
    return Check(
        name,
        f"{what} {bytes_per_s(value)}, {against} {bytes_per_s(reference)}: ×{ratio:.2f}",
        criterion,
        abs(ratio - 1) <= RX_TOLERANCE,
        figures,
    )


def judge_coverage(name: str, present: float) -> Check:
    return Check(
        name,
        f"{present:.0%} of busy samples",
        f"≥ {MIN_SAMPLES:.0%}",
        present >= MIN_SAMPLES,
        {"present": present},
    )


def judge_sm_active(
    name: str, median: float, present: float, low: float | None, high: float | None
) -> Check:
    """GPM SM active (median, %) inside [low, high], present in ≥ MIN_SAMPLES of the samples."""
    criterion = f"≥ {low:.0f} %" if low is not None else f"≤ {high:.0f} %"
    measured = f"{median:.1f} % ({present:.0%} of samples)"
    ok = present >= MIN_SAMPLES and not math.isnan(median)
    ok = ok and (low is None or median >= low) and (high is None or median <= high)
    return Check(name, measured, criterion, ok, {"median_pct": median, "present": present})


def judge_share(slot: str, spec: str, ours: float, pmon: float | None) -> Check:
    """A job's median SM share, gpumon's against pmon's (None: no nvidia-smi here; NaN: pmon never gave one)."""
    criterion = f"within {SHARE_TOLERANCE_PTS:.0f} points of pmon (clamped like gpumon)"
    figures = {"gpumon_pct": ours, "pmon_pct": pmon}
    if pmon is None or math.isnan(pmon):
        why = "no nvidia-smi here" if pmon is None else "pmon gave none"
        return Check(
            f"{slot} {spec} SM share", f"gpumon {ours:.0f} %, {why}", criterion, None, figures
        )
    return Check(
        f"{slot} {spec} SM share",
        f"gpumon {ours:.0f} %, pmon {pmon:.0f} %",
        criterion,
        abs(ours - pmon) <= SHARE_TOLERANCE_PTS,
        figures,
    )


def judge_never_above(ticks: int, above: int, worst: float) -> Check:
    measured = f"{above} of {ticks} process ticks above" + (
        f" (worst +{worst:.0f} points)" if above else ""
    )
    return Check(
        "sum ≤ device util",
        measured,
        f"none above by > {SM_SUM_TOLERANCE_PCT:.0f} points",
        ticks > 0 and above == 0,
        {"ticks": ticks, "above": above, "worst_pts": worst},
    )


def judge_stp(name: str, compared: dict | None, error: str) -> Check:
    """A compare --json result: its STP with interval and each job's slowdown; fails when there is none."""
    criterion = f"compare gives an STP (shown side by side; {STP_SANE[0]}–{STP_SANE[1]})"
    if compared is None:
        return Check(name, error, criterion, False)
    stp = (compared.get("pair") or {}).get("stp") or {}
    r = {
        slot: ((compared.get("workloads") or {}).get(slot) or {}).get("slowdown") or {}
        for slot in "AB"
    }
    estimate = stp.get("estimate")
    if estimate is None:
        return Check(name, "no STP", criterion, False)
    measured = (
        f"STP {estimate:.2f} [{stp.get('low', math.nan):.2f}, {stp.get('high', math.nan):.2f}], "
        f"r_A {r['A'].get('estimate', math.nan):.2f}, r_B {r['B'].get('estimate', math.nan):.2f}"
    )
    figures = {"stp": stp, "r_A": r["A"], "r_B": r["B"], "verdict": compared["pair"].get("verdict")}
    return Check(name, measured, criterion, STP_SANE[0] < estimate < STP_SANE[1], figures)


def judge_ratio_max(name: str, ratio: float | None, cpu: dict[str, float]) -> Check:
    shown = ", ".join(f"{k} {v:.2f} %" for k, v in cpu.items())
    if ratio is None:
        return Check(
            name,
            f"no ratio ({shown or 'nothing measured'})",
            f"≤ {TUI_RATIO_MAX}",
            False,
            {"cpu_pct": cpu},
        )
    return Check(
        name,
        f"{ratio:.2f} ({shown})",
        f"≤ {TUI_RATIO_MAX}",
        ratio <= TUI_RATIO_MAX,
        {"ratio": ratio, "cpu_pct": cpu},
    )


def row_status(checks: list[Check]) -> str:
    if any(c.ok is False for c in checks):
        return FAIL
    return PASS if checks and all(c.ok for c in checks) else SKIP


def exit_status(rows: list[RowResult]) -> int:
    if any(r.status == FAIL for r in rows):
        return 1
    return 0 if rows and all(r.status == PASS for r in rows) else 3


# -- running things ------------------------------------------------------------------------------


class Context:
    """What every row needs: the preset, the device, where files go, and the one way to run a command."""

    def __init__(
        self, args: argparse.Namespace, evidence: Path, gpu: dict, witnesses: dict[str, Path]
    ) -> None:
        self.preset = PRESETS[args.preset]
        self.device = args.device
        self.calibrate_device = args.calibrate_device or (
            args.device if args.device.startswith("cuda") else None
        )
        self.evidence = evidence
        self.gpu = gpu
        self.witnesses = witnesses
        self.captures: dict[str, Path] = {}  # label → run directory, for later rows to reuse
        self.last_log: Path | None = None  # the last capture's log
        self.row = ""
        self.deadline = math.inf
        self.commands: list[str] = []
        self.files: list[str] = []
        env = {k: v for k, v in os.environ.items() if k != NO_GPM_ENV}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        self.env = env

    def begin(self, key: str, seconds: float) -> None:
        self.row, self.deadline = key, time.monotonic() + seconds
        self.commands, self.files = [], []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        while_running: Callable[[Path], bool] | None = None,
    ) -> Finished:
        """``argv`` in its own session, logged; Ctrl-C when ``while_running(log)`` says done or at the timeout,
        SIGKILL to whatever is left in its session after."""
        log = self.evidence / "logs" / f"{self.row}-{len(self.commands) + 1}.log"
        limit = max(1.0, min(timeout if timeout is not None else math.inf, self.left()))
        proc = self.start(argv, log, env)
        end, stop_by, timed_out = time.monotonic() + limit, math.inf, False
        try:
            while not _exited(proc.pid, 0.25):
                if stop_by == math.inf:
                    done = while_running is not None and while_running(log)
                    if done or time.monotonic() > end:
                        timed_out = not done
                        _signal_group(proc.pid, signal.SIGINT)
                        stop_by = time.monotonic() + STOP_GRACE_S
                elif time.monotonic() > stop_by:
                    break
        finally:
            # Whatever is left in its session; its leader is not reaped yet, so the group id is still its own.
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        return Finished(argv, None if timed_out else proc.returncode, timed_out, log)

    def start(
        self, argv: list[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """``argv`` started in its own session, its output into ``log``, dying with this script; recorded."""
        log.parent.mkdir(parents=True, exist_ok=True)
        self.commands.append(shlex.join(argv))
        self.files.append(str(log.relative_to(self.evidence)))
        with log.open("w") as out:
            return subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
            )

    def gpumon(self, *args: str, **kw) -> Finished:
        return self.run([sys.executable, "-m", "gpumon", *args], **kw)

    def capture(
        self,
        label: str,
        specs: list[str],
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        also: Callable[[], None] | None = None,
        until: Callable[[Path], bool] | None = None,
        extra_s: float = 0.0,
    ) -> Path:
        """`gpumon run SPECS --headless --json` into its own directory, stopped (Ctrl-C) once every job has
        stepped past warm-up for the preset's busy seconds and ``until(log)`` holds (``also`` is called meanwhile;
        ``extra_s`` more for a run that waits before launching); the run directory (its log: ``last_log``)."""
        out = self.evidence / "runs" / label
        cap = self.preset.busy_s + START_ALLOWANCE_S + extra_s
        watch = StatusWatch(self.preset.busy_s)

        def busy_long_enough(log: Path) -> bool:
            if also is not None:
                also()
            return watch(log) and (until is None or until(log))

        done = self.gpumon(
            "run",
            *specs,
            *extra,
            "--headless",
            "--json",
            "--duration",
            f"{cap:g}",
            "--out",
            str(out),
            "--label",
            label,
            env=env,
            timeout=cap + STOP_GRACE_S,
            while_running=busy_long_enough,
        )
        self.last_log = done.log
        runs = sorted(p for p in out.glob("*") if (p / "run.json").exists()) if out.exists() else []
        if not runs:
            why = "timed out" if done.timed_out else f"exit {done.returncode}"
            raise RuntimeError(
                f"gpumon run {' '.join(specs)} saved no run ({why}): {done.last_line()}"
            )
        self.files.append(str(runs[-1].relative_to(self.evidence)))
        self.captures[label] = runs[-1]
        return runs[-1]

    def workload_args(self, specs: tuple[str, ...]) -> list[str]:
        return [*specs, "--device", self.device]


class StatusWatch:
    """Reads a `gpumon run --json` log as it grows: done once every job printed ``busy_s`` status lines (one a
    second) running past warm-up with a rate."""

    def __init__(self, busy_s: float) -> None:
        self.busy_s = busy_s
        self.offset = 0
        self.running: dict[str, int] = {}

    def __call__(self, log: Path) -> bool:
        with log.open("rb") as f:
            f.seek(self.offset)
            text = f.read()
        complete = text[: text.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            try:
                status = json.loads(line) if line.startswith("{") else {}
            except json.JSONDecodeError:
                continue
            if "process" in status:
                busy = (
                    status.get("state") == "running"
                    and status.get("iter_per_s")
                    and not status.get("warmup")
                )
                self.running[status["process"]] = self.running.get(status["process"], 0) + bool(
                    busy
                )
        return bool(self.running) and min(self.running.values()) >= self.busy_s


def _exited(pid: int, seconds: float) -> bool:
    """Whether child ``pid`` ended within ``seconds``, without reaping it."""
    end = time.monotonic() + seconds
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


# -- what a capture says -------------------------------------------------------------------------


def wall(run: Run, t: float) -> float:
    """Seconds since 1970 of run time ``t`` (run.json's started_at is run time 0)."""
    started = datetime.fromisoformat(run.meta.started_at.replace("Z", "+00:00"))
    return started.timestamp() + t


def device_column(run: Run, column: str, a: float, b: float) -> tuple[float, float]:
    """(median, share present) of a device.csv column between run times a and b."""
    device = run.device()
    window = device[(device["t"] >= a) & (device["t"] <= b)][column]
    if not len(window):
        return math.nan, 0.0
    present = float(window.notna().mean())
    return (float(window.median()) if present else math.nan), present


def witness(ctx: Context, kind: str) -> list[dict]:
    """The lines nvidia-smi ``kind`` (dmon, pmon) printed so far; none without nvidia-smi."""
    return read_table(ctx.witnesses[kind]) if kind in ctx.witnesses else []


def dmon_mean(ctx: Context, run: Run, column: str, a: float, b: float) -> float:
    """dmon's mean of ``column`` over the whole seconds inside run times [a, b] (NaN without dmon lines)."""
    rows = between(witness(ctx, "dmon"), wall(run, a), wall(run, b))
    values = [
        r[column] for r in rows if isinstance(r.get(column), float) and not math.isnan(r[column])
    ]
    return statistics.fmean(values) if values else math.nan


def pcie_checks(ctx: Context, run_dir: Path, method: str) -> list[Check]:
    """The PCIe RX of one h2d capture: the path taken, samples present, against the copied bytes and dmon."""
    run = load_run(run_dir)
    gpu = run.meta.gpu
    taken = gpu.pcie_method if gpu is not None else None
    why = gpu.gpm_reason if gpu is not None else ""
    path = Check(
        "PCIe path",
        f"{taken}" + (f" ({why})" if why and taken != "gpm" else ""),
        method,
        taken == method,
    )
    ev = evidence_from_run(run)
    checks = [
        path,
        judge_coverage("RX present", ev.rx_coverage),
        judge_ratio("RX vs bytes copied", ev.nvml_rx_bps, ev.probe_rx_bps, "NVML", "h2d copied"),
    ]
    if "dmon" not in ctx.witnesses:
        return checks + [
            Check("RX vs nvidia-smi dmon", "no nvidia-smi here", f"within {RX_TOLERANCE:.0%}", None)
        ]
    dmon = dmon_mean(ctx, run, "rxpci", *busy_span(run)) * MB_BYTES
    return checks + [judge_ratio("RX vs nvidia-smi dmon", ev.nvml_rx_bps, dmon, "NVML", "dmon")]


# -- rows ------------------------------------------------------------------------------------------


def row_pcie_gpm(ctx: Context) -> tuple[list[Check], list[str]]:
    if ctx.gpu.get("gpm_reason"):
        raise NotHere(f"no GPM on this GPU: {ctx.gpu['gpm_reason']}")
    run_dir = ctx.capture("pcie-gpm", ctx.workload_args(("h2d",)))
    return pcie_checks(ctx, run_dir, "gpm"), []


def row_pcie_counters(ctx: Context) -> tuple[list[Check], list[str]]:
    run_dir = ctx.capture("pcie-counters", ctx.workload_args(("h2d",)), env={NO_GPM_ENV: "1"})
    return pcie_checks(ctx, run_dir, "counters"), [f"GPM ignored: {NO_GPM_ENV}=1 (docs/nvml.md)"]


def row_gpm_sm(ctx: Context) -> tuple[list[Check], list[str]]:
    if ctx.gpu.get("gpm_reason"):
        raise NotHere(f"no GPM on this GPU: {ctx.gpu['gpm_reason']}")
    notes = []
    idle = ctx.run(
        [sys.executable, "-c", IDLE_SAMPLER, str(ctx.gpu["index"]), f"{ctx.preset.idle_s:g}"],
        timeout=ctx.preset.idle_s + 60,
    )
    found = idle.json() or {}
    values = [math.nan if v is None else v for v in found.get("sm_active_pct", [])]
    if not values:
        notes.append(f"idle sampler: {found.get('reason') or idle.last_line()}")
    present = [v for v in values if not math.isnan(v)]
    checks = [
        judge_sm_active(
            "idle",
            statistics.median(present) if present else math.nan,
            len(present) / len(values) if values else 0.0,
            None,
            IDLE_SM_MAX,
        )
    ]
    if "pcie-gpm" in ctx.captures:
        notes.append(f"copying: the h2d capture of pcie_gpm ({ctx.captures['pcie-gpm'].name})")
    copy = ctx.captures.get("pcie-gpm") or ctx.capture("pcie-gpm", ctx.workload_args(("h2d",)))
    gemm = ctx.capture("gemm", ctx.workload_args(("gemm",)))
    for name, run_dir, low, high in (
        ("copying (h2d)", copy, None, COPY_SM_MAX),
        ("GEMM (gemm)", gemm, GEMM_SM_MIN, None),
    ):
        run = load_run(run_dir)
        median, share = device_column(run, "sm_active_pct", *busy_span(run))
        checks.append(judge_sm_active(name, median, share, low, high))
    return checks, notes


def pair_capture(ctx: Context) -> Path:
    """The preset's pair time-sliced (shared by per_process_sm and mps)."""
    return ctx.captures.get("pair-timeslice") or ctx.capture(
        "pair-timeslice", ctx.workload_args(ctx.preset.pair)
    )


def row_per_process_sm(ctx: Context) -> tuple[list[Check], list[str]]:
    run = load_run(pair_capture(ctx))
    spans = [busy_span(run, slot) for slot in "AB"]
    window = overlap_window(*zip(*spans))
    if window is None:
        raise RuntimeError(f"the two jobs never stepped together ({spans})")
    a, b = window
    pids = {w.slot: w.pid for w in run.workloads}
    specs = {w.slot: w.spec for w in run.workloads}
    procs = run.processes()
    pmon = pmon_shares(ctx, run, a, b)
    checks = []
    for slot in "AB":
        mine = procs[(procs["process"] == slot) & (procs["t"] >= a) & (procs["t"] <= b)][
            "gpu_sm_util"
        ]
        ours = float(mine.median()) if mine.notna().any() else math.nan
        theirs = statistics.median(pmon[pids[slot]]) if pmon.get(pids[slot]) else math.nan
        checks.append(
            judge_share(slot, specs[slot], ours, theirs if "pmon" in ctx.witnesses else None)
        )
    checks.append(judge_never_above(*sums_above_device(run)))
    return checks, [f"window: run time {a:.1f}–{b:.1f} s, both jobs stepping"]


def pmon_shares(ctx: Context, run: Run, a: float, b: float) -> dict[int, list[float]]:
    """PID → pmon's SM % per second inside run times [a, b], each second's shares clamped to dmon's SM % as gpumon
    clamps its own (a listed process without a figure: 0 %, gpumon's and nvitop's convention)."""
    lines = between(witness(ctx, "pmon"), wall(run, a), wall(run, b))
    device = {r["wall"]: r["sm"] for r in witness(ctx, "dmon")}
    seconds: dict[float, dict[int, float]] = {}

    def device_at(
        second: float,
    ) -> float:  # dmon's line of that second, else of the one before or after
        return next((device[s] for s in (second, second - 1, second + 1) if s in device), math.nan)

    for line in lines:
        if isinstance(line.get("pid"), float) and not math.isnan(line["pid"]):
            sm = line.get("sm")
            seconds.setdefault(line["wall"], {})[int(line["pid"])] = (
                sm if isinstance(sm, float) and not math.isnan(sm) else 0.0
            )
    shares: dict[int, list[float]] = {}
    for second, by_pid in seconds.items():
        for pid, value in clamp_to_device(by_pid, device_at(second)).items():
            shares.setdefault(pid, []).append(value)
    return shares


def sums_above_device(run: Run) -> tuple[int, int, float]:
    """(process ticks, ticks where every listed process's SM share summed above the device's GPU util of the
    last 1.5 s plus the tolerance, worst excess in points)."""
    procs, device, others = run.processes(), run.device(), run.others()
    rows = [procs[["t", "gpu_sm_util"]]]
    if len(others):
        rows.append(others[["t", "sm_pct"]].rename(columns={"sm_pct": "gpu_sm_util"}))
    table = pd.concat(rows).dropna()
    table["gpu_sm_util"] = table["gpu_sm_util"].astype(float)
    ticks, above, worst = 0, 0, 0.0
    for t, group in table.groupby(table["t"].round(3)):
        recent = device[(device["t"] > t - 1.5) & (device["t"] <= t)]["gpu_util"].dropna()
        if not len(recent):
            continue
        ticks += 1
        excess = float(group["gpu_sm_util"].sum()) - float(recent.max())
        if excess > SM_SUM_TOLERANCE_PCT:
            above, worst = above + 1, max(worst, excess)
    return ticks, above, worst


def row_doctor_verify(ctx: Context) -> tuple[list[Check], list[str]]:
    done = ctx.gpumon("doctor", "--verify", "--json", "--device", ctx.device, timeout=300)
    report = done.json()
    if report is None:
        raise RuntimeError(
            f"gpumon doctor --verify gave no JSON ({done.returncode}): {done.last_line()}"
        )
    checks = [
        Check(
            "exit status, verified",
            f"{done.returncode}, verified {report.get('verified')}",
            "0, verified",
            done.returncode == 0 and bool(report.get("verified")),
        )
    ]
    by_name = {c["name"]: c for c in report.get("checks", [])}
    for name in ("pcie_rx", "job_pid", "utilisation"):
        check = by_name.get(name, {})
        checks.append(
            Check(
                name,
                f"[{check.get('level', 'absent')}] {check.get('summary', '')}",
                "ok",
                check.get("level") == "ok",
                {"detail": check.get("detail"), "notes": check.get("notes")},
            )
        )
    cpu = by_name.get("monitor_cpu", {})
    return checks, [f"monitor CPU: [{cpu.get('level')}] {cpu.get('summary')}"] if cpu else []


def row_mps(ctx: Context) -> tuple[list[Check], list[str]]:
    notes: list[str] = []
    alone = [ctx.capture(f"x-{spec}", ctx.workload_args((spec,))) for spec in ctx.preset.pair]
    shared = {"time-sliced": pair_capture(ctx)}
    server: list[Check] = []
    if shutil.which(CONTROL) is None:
        server.append(
            Check(
                f"{SERVER} during, gone after",
                f"no {CONTROL} on PATH",
                "listed during, gone after",
                None,
            )
        )
    else:
        before = set(processes_running(SERVER))
        if before:
            notes.append(f"{SERVER} already running before (PIDs {sorted(before)}): not counted")
        seen: set[int] = set()
        shared["MPS"] = ctx.capture(
            "pair-mps",
            mps_pair_args(ctx),
            extra=("--share", "mps"),
            also=lambda: seen.update(set(processes_running(SERVER)) - before),
        )
        end = time.monotonic() + SERVER_GONE_S
        while seen & set(processes_running(SERVER)) and time.monotonic() < end:
            time.sleep(0.2)
        left = seen & set(processes_running(SERVER))
        server.append(
            Check(
                f"{SERVER} during",
                f"PIDs {sorted(seen)}" if seen else "never seen",
                "listed",
                bool(seen),
            )
        )
        server.append(
            Check(
                f"{SERVER} after",
                f"still running: {sorted(left)}" if left else "gone",
                f"gone within {SERVER_GONE_S:.0f} s",
                bool(seen) and not left,
            )
        )
    checks = []
    for name, run_dir in shared.items():
        done = ctx.gpumon(
            "compare",
            "--json",
            "--exclusive",
            f"A={alone[0]}",
            "--exclusive",
            f"B={alone[1]}",
            "--shared",
            str(run_dir),
            timeout=120,
        )
        compared = done.json() if done.returncode == 0 else None
        checks.append(
            judge_stp(
                f"{name} against the exclusive runs",
                compared,
                f"compare failed ({done.returncode}): {done.last_line()}",
            )
        )
    return checks + server, notes


def mps_pair_args(ctx: Context) -> list[str]:
    """The pair for --share mps: gpumon refuses MPS with --device cpu, so on the CPU (this script's own test) the
    same two workloads run as --cmd jobs of the same harness, matched to the exclusive runs by slot (A=, B=)."""
    if ctx.device != "cpu":
        return ctx.workload_args(ctx.preset.pair)
    args = []
    for spec in ctx.preset.pair:
        args += ["--cmd", shlex.join(to_argv(parse_workload_spec(spec), "cpu"))]
    return args


def judge_calibration(constants: dict, seconds: float, mps: object) -> list[Check]:
    """The constants plausible for a GPU, found in under a minute; the MPS fill where MPS was measured."""
    checks = [
        Check(
            "finished",
            f"{seconds:.0f} s",
            f"< {CALIBRATE_MAX_S:.0f} s",
            seconds < CALIBRATE_MAX_S,
            {"seconds": seconds},
        )
    ]
    slice_s, switch_s = constants.get("slice_s"), constants.get("switch_s")
    low, high = CALIBRATE_SANE["slice_s"]
    checks.append(
        Check(
            "time slice",
            "none" if slice_s is None else f"{1e3 * slice_s:.2f} ms",
            f"{1e3 * low:g}-{1e3 * high:g} ms",
            slice_s is not None and low <= slice_s <= high,
        )
    )
    checks.append(
        Check(
            "switch cost",
            "none" if switch_s is None else f"{1e3 * switch_s:.3f} ms",
            "0 ≤ switch < slice",
            switch_s is not None and slice_s is not None and 0 <= switch_s < slice_s,
        )
    )
    for key, name in (("util_scale", "utilisation scale"), ("sm_fill", "MPS SM fill")):
        value, (low, high) = constants.get(key), CALIBRATE_SANE[key]
        if key == "sm_fill" and value is None:
            checks.append(Check(name, str(mps), f"{low:g}-{high:g}", None))
            continue
        checks.append(
            Check(
                name,
                "none" if value is None else f"{value:.3f}",
                f"{low:g}-{high:g}",
                value is not None and low <= value <= high,
            )
        )
    return checks


def row_calibrate(ctx: Context) -> tuple[list[Check], list[str]]:
    if ctx.calibrate_device is None:
        raise NotHere(
            "gpumon calibrate needs the GPU (or --calibrate-device sliced:SOCKET, the tests' stand-in)"
        )
    store = ctx.evidence / "calibration"
    began = time.monotonic()
    done = ctx.gpumon(
        "calibrate",
        "--device",
        ctx.calibrate_device,
        "--json",
        env={"GPUMON_CALIBRATION": str(store)},
        timeout=3 * CALIBRATE_MAX_S,
    )
    seconds = time.monotonic() - began
    data = done.json() if done.returncode == 0 else None
    if data is None:
        return [Check("exit status", f"{done.returncode}: {done.last_line()}", "0", False)], []
    ctx.files.append(str(Path(data["path"]).relative_to(ctx.evidence)))
    mps = data.get("details", {}).get("mps")
    notes = [f"{data['gpu']}: " + ", ".join(f"{k} {v:.4g}" for k, v in data["constants"].items())]
    return [Check("exit status", "0", "0", True)] + judge_calibration(
        data["constants"], seconds, mps
    ), notes


def live_lines(log: Path) -> list[dict]:
    """The interference objects a `gpumon run --baseline … --headless --json` log holds, in order."""
    found = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else ():
        if line.startswith("{") and '"measuring"' in line:
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return found


def verdict_shown(log: Path) -> bool:
    """The live line has left "measuring…" and holds an STP."""
    return any(not o["measuring"] and o.get("stp") is not None for o in live_lines(log))


def judge_live(name: str, lines: list[dict], compared: dict | None, error: str) -> list[Check]:
    """The live line's last figures against compare's of the same run: measuring first, then each r and the STP
    within LIVE_TOLERANCE and one step of the slower job in the overlap (the live window is the overlap so far,
    compare's the whole overlap, cut at the last steps: at the end they differ by where an edge falls)."""
    steps = [
        sum(
            s["steps"]
            for s in ((compared or {}).get("workloads", {}).get(k, {}).get("shared") or [])
        )
        for k in "AB"
    ]
    tolerance = LIVE_TOLERANCE + (1 / min(steps) if min(steps) > 0 else 0.0)
    criterion = (
        f"within {LIVE_TOLERANCE:.0%} + one step in {min(steps)} ({tolerance:.1%}) of compare's"
    )
    final = next(
        (o for o in reversed(lines) if not o["measuring"] and o.get("stp") is not None), None
    )
    first = next((i for i, o in enumerate(lines) if not o["measuring"]), len(lines))
    measuring = [o for o in lines[:first] if o["measuring"]]
    checks = [
        Check(
            f"{name}: measuring… first",
            f"{len(measuring)} lines, then " + ("a verdict" if final else "none"),
            "measuring… before the verdict",
            bool(measuring) and bool(final),
            {"measuring_lines": len(measuring)},
        )
    ]
    if final is None or compared is None:
        return checks + [
            Check(
                f"{name}: live against compare",
                error if compared is None else "no live verdict",
                criterion,
                False,
            )
        ]
    live = {**{f"r_{k}": v for k, v in final["slowdown"].items()}, "STP": final["stp"]}
    theirs = {f"r_{k}": (compared["workloads"][k]["slowdown"] or {}).get("estimate") for k in "AB"}
    theirs["STP"] = (compared["pair"]["stp"] or {}).get("estimate")
    for key in ("r_A", "r_B", "STP"):
        ours, reference = live.get(key), theirs[key]
        ok = ours is not None and reference is not None and abs(ours / reference - 1) <= tolerance
        shown = lambda v: "none" if v is None else f"{v:.2f}"  # noqa: E731
        checks.append(
            Check(
                f"{name}: {key}",
                f"live {shown(ours)}, compare {shown(reference)}",
                criterion,
                ok,
                {"live": ours, "compare": reference},
            )
        )
    return checks


def wait_for_probe(ctx: Context, wrapped: subprocess.Popen) -> None:
    """Until the wrapped job has opened its probe's rendezvous (torch imported, the probe started): --beside reads
    its steps from there, and a job watched before that is one without a probe for the whole run."""
    where = rendezvous.probes_dir()
    end = time.monotonic() + min(START_ALLOWANCE_S, ctx.left())
    while where is None or not rendezvous.socket_path(where, wrapped.pid).exists():
        if wrapped.poll() is not None or time.monotonic() > end:
            state = (
                f"exited {wrapped.returncode}"
                if wrapped.returncode is not None
                else "still starting"
            )
            raise RuntimeError(
                f"the wrapped job never opened its probe's rendezvous in {where} ({state})"
            )
        time.sleep(0.2)


def row_live_line(ctx: Context) -> tuple[list[Check], list[str]]:
    """The live interference line (`--headless --json`: the TUI's own computation) of a launched pair with
    --baseline runs, and of a job started --beside a process under `gpumon wrap` (its baseline the watched job's
    steps before the launch), each against `gpumon compare` of the same run."""
    a, b = ctx.preset.pair
    alone = {
        spec: ctx.captures.get(f"x-{spec}") or ctx.capture(f"x-{spec}", ctx.workload_args((spec,)))
        for spec in (a, b)
    }
    pair = ctx.capture(
        "live-pair",
        ctx.workload_args((a, b)),
        extra=("--baseline", f"A={alone[a]}", "--baseline", f"B={alone[b]}"),
        until=verdict_shown,
    )
    lines = live_lines(ctx.last_log) if ctx.last_log else []
    done = ctx.gpumon(
        "compare",
        "--json",
        "--exclusive",
        f"A={alone[a]}",
        "--exclusive",
        f"B={alone[b]}",
        "--shared",
        str(pair),
        timeout=120,
    )
    checks = judge_live(
        "pair",
        lines,
        done.json() if done.returncode == 0 else None,
        f"compare failed ({done.returncode}): {done.last_line()}",
    )
    wrapped = ctx.start(
        [
            sys.executable,
            "-m",
            "gpumon",
            "wrap",
            "--",
            *to_argv(parse_workload_spec(a), ctx.device),
        ],
        ctx.evidence / "logs" / f"{ctx.row}-wrapped.log",
    )
    try:
        wait_for_probe(ctx, wrapped)
        stagger = f"{ctx.preset.busy_s:g}"  # the watched job's steps alone before the launch: its baseline
        beside = ctx.capture(
            "live-beside",
            ctx.workload_args((b,)),
            until=verdict_shown,
            extra_s=ctx.preset.busy_s,
            extra=(
                "--beside",
                str(wrapped.pid),
                "--stagger",
                stagger,
                "--baseline",
                f"A={alone[b]}",
            ),
        )
        lines = live_lines(ctx.last_log) if ctx.last_log else []
        done = ctx.gpumon(
            "compare",
            "--json",
            "--exclusive",
            f"A={alone[b]}",
            "--shared",
            str(beside),
            timeout=120,
        )
        checks += judge_live(
            "--beside",
            lines,
            done.json() if done.returncode == 0 else None,
            f"compare failed ({done.returncode}): {done.last_line()}",
        )
    finally:
        _signal_group(
            wrapped.pid, signal.SIGTERM
        )  # the row's own process: started here, in its own session
        try:
            wrapped.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(wrapped.pid, signal.SIGKILL)
            wrapped.wait()
    return checks, [f"the --beside job: pid {wrapped.pid}, {a} under gpumon wrap"]


def row_observer_cost(ctx: Context) -> tuple[list[Check], list[str]]:
    nvitop = shutil.which("nvitop") or str(Path(sys.executable).with_name("nvitop"))
    if not Path(nvitop).exists():
        raise NotHere(
            "nvitop is not installed here (pip install nvitop; on a borrowed GPU: the wheels in .gpu/)"
        )
    if importlib.util.find_spec("textual") is None:
        raise NotHere(
            "textual is not installed here: the TUI cannot run (on a borrowed GPU: the wheels in .gpu/)"
        )
    p = ctx.preset
    done = ctx.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "observer_cost.py"),
            "--device",
            ctx.device,
            "--nvml",
            "real",
            "--warmup",
            f"{p.observer_warmup_s:g}",
            "--seconds",
            f"{p.observer_s:g}",
            "--only",
            "gpumon TUI",
            "--only",
            "nvitop --interval 0.25",
        ],
        timeout=3 * (p.observer_warmup_s + p.observer_s) + 150,
    )
    cpu = {
        m.group(1).strip(): float(m.group(2))
        for m in re.finditer(r"^  (\S.*?)\s+CPU\s+([\d.]+) % of one core", done.output, re.M)
    }
    ratio = re.search(r"TUI ÷ nvitop@0\.25 s = ([\d.]+)", done.output)
    at_4hz = re.search(r"TUI at nvitop's 4 Hz ÷ nvitop@0\.25 s = ([\d.]+)", done.output)
    notes = [f"TUI at --interval 250 ÷ nvitop@0.25 s = {at_4hz.group(1)}"] if at_4hz else []
    if done.timed_out:
        notes.append("timed out")
    return [
        judge_ratio_max("TUI ÷ nvitop@0.25 s", float(ratio.group(1)) if ratio else None, cpu)
    ], notes


def row_pytest_gpu(ctx: Context) -> tuple[list[Check], list[str]]:
    argv = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider"]
    for test in DUPLICATES:
        argv += ["--deselect", test]
    done = ctx.run(argv)
    counts = {kind: 0 for kind in ("passed", "failed", "skipped", "error")}
    summary = [
        line
        for line in done.output.splitlines()
        if re.search(r"\d+ (passed|failed|skipped|deselected)", line)
    ]
    for number, kind in re.findall(
        r"(\d+) (passed|failed|skipped|errors?)", summary[-1] if summary else ""
    ):
        counts[kind.rstrip("s") if kind.startswith("error") else kind] += int(number)
    measured = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "nothing ran"
    if done.timed_out:
        measured += " (timed out)"
    notes = sorted(
        {
            re.sub(r"^SKIPPED \[\d+\] ", "", line)
            for line in done.output.splitlines()
            if line.startswith("SKIPPED")
        }
    )[:3]
    # its time is whatever the budget left: cut there, what had passed is not a failure, and not the whole either
    failed = counts["failed"] + counts["error"] > 0 or (
        done.returncode not in (0, 5) and not done.timed_out
    )
    checks = [
        Check(
            "tests",
            measured,
            "none failed, ≥ 1 passed",
            False if failed else (True if counts["passed"] and not done.timed_out else None),
            counts,
        )
    ]
    return checks, notes


ROWS: list[
    tuple[str, str, Callable[[Context], tuple[list[Check], list[str]]], Callable[[Preset], float]]
] = [
    (
        "pcie_gpm",
        "PCIe RX on a saturated link, GPM path",
        row_pcie_gpm,
        lambda p: p.busy_s + START_ALLOWANCE_S,
    ),
    (
        "pcie_counters",
        "PCIe RX on a saturated link, wrap-safe counters forced",
        row_pcie_counters,
        lambda p: p.busy_s + START_ALLOWANCE_S,
    ),
    (
        "gpm_sm",
        "GPM SM active: idle, copy, GEMM",
        row_gpm_sm,
        lambda p: p.idle_s + 2 * (p.busy_s + START_ALLOWANCE_S),
    ),
    (
        "per_process_sm",
        "per-process SM of two jobs against nvidia-smi pmon",
        row_per_process_sm,
        lambda p: p.busy_s + START_ALLOWANCE_S,
    ),
    ("doctor_verify", "gpumon doctor --verify", row_doctor_verify, lambda p: 300.0),
    (
        "mps",
        "a pair time-sliced and under --share mps against the same exclusive runs",
        row_mps,
        lambda p: 4 * (p.busy_s + START_ALLOWANCE_S),
    ),
    (
        "live_line",
        "the live verdict of a pair with --baseline runs and of a job --beside a wrapped one",
        row_live_line,
        lambda p: 4 * (p.busy_s + START_ALLOWANCE_S),
    ),
    (
        "calibrate",
        "gpumon calibrate: time slice, switch cost, utilisation scale, MPS SM fill",
        row_calibrate,
        lambda p: 3 * CALIBRATE_MAX_S,
    ),
    (
        "observer_cost",
        "observer cost: gpumon TUI against nvitop",
        row_observer_cost,
        lambda p: 3 * (p.observer_warmup_s + p.observer_s) + 150,
    ),
    ("pytest_gpu", "pytest -m gpu", row_pytest_gpu, lambda p: math.inf),
]


def run_row(ctx: Context, key: str, title: str, fn: Callable, seconds: float) -> RowResult:
    began = time.monotonic()
    ctx.begin(key, seconds)
    notes: list[str] = []
    try:
        checks, notes = fn(ctx)
        status = row_status(checks)
    except NotHere as why:
        checks, status, notes = [], SKIP, [str(why)]
    except Exception as err:  # one row's failure is that row's result; the others still run
        checks, status = [], FAIL
        notes = [f"error: {err}" if str(err) else f"error: {type(err).__name__}"]
        log = ctx.evidence / "logs" / f"{key}-traceback.txt"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(traceback.format_exc())
        ctx.files.append(str(log.relative_to(ctx.evidence)))
    return RowResult(
        key,
        title,
        status,
        checks,
        notes,
        list(ctx.commands),
        list(ctx.files),
        time.monotonic() - began,
    )


# -- the whole run and its report ---------------------------------------------------------------


def gpumon_commit(given: str | None) -> str:
    if given:
        return given
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=10", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (no git)"
    if head.returncode != 0:
        return "unknown (no .git here: pass --commit)"
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def open_gpu(index: int | None) -> tuple[dict | None, str]:
    """(device_info, '') of the GPU gpumon would sample, or (None, why not)."""
    source = NvmlSource(index)
    status = source.open()
    info = source.device_info() if status.available else None
    source.close()
    return info, status.reason


def write_report(out: Path, report: dict, rows: list[RowResult]) -> None:
    (out / "validation.json").write_text(
        json.dumps(_plain({**report, "rows": [asdict(r) for r in rows]}), indent=2)
    )
    gpu = report["gpu"]
    counts = {s: sum(r.status == s for r in rows) for s in (PASS, FAIL, SKIP)}
    lines = [
        "# gpumon on a GPU: validation",
        "",
        "| | |",
        "| --- | --- |",
        f"| device | {gpu.get('name')} (GPU {gpu.get('index')}, {gpu.get('uuid')}), PCIe gen{gpu.get('pcie_gen')} "
        f"x{gpu.get('pcie_width')}, PCIe bytes by default: {gpu.get('pcie_method')}"
        + (f" ({gpu['gpm_reason']})" if gpu.get("gpm_reason") else "")
        + " |",
        f"| driver | {gpu.get('driver')} |",
        f"| gpumon | {report['gpumon']['version']}, commit {report['gpumon']['commit']} |",
        f"| machine | {report['machine']} |",
        f"| run | {report['started_at']}, preset {report['preset']}, workloads on {report['device']}, "
        f"{report['seconds']:.0f} s |",
        f"| result | **{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} not checked** "
        f"(exit status {report['exit_status']}) |",
        "",
        "| row | check | measured | pass when | result |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        first = f"**{row.key}**: {row.title} — **{row.status}**"
        if not row.checks:
            lines.append(f"| {first} | | {_cell('; '.join(row.notes))} | | {row.status} |")
        for i, check in enumerate(row.checks):
            result = {True: PASS, False: FAIL, None: SKIP}[check.ok]
            lines.append(
                f"| {first if i == 0 else ''} | {_cell(check.name)} | {_cell(check.measured)} | "
                f"{_cell(check.criterion)} | {result} |"
            )
    lines += ["", "## Rows", ""]
    for row in rows:
        lines += [f"### {row.key}: {row.status} ({row.seconds:.0f} s)", ""]
        lines += [f"- {note}" for note in row.notes]
        lines += [f"- `{command}`" for command in row.commands]
        if row.files:
            lines.append("- files (evidence.tar.gz): " + ", ".join(f"`{f}`" for f in row.files))
        lines.append("")
    lines += [
        "Witnesses: `nvidia-smi-dmon.txt`, `nvidia-smi-pmon.txt` (`-d 1 -o DT`, the whole session)."
        if report["witnesses"]
        else "No nvidia-smi here: no witnesses.",
        "",
    ]
    (out / "validation.md").write_text("\n".join(lines))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _plain(value: object) -> object:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def pack(evidence: Path, keep: bool) -> None:
    with tarfile.open(evidence.parent / "evidence.tar.gz", "w:gz") as tar:
        tar.add(evidence, arcname="evidence")
    if not keep:
        shutil.rmtree(evidence)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="directory for validation.md/.json and the evidence"
    )
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="full",
        help="full (default: a real GPU, about 9.5 min on an H100) or short (the script's own test)",
    )
    parser.add_argument(
        "--device",
        default="cuda",
        help="where the workloads run: cuda (default), cuda:N, or cpu "
        "(only to test this script against the fake driver)",
    )
    parser.add_argument(
        "--gpu", type=int, help="the GPU index gpumon samples (default: as gpumon run chooses)"
    )
    parser.add_argument(
        "--calibrate-device",
        metavar="DEVICE",
        help="where gpumon calibrate's probes run (default: --device when it is a GPU; sliced:SOCKET: "
        "the tests' time-sliced stand-in, tests/fakegpu)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[r[0] for r in ROWS],
        help="run only this row (repeatable)",
    )
    parser.add_argument("--budget", type=float, help="seconds for all rows (default: the preset's)")
    parser.add_argument(
        "--commit", help="the gpumon commit to record where this checkout has no .git"
    )
    parser.add_argument(
        "--keep-evidence", action="store_true", help="also leave DIR/evidence/ unpacked"
    )
    args = parser.parse_args(argv)
    os.environ.pop(
        NO_GPM_ENV, None
    )  # the GPU's own default path; pcie_counters sets it for its capture only
    gpu, why = open_gpu(args.gpu)
    if gpu is None:
        print(
            f"gpu_validation: no GPU here (NVML {why.removeprefix('unavailable: ')}): nothing to validate",
            file=sys.stderr,
        )
        return 2
    budget = args.budget or PRESETS[args.preset].budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    evidence = args.out / "evidence"
    shutil.rmtree(evidence, ignore_errors=True)
    evidence.mkdir()
    started, began = datetime.now(timezone.utc), time.monotonic()
    witnesses = {
        kind: Witness.start(kind, args.out / f"nvidia-smi-{kind}.txt", gpu["index"])
        for kind in ("dmon", "pmon")
    }
    ctx = Context(args, evidence, gpu, {k: w.path for k, w in witnesses.items() if w is not None})
    rows: list[RowResult] = []
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        for key, title, fn, timeout in ROWS:
            if args.only and key not in args.only:
                continue
            left = budget - (time.monotonic() - began)
            if left < MIN_ROW_S:
                rows.append(
                    RowResult(
                        key,
                        title,
                        SKIP,
                        [],
                        [f"not run: {left:.0f} s left of the {budget:.0f} s budget"],
                        [],
                        [],
                        0.0,
                    )
                )
                continue
            print(f"gpu_validation: {key} ...", file=sys.stderr, flush=True)
            rows.append(run_row(ctx, key, title, fn, min(timeout(ctx.preset), left)))
            print(
                f"gpu_validation: {key}: {rows[-1].status} ({rows[-1].seconds:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    except KeyboardInterrupt:
        print("gpu_validation: interrupted; writing what was measured", file=sys.stderr)
    finally:
        for witness in witnesses.values():
            if witness is not None:
                witness.stop()
    status = exit_status(rows)
    report = {
        "gpu": gpu,
        "device": args.device,
        "preset": args.preset,
        "budget_s": budget,
        "started_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "seconds": time.monotonic() - began,
        "exit_status": status,
        "gpumon": {"version": __version__, "commit": gpumon_commit(args.commit)},
        "machine": f"{os.cpu_count()} CPU cores, {platform.platform()}, Python {platform.python_version()}",
        "witnesses": sorted(ctx.witnesses),
    }
    write_report(args.out, report, rows)
    pack(evidence, args.keep_evidence)
    print(
        f"gpu_validation: {sum(r.status == PASS for r in rows)} of {len(rows)} rows passed; "
        f"{args.out / 'validation.md'} (exit {status})",
        file=sys.stderr,
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
