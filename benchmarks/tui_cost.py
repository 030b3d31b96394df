"""What the live monitor costs: its CPU, its effect on a CPU workload, time to first frame, step-to-screen latency.

Run: ``python benchmarks/tui_cost.py`` (needs tmux; about three minutes). Figures are printed, not asserted.

- first frame: ``gpumon`` started in a real terminal (a tmux pane, 120x40) until the monitor is on screen.
- monitor CPU: user+system CPU of the gpumon process alone (children excluded) while two tiny CPU workloads
  run, as % of one core, for the TUI and for ``--headless`` (the same session without the app).
- rate ratio: post-warm-up iterations/s of ``fcn`` on the CPU watched by the TUI ÷ the same under ``--headless``.
- step-to-screen: for every frame that shows a newer step of a workload, the run time when the frame was drawn
  minus the end of that step (in-process with ``App.run_test``; includes the probe's 100 ms batching and the
  refresh period).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from gpumon.core.store.trace import list_runs, summarize

TMUX = shutil.which("tmux") or "/usr/bin/tmux"
SOCKET = f"gpumon-bench-{os.getpid()}"
GPUMON = [sys.executable, "-m", "gpumon"]


def tmux(*args: str) -> str:
    return subprocess.run(
        [TMUX, "-L", SOCKET, *args], capture_output=True, text=True, check=False
    ).stdout


def start_in_tmux(name: str, argv: list[str], env: dict[str, str]) -> int:
    """Start ``argv`` in a new 120x40 tmux session; returns the pane's process id."""
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    command = f"env {exports} " + " ".join(subprocess.list2cmdline([a]) for a in argv)
    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", command)
    return int(tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip())


def screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


def wait_for_screen(name: str, needle: str, timeout: float = 30.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if needle in screen(name):
            return time.monotonic() - started
        time.sleep(0.01)
    raise TimeoutError(f"{needle!r} never appeared on the screen of {name}")


def wait_gone(pid: int, timeout: float = 30.0) -> None:
    try:
        psutil.Process(pid).wait(timeout)
    except psutil.NoSuchProcess:
        pass


def first_frame(trials: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as runs:
        for i in range(trials):
            name = f"first{i}"
            started = time.monotonic()
            pid = start_in_tmux(name, GPUMON, {"GPUMON_RUNS": runs})
            wait_for_screen(name, "Launch")
            wait_for_screen(name, "empty: press a")
            times.append(time.monotonic() - started)
            tmux("send-keys", "-t", name, "q")
            wait_gone(pid)
            tmux("kill-session", "-t", name)
    return times


def monitor_cpu(argv_tail: list[str], headless: bool, settle_s: float, measure_s: float) -> float:
    """CPU of the monitor process alone, % of one core, while ``argv_tail`` runs."""
    with tempfile.TemporaryDirectory() as runs:
        argv = [
            *GPUMON,
            "run",
            *argv_tail,
            "--out",
            runs,
            "--duration",
            str(settle_s + measure_s + 5),
        ]
        if headless:
            argv.append("--headless")
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            pid = proc.pid
        else:
            pid = start_in_tmux("cpu", argv, {})
        monitor = psutil.Process(pid)
        if not headless:
            family = [monitor, *monitor.children(recursive=True)]
            monitor = next(
                p
                for p in family
                if p.name().startswith("python") and "gpumon.workloads" not in p.cmdline()
            )
        time.sleep(settle_s)
        before = monitor.cpu_times()
        t0 = time.monotonic()
        time.sleep(measure_s)
        after = monitor.cpu_times()
        elapsed = time.monotonic() - t0
        wait_gone(pid, settle_s + measure_s + 60)
        if not headless:
            tmux("kill-session", "-t", "cpu")
        return 100 * ((after.user - before.user) + (after.system - before.system)) / elapsed


def watched_rate(workload: str, headless: bool, duration_s: float) -> float:
    """Post-warm-up iterations/s of one CPU workload under the TUI or under --headless."""
    with tempfile.TemporaryDirectory() as runs:
        argv = [
            *GPUMON,
            "run",
            workload,
            "--device",
            "cpu",
            "--no-nvml",
            "--out",
            runs,
            "--duration",
            str(duration_s),
        ]
        if headless:
            subprocess.run(
                [*argv, "--headless"], capture_output=True, check=True, timeout=duration_s + 120
            )
        else:
            pid = start_in_tmux("rate", argv, {})
            wait_gone(pid, duration_s + 120)
            tmux("kill-session", "-t", "rate")
        (run,) = list_runs(Path(runs))
        return summarize(run).rates["A"]


async def step_latency(seconds: float) -> tuple[list[float], int]:
    from gpumon.frontends.plan import make_plan
    from gpumon.core.capture.session import SessionConfig
    from gpumon.tui.app import LiveApp
    from gpumon.tui.controller import Controller
    from gpumon.tui.screens.monitor import MonitorScreen

    latencies: list[float] = []
    shown: dict[str, float] = {}
    draw = MonitorScreen.draw

    def timed_draw(self, view):
        draw(self, view)
        now = self.feed.now()
        for w in view.workloads:
            if w.active and w.last_step_t == w.last_step_t and w.last_step_t != shown.get(w.slot):
                shown[w.slot] = w.last_step_t
                latencies.append(now - w.last_step_t)

    MonitorScreen.draw = timed_draw
    with tempfile.TemporaryDirectory() as runs:
        config = SessionConfig(device="cpu", runs_dir=Path(runs), nvml=False)
        plan = make_plan(
            ["fcn:preset=tiny", "gemm:preset=tiny"],
            [],
            session=config,
            label=None,
            duration_s=None,
            stagger_s=0.0,
        )
        app = LiveApp(Controller(plan))
        async with app.run_test(size=(120, 40)) as pilot:
            deadline = time.monotonic() + 120
            while len(latencies) < 5 and time.monotonic() < deadline:
                await pilot.pause(0.2)
            latencies.clear()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await pilot.pause(0.2)
            frames = app.monitor.frames
            await pilot.press("q")
            while app.return_value is None and time.monotonic() < end + 30:
                await pilot.pause(0.1)
    MonitorScreen.draw = draw
    return latencies, frames


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="shorter runs (noisier)")
    args = parser.parse_args()
    measure = 10.0 if args.quick else 20.0
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")

    frames = first_frame(3)
    print(
        f"time to first frame (gpumon in tmux 120x40): median {statistics.median(frames):.2f} s, all {[round(f, 2) for f in frames]}"
    )

    pair = ["fcn", "gemm", "--device", "cpu", "--no-nvml"]
    tui_cpu = monitor_cpu(pair, headless=False, settle_s=10, measure_s=measure)
    headless_cpu = monitor_cpu(pair, headless=True, settle_s=10, measure_s=measure)
    print(
        f"monitor CPU, two CPU workloads, default settings: TUI {tui_cpu:.1f} % of one core, headless {headless_cpu:.1f} %"
    )

    duration = 20.0 if args.quick else 30.0
    headless_rate = watched_rate("fcn", headless=True, duration_s=duration)
    tui_rate = watched_rate("fcn", headless=False, duration_s=duration)
    print(
        f"fcn on the CPU: {tui_rate:.1f} it/s watched by the TUI, {headless_rate:.1f} it/s headless, ratio {tui_rate / headless_rate:.3f}"
    )

    latencies, drawn = asyncio.run(step_latency(measure))
    if latencies:
        q = statistics.quantiles(latencies, n=20)
        print(
            f"step-to-screen latency over {len(latencies)} frames ({drawn} drawn): median {statistics.median(latencies) * 1000:.0f} ms, "
            f"p95 {q[-1] * 1000:.0f} ms"
        )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    try:
        main()
    finally:
        tmux("kill-server")
