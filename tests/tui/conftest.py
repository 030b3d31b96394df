"""Helpers for the app tests: tiny probe children, plans, and bounded waits on the UI."""

from __future__ import annotations

import asyncio
import functools
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Awaitable, Callable

import pytest

from gpumon.core.jobs.launcher import LaunchRequest
from gpumon.tui.widgets.graph import column_codes
from gpumon.frontends.plan import RunPlan, make_plan
from gpumon.core.capture.session import SessionConfig


def run_async(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test body in its own event loop (no asyncio pytest plugin needed)."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper


def probe_command(steps: int = 0, exit_code: int = 0, step_s: float = 0.01) -> str:
    """A Python child that reports a step every ``step_s`` through the probe (forever when ``steps`` is 0)."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from gpumon import probe
        print("child up", flush=True)
        n = 0
        while True:
            time.sleep({step_s})
            probe.step(samples=8)
            n += 1
            if {steps} and n >= {steps}:
                print("child done after", n, "steps", flush=True)
                sys.exit({exit_code})
        """
    )
    return shlex.join([sys.executable, "-c", script])


def probe_request(steps: int = 0, exit_code: int = 0) -> LaunchRequest:
    return LaunchRequest.command(probe_command(steps, exit_code))


def make_test_plan(runs_dir: Path, commands: list[str] = (), **kwargs) -> RunPlan:
    config = SessionConfig(device="cpu", interval_ms=100, runs_dir=runs_dir, nvml=False)
    return make_plan(
        [],
        list(commands),
        session=config,
        label=kwargs.pop("label", None),
        duration_s=None,
        stagger_s=0.0,
        **kwargs,
    )


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path


# A box with four GPUs: the jobs' GPU 0 (from the replayed device samples) and three others as the sampler
# reads them every 0.5 s (util, memory, power, temperature, clock, process count; no PCIe or GPM).
OTHER_GPUS = (
    (
        1,
        dict(
            gpu_util=0.0,
            mem_util=0.0,
            mem_used_mib=512.0,
            power_w=62.0,
            temp_c=31.0,
            sm_clock_mhz=210.0,
        ),
        0,
    ),
    (
        2,
        dict(
            gpu_util=100.0,
            mem_util=71.0,
            mem_used_mib=38_000.0,
            power_w=385.0,
            temp_c=74.0,
            sm_clock_mhz=1410.0,
        ),
        2,
    ),
    (
        3,
        dict(
            gpu_util=35.0,
            mem_util=12.0,
            mem_used_mib=12_300.0,
            power_w=171.0,
            temp_c=52.0,
            sm_clock_mhz=1410.0,
        ),
        1,
    ),
)


def feed_four_gpus(model, until: float, jobs_processes: int = 2) -> None:
    """Publish to ``model`` the GpuOverview records a 4-GPU box's sampler makes every 0.5 s up to ``until``."""
    from gpumon.core.records.model import DeviceSample, GpuOverview, GpuSummary

    name = model.gpu.name if model.gpu is not None else None
    uuid = model.gpu.uuid if model.gpu is not None else None
    for i in range(int(until * 2) + 1):
        t = i / 2
        jobs = GpuSummary(0, name, uuid, model.device, jobs_processes, jobs=True)
        others = tuple(
            GpuSummary(
                index,
                name,
                f"GPU-{index:08d}-0000-0000-0000-000000000000",
                DeviceSample(t, mem_total_mib=40960.0, **figures),
                processes,
            )
            for index, figures, processes in OTHER_GPUS
        )
        model.handle(GpuOverview(t, (jobs, *others)))


def screen_text(app) -> list[str]:
    """The screen as the terminal shows it, one string per row (what a snapshot draws, as plain text)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text().splitlines()[:height]


def graph_level(value: float, top: float, rows: int) -> int:
    """One value's level in a graph (eighths of a cell filled; -1: no data), as ``graph_rows`` draws it."""
    return ord(column_codes((value,), top, 1, rows)) - 1
