"""`gpumon doctor`: can gpumon do its job on this machine, and if not, why."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpumon.core.jobs import mps
from gpumon.core.records import childmsg
from gpumon.core.records.decode import Refused
from gpumon.core.records.printable import printable
from gpumon.core.sources.nvml import NvmlSource, pid_namespace_hint
from gpumon.console.color import use_color
from gpumon.core.jobs.interpreter import ENV_PYTHON, WorkloadPython, choose
from gpumon.core.store.runsfolder import default_runs_dir
from gpumon.errors import UsageError
from gpumon.extras import TORCH, install_hint

OK, WARN, FAIL = "ok", "warn", "fail"
CAP_SYS_PTRACE = 19
TORCH_TIMEOUT_S = 120.0
MPS_CHECK = "mps"  # the name of the check that --share mps can work (verify leaves it to doctor)

# Run in a child: the parent never imports torch.
TORCH_PROBE = """
import json
try:
    import torch
except Exception as err:
    print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
    raise SystemExit(0)
info = {"torch": torch.__version__, "cuda_build": torch.version.cuda}
try:
    info["cuda_available"] = bool(torch.cuda.is_available())
    info["device_count"] = torch.cuda.device_count() if info["cuda_available"] else 0
    if info["device_count"]:
        info["device_name"] = torch.cuda.get_device_name(0)
except Exception as err:
    info["cuda_available"] = False
    info["cuda_error"] = f"{type(err).__name__}: {err}"
print(json.dumps(info))
"""


@dataclass
class Check:
    """One line of the report: a level (ok/warn/fail), a summary, details for --json."""

    name: str
    level: str
    summary: str
    detail: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run_doctor(args: argparse.Namespace) -> int:
    """Run every check, print the report, return 0 if gpumon can work here, else 1."""
    if (
        getattr(args, "device", "auto") != "auto"
    ):  # a Namespace built by hand (tests) may lack the --verify flags
        raise UsageError(
            "--device only applies with --verify (gpumon doctor --verify --device cpu)"
        )
    if args.gpu is not None and args.gpu < 0:
        raise UsageError(f"--gpu must be a GPU index (0 or more), not {args.gpu}")
    checks = [
        check_python(),
        *check_nvml(args.gpu),
        check_torch(choose(getattr(args, "python", None))),
        check_py_spy(),
        check_ptrace(),
        check_runs_dir(),
    ]
    ok = not any(c.level == FAIL for c in checks)
    if args.json:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        print(render_text(checks, ok, use_color()))
    return 0 if ok else 1


# -- checks -----------------------------------------------------------------


def check_python() -> Check:
    version = ".".join(str(v) for v in sys.version_info[:3])
    return Check("python", OK, f"python {version} ({sys.executable})", {"version": version})


def check_nvml(gpu: int | None) -> list[Check]:
    """NVML and the selected GPU (what it supports), the other GPUs, the PID-namespace trap, and MPS."""
    source = NvmlSource(gpu)
    status = source.open()
    try:
        if not status.available:
            # Only a GPU asked for by index on a machine that has GPUs is a reason to fail.
            level = FAIL if gpu is not None and source.device_count else WARN
            notes = (
                []
                if level == FAIL
                else ["GPU panels will show N/A; workloads can still train on the CPU"]
            )
            detail = {
                "available": False,
                "reason": status.reason,
                "device_count": source.device_count,
            }
            return [Check("nvml", level, f"NVML {status.reason}", detail, notes), check_mps()]
        info = source.device_info()
        checks = [_gpu_check(info), *_other_gpus(info["index"], source.device_count)]
        hint = pid_namespace_hint((), source.all_gpu_pids())
        if hint:
            checks.append(
                Check(
                    "pid_namespace",
                    WARN,
                    "GPU processes are not visible here",
                    {"hint": hint},
                    [hint],
                )
            )
        return [*checks, check_mps(info.get("compute_mode"))]
    finally:
        source.close()


COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


def check_mps(compute_mode: int | None = None) -> Check:
    """Whether ``--share mps`` can work: the MPS binaries, a daemon already running, the compute mode."""
    control = shutil.which(mps.CONTROL)
    running = mps.existing_daemon()
    mode = COMPUTE_MODES.get(compute_mode) if compute_mode is not None else None
    detail = {
        "control": control,
        "running_daemon": str(running) if running else None,
        "compute_mode": mode,
    }
    if control is None:
        return Check(
            MPS_CHECK,
            WARN,
            f"MPS unavailable: {mps.CONTROL} not found",
            detail,
            ["--share mps needs the NVIDIA driver's CUDA MPS binaries; time slicing still works"],
        )
    if mode == "Prohibited":
        return Check(
            MPS_CHECK,
            WARN,
            "MPS unusable: the GPU's compute mode is Prohibited",
            detail,
            ["no CUDA context can run on this GPU (nvidia-smi -c DEFAULT, as root)"],
        )
    where = f", compute mode {mode}" if mode else ""
    if running is not None:
        return Check(
            MPS_CHECK,
            WARN,
            f"MPS daemon already running (pipe directory {running}){where}",
            detail,
            [
                "--share mps:existing runs the jobs as its clients; plain --share mps refuses to start a second"
            ],
        )
    return Check(
        MPS_CHECK, OK, f"MPS usable ({control}{where}): gpumon run A B --share mps", detail
    )


def _gpu_check(info: dict) -> Check:
    unsupported = info["unsupported"]
    link = (
        f"PCIe gen{info['pcie_gen']} x{info['pcie_width']}" if info["pcie_gen"] else "PCIe link N/A"
    )
    mem = f"{info['mem_total_mib']:.0f} MiB" if info["mem_total_mib"] else "memory N/A"
    notes = [
        _pcie_note(info),
        "GPM metrics: " + ", ".join(info["gpm_metrics"])
        if info["gpm_metrics"]
        else f"no GPM: {info['gpm_reason']}",
        "not supported: " + ", ".join(unsupported) if unsupported else "all metrics supported",
    ]
    summary = f"GPU {info['index']}: {info['name']}, driver {info['driver']}, {link}, {mem}"
    return Check("gpu", WARN if unsupported else OK, summary, info, notes)


def _pcie_note(info: dict) -> str:
    """How this GPU's PCIe bytes are read (NvmlSource decides; docs/nvml.md)."""
    method = info["pcie_method"]
    if method == "gpm":
        return "PCIe bytes: GPM, exact at any interval"
    if method == "counters" and info["pcie_poll_ms"] is not None:
        return f"PCIe bytes: {info['pcie_counter_bits']}-bit counters sampled every {info['pcie_poll_ms']:.0f} ms"
    if method == "counters":
        return "PCIe bytes: 64-bit counters, differenced per interval"
    if method == "throughput":
        return "PCIe bytes: 20 ms throughput samples (no byte counters on this GPU/driver)"
    return "PCIe bytes: not available"


def _other_gpus(selected: int | None, count: int) -> list[Check]:
    """One line naming the GPUs not selected, if any."""
    names = []
    for index in range(count):
        if index == selected:
            continue
        other = NvmlSource(index)
        if other.open().available:
            names.append(f"{index}: {other.device_info()['name']}")
        other.close()
    if not names:
        return []
    return [
        Check(
            "other_gpus",
            OK,
            "other GPUs " + "; ".join(names),
            {"gpus": names},
            ["select one with --gpu"],
        )
    ]


def check_torch(python: WorkloadPython | None = None) -> Check:
    """The workloads' interpreter (default: ``choose()``): torch's version and whether CUDA works, asked in a child."""
    python = python or choose()
    who = f"workloads' python {python.path} ({python.chosen_by})"
    base = {"python": python.path, "chosen_by": python.chosen_by}
    try:
        done = subprocess.run(
            [python.path, "-c", TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=TORCH_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return Check(
            "torch", FAIL, f"{who}: torch check did not finish in {TORCH_TIMEOUT_S:.0f} s", base
        )
    except OSError as exc:
        return Check("torch", FAIL, f"{who} cannot run: {exc.strerror or exc}", base)
    lines = done.stdout.strip().splitlines()
    try:
        info = childmsg.torch_report(lines[-1]) if lines else {}
    except Refused:
        info = {}
    if not info:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Check(
            "torch", FAIL, f"{who}: torch check failed (exit {done.returncode}): {tail}", base
        )
    info = {**base, **info}
    if "error" in info:
        fix = (
            f"{install_hint(TORCH)}, or --python / {ENV_PYTHON} naming a python that has torch"
            if python.own
            else "name the python of an environment that has torch"
        )
        return Check(
            "torch",
            WARN,
            f"{who}: no torch ({info['error']})",
            info,
            ["built-in workloads cannot run; --cmd jobs and everything else can", fix],
        )
    if info.get("cuda_available"):
        summary = f"{who}: torch {info['torch']}, CUDA usable ({info['device_count']} device(s): {info.get('device_name')})"
        return Check("torch", OK, summary, info)
    why = info.get("cuda_error") or (
        "CPU-only torch build" if not info.get("cuda_build") else "no usable GPU"
    )
    return Check(
        "torch",
        WARN,
        f"{who}: torch {info['torch']}, CUDA not usable ({why})",
        info,
        ["workloads can run with --device cpu"],
    )


def check_py_spy() -> Check:
    path = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if path:
        return Check("py_spy", OK, f"py-spy {path}", {"path": path})
    return Check(
        "py_spy",
        WARN,
        "py-spy not found",
        {"path": None},
        ["stack sampling is off; pip install py-spy"],
    )


def _cap_eff() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def check_ptrace() -> Check:
    """Whether py-spy (a sibling of the workloads) may attach to them."""
    has_cap = bool(_cap_eff() >> CAP_SYS_PTRACE & 1)
    scope_file = Path("/proc/sys/kernel/yama/ptrace_scope")
    scope = int(scope_file.read_text()) if scope_file.exists() else None
    detail = {"ptrace_scope": scope, "uid": os.getuid(), "cap_sys_ptrace": has_cap}
    if scope in (None, 0):
        return Check(
            "ptrace",
            OK,
            f"ptrace allowed (yama ptrace_scope {scope if scope is not None else 'absent'})",
            detail,
        )
    if scope in (1, 2) and has_cap:
        return Check("ptrace", OK, f"ptrace allowed (CAP_SYS_PTRACE, ptrace_scope {scope})", detail)
    fix = (
        "run `sudo sysctl kernel.yama.ptrace_scope=0` or give gpumon CAP_SYS_PTRACE"
        if scope < 3
        else "ptrace_scope 3 forbids attaching until reboot"
    )
    return Check(
        "ptrace", WARN, f"py-spy cannot attach to workloads (ptrace_scope {scope})", detail, [fix]
    )


def check_runs_dir() -> Check:
    runs = default_runs_dir()
    existing = runs
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    writable = existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
    detail = {"path": str(runs), "exists": runs.exists(), "writable": writable}
    if not writable:
        return Check(
            "runs_dir",
            FAIL,
            f"runs directory {runs} cannot be written ({existing} is not a writable directory)",
            detail,
            ["set GPUMON_RUNS to a writable directory"],
        )
    state = "writable" if runs.exists() else "will be created"
    return Check("runs_dir", OK, f"runs directory {runs} ({state})", detail)


# -- output -----------------------------------------------------------------


def render_text(
    checks: list[Check],
    ok: bool,
    color: bool,
    title: str = "gpumon doctor",
    ready: str = "ready",
    not_ready: str = "not ready",
) -> str:
    """One screen: a tagged line per check, indented notes, a verdict."""
    colors = {OK: "32", WARN: "33", FAIL: "31"}

    def tag(level: str) -> str:
        text = f"[{level}]".ljust(6)
        return f"\033[{colors[level]}m{text}\033[0m" if color else text

    lines = [title]
    for c in checks:  # escaped: a summary quotes what a child, NVML or a path said
        lines.append(f"  {tag(c.level)} {printable(c.summary)}")
        lines.extend(f"         {printable(note)}" for note in c.notes)
    warnings = sum(c.level == WARN for c in checks)
    if ok:
        lines.append(f"{ready}{f' ({warnings} warning(s))' if warnings else ''}")
    else:
        failed = "; ".join(printable(c.summary) for c in checks if c.level == FAIL)
        lines.append(f"{not_ready}: {failed}")
    return "\n".join(lines)
