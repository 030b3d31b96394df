"""``gpumon calibrate``: the GPU model's constants measured with two probe processes of gpumon's own.

Two ``gpumon.workloads.sliceprobe`` processes start on the GPU (about as long as a CUDA context takes), then:

1. one probe alone, back-to-back kernels (1 s): its kernel length;
2. both at once, back-to-back kernels (4 s of each's work): the time slice and the switch cost, from the runs and
   gaps in each one's kernel ends (``gpumon.analysis.calibration.slicing``); then both on kernels that fill the SMs
   (2 s): the switch between contexts with state to save (``switch_s``), and probe A's short kernels beside B's
   filling ones (2 s): the slice a short-kernel job waits (``slice_s``, ``seen_slice``);
3. one probe, one kernel at a time with equal host gaps (4 s), while NVML is read every 0.1 s (the first second
   dropped: NVML averages up to a second back): how NVML's utilisation reads kernel time (``util_scale``);
4. where ``nvidia-cuda-mps-control`` is on PATH (and ``mps`` is asked for): gpumon's own MPS daemon (as ``--share
   mps`` starts it), two new probes as its clients, each alone and then both with SM-filling kernels (2 s each):
   the SMs a GPU-bound job's kernels hold (``sm_fill``).

Everything started here is stopped before it returns, also on failure; the probes die with this process.
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import subprocess
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any, Callable

from gpumon.core.records import childmsg
from gpumon.core.records.decode import Refused
from gpumon.core.records.enums import ShareKind
from gpumon import __version__
from gpumon.analysis import calibration as measure
from gpumon.analysis.calibration import CalibrationFailed
from gpumon.core.jobs.interpreter import child_path, choose, require_workload_python
from gpumon.core.jobs.lifeline import die_with_parent
from gpumon.core.jobs.mps import CONTROL, MpsControl, existing_daemon
from gpumon.core.records.share import ShareMode
from gpumon.core.store.calibration import Calibration
from gpumon.errors import UsageError
from gpumon.safewrite import scratch_file

READY_TIMEOUT_S = 180.0  # torch's import and a CUDA context on a loaded machine
ANSWER_MARGIN_S = 60.0  # beyond the work a request asked for
SPIN_ALONE_S, SPIN_SHARED_S, DUTY_S, FILL_S = 1.0, 4.0, 4.0, 2.0
NVML_PERIOD_S = 0.1
NVML_SETTLE_S = (
    1.0  # NVML's utilisation averages up to a second back: readings before this are not the probe's
)


@dataclass
class Probe:
    """One probe process and its pipes; ``ask`` sends a request and waits for its answer."""

    proc: subprocess.Popen
    log: IO[str]
    kernel_s: float = 0.0

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float) -> dict[str, Any]:
        """The probe's next JSON line; CalibrationFailed if it ends or says nothing in ``timeout`` seconds."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.log.flush()
            self.log.seek(0)
            tail = [x for x in self.log.read().splitlines() if x.strip()][-1:]
            why = (
                f"exited with status {self.proc.poll()}"
                if self.proc.poll() is not None
                else f"silent for {timeout:.0f} s"
            )
            raise CalibrationFailed(
                f"a calibration probe {why}" + (f": {tail[0].strip()}" if tail else "")
            )
        try:
            data = childmsg.probe_answer(line)
        except Refused as exc:
            raise CalibrationFailed(
                f"a calibration probe said something else than an answer: {exc}"
            ) from None
        if data.get("error"):
            raise CalibrationFailed(f"a calibration probe failed: {data['error']}")
        return data

    def ask(self, request: dict[str, Any], work_s: float) -> dict[str, Any]:
        self.send(request)
        return self.answer(work_s + ANSWER_MARGIN_S)

    def stop(self) -> None:
        """Ask it to quit, then make sure: it is ours (we started it, we hold its Popen)."""
        try:
            if self.proc.poll() is None:
                self.send({"do": "quit"})
                self.proc.wait(5)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            self.log.close()


def start_probes(device: str, env: list[dict[str, str]], python: str) -> list[Probe]:
    """Start one probe per environment (all at once: their CUDA contexts come up together) and wait until each is
    ready."""
    probes = []
    for extra in env:
        log = scratch_file()
        child = {
            **os.environ,
            **extra,
            "PYTHONPATH": os.pathsep.join(
                p for p in (child_path(), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        proc = subprocess.Popen(
            [python, "-m", "gpumon.workloads.sliceprobe", "--device", device],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=child,
            start_new_session=True,
            preexec_fn=functools.partial(die_with_parent, os.getpid()),
        )
        probes.append(Probe(proc, log))
    for probe in probes:
        ready = probe.answer(READY_TIMEOUT_S)
        if not ready.get("ready"):
            raise CalibrationFailed(
                f"a calibration probe could not use {device}: {ready.get('error', '?')}"
            )
        probe.kernel_s = float(ready["kernel_s"])
    return probes


def together(probes: list[Probe], request: dict[str, Any], work_s: float) -> list[dict[str, Any]]:
    """The same request to every probe at once; their answers."""
    for probe in probes:
        probe.send(request)
    return [probe.answer(work_s + ANSWER_MARGIN_S) for probe in probes]


@dataclass
class UtilSampler:
    """NVML's GPU utilisation every ``NVML_PERIOD_S`` on a thread, while a probe runs."""

    source: Any
    values: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "UtilSampler":
        began = time.monotonic()

        def loop() -> None:
            while not self._stop.wait(NVML_PERIOD_S):
                t = time.monotonic() - began
                sample = self.source.sample(t)
                if sample is not None and t >= NVML_SETTLE_S:
                    self.values.append(sample.gpu_util)

        self._thread = threading.Thread(target=loop, name="gpumon-calibrate-nvml", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _count(seconds: float, kernel_s: float) -> int:
    return max(50, int(seconds / kernel_s))


def time_slicing(probes: list[Probe]) -> tuple[measure.Slicing, dict[str, Any]]:
    a = probes[0]
    alone = a.ask({"do": "spin", "kernels": _count(SPIN_ALONE_S, a.kernel_s)}, SPIN_ALONE_S)["ends"]
    n = _count(SPIN_SHARED_S, a.kernel_s)
    ends = [x["ends"] for x in together(probes, {"do": "spin", "kernels": n}, 2 * SPIN_SHARED_S)]
    result = measure.slicing(measure.timeline(ends[0]), measure.timeline(ends[1]))
    return result, {**result.details(), "kernel_alone_s": measure.spacing(alone), "kernels_each": n}


def filling(probes: list[Probe], short: measure.Slicing) -> tuple[float, float, dict[str, Any]]:
    """The switch between contexts whose kernels fill the SMs (both probes on SM-filling kernels), and the slice a
    job with short kernels sees beside such a partner (probe A's short kernels, B's filling ones): (slice, switch,
    details). Where the filling kernels do not alternate, the short kernels' slice and switch stand (said)."""
    a, b = probes
    fill_s = measure.spacing(a.ask({"do": "spin", "kernels": 50, "fill": True}, FILL_S)["ends"])
    n = _count(FILL_S, fill_s)
    try:
        ends = [
            x["ends"]
            for x in together(probes, {"do": "spin", "kernels": n, "fill": True}, 2 * FILL_S)
        ]
        full = measure.slicing(measure.timeline(ends[0]), measure.timeline(ends[1]))
        a.send({"do": "spin", "kernels": _count(FILL_S, a.kernel_s)})
        b.send({"do": "spin", "kernels": n, "fill": True})
        mixed = a.answer(2 * FILL_S + ANSWER_MARGIN_S)["ends"]
        b.answer(2 * FILL_S + ANSWER_MARGIN_S)
        seen = measure.seen_slice(measure.timeline(mixed), full.switch_s)
    except CalibrationFailed as exc:
        return short.slice_s, short.switch_s, {"filling": f"not measured: {exc}"}
    return (
        seen,
        full.switch_s,
        {
            "fill_kernel_s": fill_s,
            "switch_short_s": short.switch_s,
            "slice_short_runs_s": short.slice_s,
            "filling": full.details(),
        },
    )


def util_scale(probe: Probe, source: Any) -> tuple[float, dict[str, Any]]:
    with UtilSampler(source) as sampler:
        duty = probe.ask({"do": "duty", "seconds": DUTY_S, "gap_s": probe.kernel_s}, DUTY_S)
    kappa, true, nvml = measure.util_scale(duty["busy_s"], duty["wall_s"], sampler.values)
    return kappa, {"kernel_busy": true, "nvml_util": nvml, "nvml_samples": len(sampler.values)}


def mps_fill(device: str, python: str) -> tuple[float, dict[str, Any]]:
    control = MpsControl(ShareMode(ShareKind.MPS))
    control.start(None)
    try:
        probes = start_probes(device, [control.client_env(0), control.client_env(1)], python)
        try:
            n = _count(FILL_S, probes[0].kernel_s)
            alone = [
                p.ask({"do": "spin", "kernels": n, "fill": True}, FILL_S)["ends"] for p in probes
            ]
            beside = [
                x["ends"]
                for x in together(probes, {"do": "spin", "kernels": n, "fill": True}, 2 * FILL_S)
            ]
        finally:
            for p in probes:
                p.stop()
    finally:
        control.stop()
    gamma, r = measure.sm_fill(alone, beside)
    return gamma, {"mps_r": r}


def calibrate(
    device: str,
    source: Any,
    info: dict[str, Any],
    mps: bool = True,
    say: Callable[[str], None] = lambda _: None,
) -> Calibration:
    """Measure the constants of the GPU ``source`` (an open NvmlSource) reads, with probes on ``device``."""
    python = (require_workload_python() if device.startswith("cuda") else choose()).path
    running = existing_daemon()
    if running is not None:
        raise CalibrationFailed(
            f"an MPS control daemon is running (pipe directory {running}): the probes would be "
            f"its clients, not time-sliced; stop it first (echo quit | {CONTROL})"
        )
    constants: dict[str, float] = {}
    details: dict[str, Any] = {}
    with ExitStack() as stack:
        say(f"starting two probes on {device}")
        probes = start_probes(device, [{}, {}], python)
        for probe in probes:
            stack.callback(probe.stop)
        say("time slicing: one probe alone, then both")
        slicing, details["time_slicing"] = time_slicing(probes)
        say("time slicing with kernels that fill the SMs, and a short-kernel job beside them")
        slice_s, switch_s, more = filling(probes, slicing)
        details["time_slicing"].update(more)
        constants.update(slice_s=slice_s, switch_s=switch_s)
        say("NVML utilisation against a probe's kernel time")
        constants["util_scale"], details["utilisation"] = util_scale(probes[0], source)
    if not mps:
        details["mps"] = "not measured: --no-mps"
    elif shutil.which(CONTROL) is None:
        details["mps"] = f"not measured: no {CONTROL} on PATH"
    else:
        say("MPS: two probes as clients of gpumon's own daemon")
        try:
            constants["sm_fill"], details["mps"] = mps_fill(device, python)
        except (
            UsageError,
            CalibrationFailed,
        ) as exc:  # the time-slicing constants stand without it
            details["mps"] = f"not measured: {exc}"
    return Calibration(
        gpu=str(info.get("name") or ""),
        constants=constants,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        driver=str(info.get("driver") or ""),
        gpumon=__version__,
        device=device,
        details=details,
    )
