"""Regenerate screenshots/ from the real app: a real H100 capture replayed, a CPU run, help, runs, a simulated GPU box.

Run: ``python scripts/make_screenshots.py`` (about two minutes; CPU only), or ``--h100-only`` for
the replay of the real H100 capture alone (seconds). The H100 views replay
``tests/data/h100/`` (resnet50 + vgg19 sharing one H100 80GB HBM3, recorded on 2026-11-23), with
each job's exclusive H100 capture as its baseline. Each workload of the CPU run is first
captured alone with ``gpumon run --headless`` and passed as ``--baseline``, so the interference
line shows real slowdowns, STP and the verdict. The "GPU box" view runs the
same app in a child process that loads the scripted fake libnvidia-ml (tests/fakenvml, needs a C
compiler); every other view is a real CPU run on this machine. SVGs come from
``App.export_screenshot``; the main view is also converted to PNG when cairosvg is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpumon.core.store.runstore import parse_baselines  # noqa: E402
from gpumon.frontends.plan import make_plan  # noqa: E402
from gpumon.core.capture.session import SessionConfig  # noqa: E402
from gpumon.tui.app import GpumonApp, LiveApp  # noqa: E402
from gpumon.tui.controller import Controller  # noqa: E402

OUT = ROOT / "screenshots"
WORKLOADS = ["fcn:preset=tiny", "gemm:preset=tiny"]
HISTORY_S = 20.0
BASELINE_S = 15
SHARED_BOX_S = 8.0
# Someone else's job, started outside gpumon: the fake NVML lists its real PID with 12 GiB and SM 30 %.
FOREIGN = "import time\nwhile True:\n    sum(range(20000))\n    time.sleep(0.02)\n"
FAKE_SCENARIO = """\
device name="NVIDIA A100-SXM4-40GB (simulated by fake NVML)" uuid=GPU-SIMULATED mem_total_mib=40960 gpu_util=35 mem_util=12 mem_used_mib=5200 power_w=120 temp_c=48 sm_clock_mhz=1410 pcie_rx_bps=2.5e9 pcie_tx_bps=2e8
at 4 gpu_util=62 mem_util=25 mem_used_mib=9800 power_w=210 temp_c=55 pcie_rx_bps=7.5e9
at 9 gpu_util=88 mem_util=31 mem_used_mib=15400 power_w=265 temp_c=61 pcie_rx_bps=11.8e9 pcie_tx_bps=4e8
at 14 gpu_util=93 mem_util=34 mem_used_mib=15600 power_w=281 temp_c=64 pcie_rx_bps=12.6e9
proc children_of=self mem_mib=2300 sm_util=44
"""
# Three more GPUs for the four-GPU shot: one idle, one running the foreign process, one half busy.
OTHER_GPUS = """\
device name="NVIDIA A100-SXM4-40GB (simulated by fake NVML)" uuid=GPU-SIMULATED-1 mem_total_mib=40960 gpu_util=0 mem_util=0 mem_used_mib=420 power_w=58 temp_c=31 sm_clock_mhz=210
device name="NVIDIA A100-SXM4-40GB (simulated by fake NVML)" uuid=GPU-SIMULATED-2 mem_total_mib=40960 gpu_util=100 mem_util=64 mem_used_mib=31800 power_w=372 temp_c=71 sm_clock_mhz=1410
{foreign}device name="NVIDIA A100-SXM4-40GB (simulated by fake NVML)" uuid=GPU-SIMULATED-3 mem_total_mib=40960 gpu_util=41 mem_util=15 mem_used_mib=9100 power_w=186 temp_c=53 sm_clock_mhz=1410
"""


async def wait_until(pilot, condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await pilot.pause(0.1)


def _running_for(app: GpumonApp, seconds: float) -> bool:
    view = app.monitor.latest if app.monitor is not None else None
    return view is not None and all(
        w.state == "running" and w.elapsed_s >= seconds for w in view.workloads
    )


def save(app: GpumonApp, name: str, title: str) -> Path:
    path = OUT / f"{name}.svg"
    path.write_text(app.export_screenshot(title=title), encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    return path


def capture_baselines(runs_dir: Path) -> list[str]:
    """Exclusive captures of each workload with the real CLI, as ``--baseline`` values (``A=RUN``)."""
    baselines = []
    for slot, spec in zip("AB", WORKLOADS):
        out = runs_dir / f"alone-{slot}"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gpumon",
                "run",
                spec,
                "--headless",
                "--device",
                "cpu",
                "--no-nvml",
                "--duration",
                str(BASELINE_S),
                "--out",
                str(out),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (run,) = out.iterdir()
        baselines.append(f"{slot}={run}")
    return baselines


async def shoot_h100() -> None:
    """The monitor replaying the real H100 capture, at 120x40 and 80x24."""
    from tests.tui.test_h100_replay import AT_T, BASELINES, H100, SHARED, h100_replay

    for (width, height), name in (((120, 40), "monitor-h100"), ((80, 24), "monitor-h100-80x24")):
        app = h100_replay(H100, AT_T)
        async with app.run_test(size=(width, height)) as pilot:
            await wait_until(
                pilot, lambda app=app: getattr(app.screen, "frames", 0) > 0, 30, "the first frame"
            )
            await pilot.pause(0.3)
            title = (
                "gpumon: replay of a real H100 capture, resnet50 + vgg19 sharing the GPU"
                if width == 120
                else "gpumon 80x24: real H100 capture replayed"
            )
            save(app, name, title)
            await pilot.press("q")
    print(f"  from tests/data/h100/{SHARED}, baselines {', '.join(BASELINES.values())}")


def live_app(runs_dir: Path, baselines: list[str] | None = None) -> GpumonApp:
    """The live monitor launching WORKLOADS on the CPU, NVML on (the fake, where the environment points at it)."""
    config = SessionConfig(device="cpu", runs_dir=runs_dir, nvml=True)
    plan = make_plan(
        WORKLOADS, [], session=config, label="fcn-gemm", duration_s=None, stagger_s=0.0
    )
    return LiveApp(
        Controller(dataclasses.replace(plan, baselines=parse_baselines(baselines or [], runs_dir)))
    )


async def shoot_live(
    runs_dir: Path, ready: Callable[[GpumonApp], bool], what: str, name: str, title: str
) -> None:
    """The live monitor on the fake GPU once the two jobs have history and ``ready(app)`` holds (``what``)."""
    app = live_app(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot, lambda: _running_for(app, SHARED_BOX_S), 180, "two workloads with history"
        )
        await wait_until(pilot, lambda: ready(app), 30, what)
        save(app, name, title)
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 60, "quit")


async def shoot_shared_box(runs_dir: Path) -> None:
    """A real process gpumon did not start, listed on the GPU beside the jobs."""
    await shoot_live(
        runs_dir,
        lambda app: app.monitor.latest.others_on_gpu > 0,
        "the other process in the table",
        "shared-box",
        "gpumon on a shared box: CPU box, fake NVML listing a real foreign process",
    )


async def shoot_four_gpus(runs_dir: Path) -> None:
    """A fake box of four GPUs, the jobs on GPU 0, a real foreign process on GPU 2."""
    await shoot_live(
        runs_dir,
        lambda app: len(app.monitor.latest.gpus) == 4,
        "four GPU lines",
        "four-gpus",
        "gpumon on a box of four GPUs: CPU box, fake NVML with 4 GPUs",
    )


async def shoot(runs_dir: Path, gpu_box: bool, baselines: list[str]) -> None:
    app = live_app(runs_dir, baselines)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot, lambda: _running_for(app, HISTORY_S), 180, "two workloads with history"
        )
        if gpu_box:
            save(app, "gpu-box-simulated", "gpumon: simulated GPU (fake NVML), CPU workloads")
        else:
            save(app, "monitor-cpu", "gpumon: two tiny CPU workloads")
            await pilot.resize_terminal(80, 24)
            await wait_until(pilot, lambda: app.monitor.size.width == 80, 10, "the resize")
            await pilot.pause(0.6)
            save(app, "monitor-cpu-80x24", "gpumon at 80x24: two tiny CPU workloads")
            await pilot.resize_terminal(120, 40)
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", 10, "help")
            await pilot.pause(0.3)
            save(app, "help", "gpumon help")
            await pilot.press("escape", "c")
            await wait_until(
                pilot, lambda: app.controller.capture_path is None, 30, "the capture to finish"
            )
            await pilot.press("r")
            await wait_until(pilot, lambda: getattr(app.screen, "summaries", None), 30, "the runs")
            await pilot.pause(0.3)
            save(app, "runs", "gpumon runs")
            await pilot.press("escape")
        await pilot.press("q")
        await wait_until(pilot, lambda: app.return_value is not None, 60, "quit")


def to_png(svg: Path) -> Path | None:
    """A PNG next to ``svg`` (cairosvg, a monospace font with block glyphs), or None without cairosvg."""
    try:
        import cairosvg
    except ImportError:
        print("cairosvg is not installed: PNG skipped (pip install cairosvg)")
        return None
    text = svg.read_text(encoding="utf-8").replace("Fira Code", "DejaVu Sans Mono")
    png = svg.with_suffix(".png")
    cairosvg.svg2png(bytestring=text.encode(), write_to=str(png), output_width=1400)
    print(f"wrote {png.relative_to(ROOT)}")
    return png


def gpu_box(
    runs_dir: Path, baselines: list[str], shared_box: bool = False, four_gpus: bool = False
) -> None:
    """Run the GPU-box shot in a child process that loads the fake libnvidia-ml.

    ``shared_box``: the shared-box shot instead, with a real foreign process the fake lists on the GPU;
    ``four_gpus``: the four-GPU shot, that process on GPU 2.
    """
    from tests.fakenvml import build as fake

    if fake.compiler() is None:
        print("no C compiler: the simulated GPU box screenshot is skipped")
        return
    work = Path(tempfile.mkdtemp(prefix="gpumon-fakenvml-"))
    lib = fake.build(work / "lib")
    foreign = subprocess.Popen([sys.executable, "-c", FOREIGN]) if shared_box or four_gpus else None
    try:
        extra = f"proc pid={foreign.pid} mem_mib=12288 sm_util=30\n" if foreign is not None else ""
        text = (
            FAKE_SCENARIO + OTHER_GPUS.format(foreign=extra) if four_gpus else FAKE_SCENARIO + extra
        )
        scenario = fake.write_scenario(work / "scenario.txt", text)
        env = fake.environment(lib, scenario)
        shot = "--four-gpus" if four_gpus else "--shared-box" if shared_box else "--gpu-box"
        argv = [
            sys.executable,
            __file__,
            shot,
            "--runs",
            str(runs_dir),
            *(f"--baseline={b}" for b in baselines),
        ]
        subprocess.run(argv, env=env, check=True)
    finally:
        if foreign is not None:
            foreign.kill()
            foreign.wait()


async def shoot_attach(runs_dir: Path, baselines: list[str]) -> None:
    """``gpumon attach --baseline A=RUN --baseline B=RUN`` on a real detached CPU run started without baselines: the
    runner in the background, the viewer following its files and comparing them with its own exclusive runs."""
    from gpumon.tui.app import ViewerApp
    from gpumon.tui.screens.attached import AttachedScreen, open_follow

    gpumon = [sys.executable, "-m", "gpumon"]
    started = subprocess.run(
        [
            *gpumon,
            "run",
            *WORKLOADS,
            "--device",
            "cpu",
            "--out",
            str(runs_dir),
            "--label",
            "detached",
            "--detach",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    run_dir = Path(json.loads(started.stdout)["run"])
    try:
        source, feed = open_follow(run_dir)
        screen = AttachedScreen(
            source, feed, baselines=tuple(tuple(b.split("=", 1)) for b in baselines)
        )
        app = ViewerApp(screen)
        async with app.run_test(size=(120, 40)) as pilot:

            def both_running() -> bool:
                view = screen.latest
                return view is not None and all(
                    w.state == "running" and w.elapsed_s >= 20 for w in view.workloads
                )

            await wait_until(pilot, both_running, 180, "both detached jobs running for 20 s")
            await pilot.pause(1.5)
            save(
                app,
                "attach",
                "gpumon attach --baseline A=RUN --baseline B=RUN: a detached CPU run (fcn + gemm, tiny)",
            )
    finally:
        subprocess.run([*gpumon, "stop", str(run_dir)], capture_output=True, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--h100-only", action="store_true", help="only the replay of the real H100 capture"
    )
    parser.add_argument(
        "--shared-box-only",
        action="store_true",
        help="only the shared-box view (fake NVML listing a real process started outside gpumon)",
    )
    parser.add_argument(
        "--four-gpus-only",
        action="store_true",
        help="only the four-GPU view (fake NVML with 4 GPUs: one line per GPU above the device panel)",
    )
    parser.add_argument(
        "--attach-only",
        action="store_true",
        help="only the attached viewer (gpumon attach on a real detached CPU run)",
    )
    parser.add_argument("--gpu-box", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--four-gpus", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--shared-box", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.gpu_box:
        asyncio.run(shoot(args.runs, gpu_box=True, baselines=args.baseline))
        return
    if args.shared_box:
        asyncio.run(shoot_shared_box(args.runs))
        return
    if args.four_gpus:
        asyncio.run(shoot_four_gpus(args.runs))
        return
    if args.attach_only:
        with tempfile.TemporaryDirectory(prefix="gpumon-screens-") as runs:
            asyncio.run(
                shoot_attach(Path(runs) / "attach", capture_baselines(Path(runs) / "baselines"))
            )
        return
    if args.four_gpus_only:
        with tempfile.TemporaryDirectory(prefix="gpumon-screens-") as runs:
            gpu_box(Path(runs) / "four", [], four_gpus=True)
        return
    if args.shared_box_only:
        with tempfile.TemporaryDirectory(prefix="gpumon-screens-") as runs:
            gpu_box(Path(runs) / "shared", [], shared_box=True)
        to_png(OUT / "shared-box.svg")
        return
    asyncio.run(shoot_h100())
    to_png(OUT / "monitor-h100.svg")
    if args.h100_only:
        return
    with tempfile.TemporaryDirectory(prefix="gpumon-screens-") as runs:
        baselines = capture_baselines(Path(runs) / "baselines")
        asyncio.run(shoot(Path(runs) / "cpu", gpu_box=False, baselines=baselines))
        gpu_box(Path(runs) / "gpu", baselines)
        gpu_box(Path(runs) / "shared", [], shared_box=True)
        gpu_box(Path(runs) / "four", [], four_gpus=True)
        asyncio.run(shoot_attach(Path(runs) / "attach", baselines))
    to_png(OUT / "monitor-cpu.svg")
    if (OUT / "gpu-box-simulated.svg").exists():
        to_png(OUT / "gpu-box-simulated.svg")


if __name__ == "__main__":
    main()
