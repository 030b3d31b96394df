"""A box with several GPUs: one overview line per GPU, g switches the device panel, --gpu picks the jobs' GPU.

The model tests feed GpuOverview records by hand; the live tests run the real ``gpumon run`` (argument parsing,
--gpu check, session, sampler, TUI driven by Pilot) in a child process that loads the fake libnvidia-ml with four
GPUs (pynvml loads the library by name, so it must be a new process), and read the capture it leaves.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpumon.core.records.machine import GpuInfo
from gpumon.core.records.model import DeviceSample, GpuOverview, GpuSummary, SourceStatus
from gpumon.core.store.trace import load_run
from gpumon.tui.model import OTHERS_STALE_S, LiveModel
from gpumon.tui.widgets.gpus import render_lines
from tests.fakenvml import build as fake
from tests.helpers import only_run
from tests.tui.conftest import probe_command

ROOT = Path(__file__).resolve().parents[2]
needs_cc = pytest.mark.skipif(
    fake.compiler() is None, reason="no C compiler to build the fake libnvidia-ml"
)


# -- the model: overview lines and the device panel of another GPU --------------------------------------------------


def _summary(index: int, t: float, jobs: int, power: float, processes: int = 0) -> GpuSummary:
    sample = DeviceSample(
        t, gpu_util=10.0 * index, mem_used_mib=1000.0 * index, mem_total_mib=8192.0, power_w=power
    )
    return GpuSummary(
        index, f"Fake GPU {index}", f"GPU-{index}", sample, processes, jobs=index == jobs
    )


def _model(jobs: int = 1, until: float = 5.0) -> LiveModel:
    """A model fed as a 4-GPU box's sampler feeds it: device samples of the jobs' GPU, an overview every 0.5 s."""
    model = LiveModel()
    model.handle(SourceStatus("nvml", True, ""))
    model.gpu = GpuInfo(index=jobs, name=f"Fake GPU {jobs}")
    for i in range(int(until * 2) + 1):
        t = i / 2
        model.handle(
            DeviceSample(t, gpu_util=55.0, mem_used_mib=4000.0, mem_total_mib=8192.0, power_w=111.0)
        )
        model.handle(GpuOverview(t, tuple(_summary(k, t, jobs, 100.0 + k, k) for k in range(4))))
    return model


def test_one_line_per_gpu_and_the_jobs_gpu_in_the_panel():
    view = _model(jobs=1).view(5.0)
    assert [g.index for g in view.gpus] == [0, 1, 2, 3] and view.shown_gpu == 1
    assert (
        view.device.name == "GPU 1 · Fake GPU 1 · the jobs' GPU"
        and view.device.sample.power_w == 111.0
    )
    lines = render_lines(view.gpus, view.shown_gpu, 100).plain.split("\n")
    assert len(lines) == 4 and lines[1].startswith("▸ 1 Fake GPU 1") and lines[1].endswith("jobs")
    assert (
        "util 20%" in lines[2]
        and "102 W" in lines[2]
        and "2 procs" in lines[2]
        and not lines[2].startswith("▸")
    )


def test_the_jobs_line_shows_the_newest_device_sample_like_the_panel():
    model = _model(jobs=1)
    model.handle(
        DeviceSample(5.3, gpu_util=99.0, mem_total_mib=8192.0, power_w=222.0)
    )  # after the last overview
    view = model.view(5.3)
    jobs = next(g for g in view.gpus if g.jobs)
    assert jobs.sample is view.device.sample and jobs.sample.power_w == 222.0


def test_next_gpu_shows_another_gpus_readings_and_wraps():
    model = _model(jobs=1)
    assert model.next_gpu() == 2
    view = model.view(5.0)
    assert view.shown_gpu == 2 and view.device.name == "GPU 2 · Fake GPU 2 · not the jobs' GPU"
    assert view.device.sample.power_w == 102.0 and math.isnan(view.device.sample.pcie_rx_bps)
    assert (
        view.device.graphs["power_w"].values[-6:] == (102.0,) * 6
    )  # its history since the overview began
    assert "pcie_rx_bps" not in view.device.graphs and view.device.note.startswith("2 processes")
    assert view.processes == ()  # the table lists the jobs' GPU: not under another GPU's panel
    assert [model.next_gpu() for _ in range(3)] == [3, 0, 1]
    assert model.view(5.0).device.name.endswith("the jobs' GPU")


def test_no_overview_with_one_gpu_or_when_it_is_stale():
    model = LiveModel()
    model.handle(SourceStatus("nvml", True, ""))
    model.handle(DeviceSample(1.0, gpu_util=50.0))
    view = model.view(1.0)
    assert view.gpus == () and view.shown_gpu is None and model.next_gpu() is None
    assert view.device.name == "GPU"  # the one-GPU title is unchanged
    stale = _model(until=2.0)
    assert (
        stale.view(2.0 + OTHERS_STALE_S + 0.5).gpus == ()
    )  # NVML stopped answering: no lines, the jobs' panel


def test_a_lost_gpu_is_said_on_its_line_and_its_panel():
    model = _model(jobs=0)
    lost = GpuSummary(3, "Fake GPU 3", "GPU-3", None, None)
    model.handle(GpuOverview(5.5, (*model.overview.gpus[:3], lost)))
    view = model.view(5.5)
    assert (
        render_lines(view.gpus, view.shown_gpu, 100).plain.split("\n")[3].endswith("? procs  lost")
    )
    model.shown_gpu = 3
    assert model.view(5.5).device.note == "lost: NVML no longer answers for this GPU"


@pytest.mark.parametrize("gpus", [4, 1])
def test_help_and_footer_offer_g_only_with_several_gpus(tmp_path, gpus):
    """The replay of a GPU run, with (4) or without (1) the overview records a 4-GPU box's sampler publishes."""
    from textual.widgets import Footer

    from gpumon.tui.app import ViewerApp
    from gpumon.tui.screens.help import GPU_MEANINGS, HelpScreen
    from gpumon.tui.screens.replay import ReplayScreen, open_replay
    from tests.tracegen import staggered_pair
    from tests.tui.conftest import feed_four_gpus, run_async
    from tests.helpers import wait_until

    source, feed = open_replay(staggered_pair(tmp_path / "run", gpu=True))
    source.seek(30.0)
    if gpus > 1:
        feed_four_gpus(feed.model, 30.0)
    app = ViewerApp(ReplayScreen(source, feed, play=False))

    @run_async
    async def check() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.screen.frames > 0, what="the first frame")
            await pilot.pause(0.1)
            footer = app.screen.query_one(Footer)
            actions = lambda: {key.action for key in footer.query("FooterKey")}  # noqa: E731
            await wait_until(
                pilot,
                lambda: "toggle_output" in actions() and ("next_gpu" in actions()) == (gpus > 1),
                what="the footer",
            )
            for _ in range(
                2
            ):  # and it stays so: two more frames drawn, then the footer checked again
                frames = app.screen.frames
                app.screen.pump.poke()
                await wait_until(
                    pilot, lambda before=frames: app.screen.frames > before, what="another frame"
                )
            await pilot.pause()
            actions = actions()
            assert "toggle_output" in actions and ("next_gpu" in actions) == (gpus > 1), actions
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            keys = dict(app.screen.keys)
            assert ("g" in keys) == (gpus > 1) and (app.screen.extra == GPU_MEANINGS) == (gpus > 1)

    check()


# -- live: gpumon run on a fake box with four GPUs -------------------------------------------------------------------

# GPU k draws 101·(k+1) W and lists k processes of someone else; the job runs on the GPU --gpu names.
POWER = {0: 101, 1: 202, 2: 303, 3: 404}

CHILD = r"""
import asyncio, json, os, sys
import gpumon.cli as cli
import gpumon.commands.run as run_command
from gpumon.tui.app import GpumonApp, LiveApp
from gpumon.tui.controller import Controller
from gpumon.tui.widgets.gpus import GpuLines
from tests.helpers import wait_until

GPUS = int(os.environ["EXPECT_GPUS"])


def state(app):
    m = app.monitor
    lines = m.query_one(GpuLines)
    return {
        "lines": lines.lines if lines.display else [],
        "title": str(m.query_one("#device").border_title),
        "power": m.query_one("#gpu-metrics").value("power_w"),
        "table": bool(m.query_one("#processes").display),
        "g_offered": any(b.binding.action == "next_gpu" for b in m.active_bindings.values()),
    }


async def drive(plan):
    app = LiveApp(Controller(plan))
    seen = []
    async with app.run_test(size=(120, 40)) as pilot:
        m = lambda: app.monitor
        # A's row with the GPU memory NVML lists for it: the overview of that process tick counts it too
        table_rows = lambda: m().latest is not None and any(r.mark == "A" and r.gpu_mem_mib == 321
                                                             for r in m().latest.processes)
        await wait_until(pilot, lambda: table_rows() and m().query_one("#device").border_title, 90, "A in the table")
        if GPUS > 1:
            await wait_until(pilot, lambda: len(state(app)["lines"]) == GPUS, 30, "the overview lines")
            for _ in range(GPUS):
                before = state(app)
                seen.append(before)
                await pilot.press("g")
                await wait_until(pilot, lambda: state(app)["title"] != before["title"], 30, "the panel to switch")
        frames = m().frames
        await wait_until(pilot, lambda: m().frames > frames + 1 and table_rows(), 30, "two more frames")
        seen.append(state(app))
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 60, "the app to quit")
    return seen


def run_tui(plan):
    print("RESULT " + json.dumps(asyncio.run(drive(plan))), flush=True)
    return 0


run_command.run_tui = run_tui
run_command.output_not_terminal = lambda: None
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if fake.compiler() is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml")
    return fake.build(tmp_path_factory.mktemp("fakenvml"))


@pytest.fixture(scope="module")
def someone_else() -> list[subprocess.Popen]:
    """Real processes gpumon did not start, which the fake lists on GPUs 1-3."""
    procs = [subprocess.Popen(["sleep", "300"]) for _ in range(6)]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def box(jobs: int, others: list[subprocess.Popen], gpus: int = 4) -> str:
    """A box of ``gpus`` fake H100s; the job (a child of gpumon) on GPU ``jobs``; GPU k lists k foreign processes."""
    lines, taken = ["driver 550.54.15"], 0
    for k in range(gpus):
        lines.append(
            f'device name="NVIDIA Fake H100 80GB HBM3" uuid=GPU-multi-{k} mem_total_mib=81559 '
            f"gpu_util={10 * k} mem_used_mib={1000 * (k + 1)} power_w={POWER[k]} temp_c={40 + k}"
        )
        if k == jobs:
            lines.append("proc children_of=self mem_mib=321 sm_util=40")
        for p in others[taken : taken + k]:
            lines.append(f"proc pid={p.pid} mem_mib=2048 sm_util=20")
        taken += k
    return "\n".join(lines)


def run_monitor(
    tmp_path: Path, lib: Path, scenario: str, gpus: int, *args: str
) -> tuple[list[dict], Path]:
    env = fake.environment(lib, fake.write_scenario(tmp_path / "scenario.txt", scenario))
    env.update(
        EXPECT_GPUS=str(gpus), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    )
    runs = tmp_path / "runs"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            "run",
            "--cmd",
            probe_command(),
            "--device",
            "cpu",
            "--out",
            str(runs),
            *args,
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (
        f"child failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    return json.loads(results[-1]), only_run(runs)


@needs_cc
@pytest.mark.parametrize(("gpu", "jobs"), [("2", 2), ("GPU-multi-1", 1)], ids=["index", "uuid"])
def test_four_gpus_four_lines_g_switches_and_gpu_picks_the_jobs_gpu(
    tmp_path, fake_lib, someone_else, gpu, jobs
):
    seen, run = run_monitor(tmp_path, fake_lib, box(jobs, someone_else), 4, "--gpu", gpu)
    first = seen[0]
    assert len(first["lines"]) == 4 and first["g_offered"]
    for k, line in enumerate(first["lines"]):
        assert f" {k} NVIDIA Fake H100 80GB HBM3" in line and f"{POWER[k]} W" in line, line
        assert line.startswith("▸") == (k == jobs) and line.endswith("jobs") == (k == jobs), line
        procs = k + (k == jobs)  # k of someone else's, and the job on its GPU
        assert f"{procs} proc{'s' if procs != 1 else ''}" in line, line
    # the detail starts on the GPU --gpu named; g steps through the others and back, the table only under the jobs'
    order = [(jobs + i) % 4 for i in range(5)]
    for index, state in zip(order, seen):
        mine = index == jobs
        whose = "the jobs' GPU" if mine else "not the jobs' GPU"
        assert state["title"] == f"GPU {index} · NVIDIA Fake H100 80GB HBM3 · {whose}"
        assert state["power"] == f"{POWER[index]} W" and state["table"] == mine, state
    # the capture recorded the jobs' GPU all along, whatever the panel showed
    meta = json.loads((run / "run.json").read_text())
    assert meta["gpu"]["index"] == jobs and meta["gpu"]["uuid"] == f"GPU-multi-{jobs}"
    device = load_run(run).device()
    assert (
        len(device) >= 10
        and (device["power_w"] == POWER[jobs]).all()
        and (device["temp_c"] == 40 + jobs).all()
    )
    processes = load_run(run).processes()
    assert (processes[processes.process == "A"]["gpu_mem_mib"] == 321).all()


@needs_cc
def test_one_gpu_shows_no_overview_line_and_offers_no_g(tmp_path, fake_lib, someone_else):
    (state,), run = run_monitor(tmp_path, fake_lib, box(0, someone_else, gpus=1), 1)
    assert state["lines"] == [] and not state["g_offered"] and state["table"]
    assert state["title"] == "NVIDIA Fake H100 80GB HBM3" and state["power"] == "101 W"
    assert (load_run(run).device()["power_w"] == 101).all()
