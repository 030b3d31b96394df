"""The live app with real child processes, driven by Pilot (CPU only, tiny probe children)."""

from __future__ import annotations


import psutil

from gpumon.core.store.trace import load_run
from gpumon.tui.app import GpumonApp, LiveApp
from gpumon.tui.controller import Controller
from gpumon.tui.screens.launch import LaunchScreen
from gpumon.tui.screens.stack import StackScreen
from gpumon.tui.widgets.lines import TextLine
from gpumon.tui.widgets.workload import WorkloadPanel
from tests.tui.conftest import make_test_plan, probe_command, run_async, screen_text
from tests.helpers import wait_until


def _steps_shown(app: GpumonApp, slot: str) -> int:
    panel = app.monitor.query_one(f"#panel-{slot}", WorkloadPanel)
    lines = [line for line in map(panel.details.line, range(4)) if line.startswith("steps")]
    return int(lines[0].split()[1].replace(",", "")) if lines else 0


def _state(app: GpumonApp, slot: str) -> str:
    return str(app.monitor.query_one(f"#panel-{slot}", WorkloadPanel).border_subtitle)


async def _quit(pilot, app: GpumonApp) -> None:
    await pilot.press("q")
    await wait_until(
        pilot,
        lambda: app.controller._shut_down and app.return_value is not None,
        30,
        "the app to quit",
    )


@run_async
async def test_launch_from_the_dialog_and_quit_leaves_no_child(runs_dir):
    app = LiveApp(Controller(make_test_plan(runs_dir)))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.session_ready, what="the session")
        assert app.controller.capture_path is None, (
            "gpumon with no workloads does not capture by itself"
        )
        await pilot.press("a")
        await wait_until(
            pilot, lambda: isinstance(app.screen, LaunchScreen), what="the launch dialog"
        )
        await pilot.press("end", "enter")
        command = app.screen.query_one("#launch-command")
        assert app.focused is command
        command.value = probe_command()
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.controller.running("A"), what="A to start")
        await wait_until(
            pilot,
            lambda: _state(app, "A") == "running" and _steps_shown(app, "A") > 20,
            what="A's steps on screen",
        )
        assert app.monitor.query_one("#panel-B", WorkloadPanel).has_class("-empty")

        await pilot.press("b")
        await wait_until(
            pilot, lambda: isinstance(app.screen, LaunchScreen), what="the launch dialog"
        )
        await pilot.press("down", "down", "down", "down", "down", "enter")
        app.screen.query_one("#launch-options").value = "preset=tiny,steps=100000"
        app.screen.query_one("#launch-device").value = "cpu"
        await pilot.press("enter")
        workload = await wait_until(pilot, lambda: app.controller.running("B"), what="B to start")
        assert workload.request.spec == "gemm:preset=tiny,steps=100000"
        assert workload.request.argv[1:6] == ("-m", "gpumon.workloads", "gemm", "--device", "cpu")
        pids = [w.pid for w in app.controller.session.launcher.snapshot().values()]
        await _quit(pilot, app)
    assert len(pids) == 2 and not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in pids
    )
    assert app.return_value == 0


@run_async
async def test_capture_on_and_off_writes_a_run_and_exports_csv(runs_dir, tmp_path):
    export_root = tmp_path / "exports"
    export_root.mkdir()
    app = LiveApp(
        Controller(
            make_test_plan(runs_dir, [probe_command()], label="probe"), export_root=export_root
        )
    )
    async with app.run_test(size=(80, 24)) as pilot:
        path = await wait_until(
            pilot, lambda: app.controller.capture_path, what="the capture `gpumon run` starts"
        )
        await wait_until(
            pilot, lambda: "● REC" in app.monitor.query_one("#status", TextLine).plain, what="● REC"
        )
        await wait_until(pilot, lambda: _steps_shown(app, "A") > 10, what="steps")
        await pilot.press("c")
        await wait_until(
            pilot, lambda: app.controller.capture_path is None, what="the capture to stop"
        )
        assert app.controller.last_capture == path
        assert "○ not capturing" in (
            await wait_until(
                pilot,
                lambda: (
                    "not capturing" in app.monitor.query_one("#status", TextLine).plain
                    and app.monitor.query_one("#status", TextLine).plain
                ),
            )
        )
        run = load_run(path)
        assert run.meta.status == "complete" and run.label == "probe"
        assert sum(1 for _ in run.rows("steps")) > 10

        await pilot.press("c")
        second = await wait_until(
            pilot, lambda: app.controller.capture_path, what="a second capture"
        )
        assert second != path
        await wait_until(pilot, lambda: _steps_shown(app, "A") > 40, what="more steps")
        await pilot.press("e")
        out = export_root / f"{second.name}-csv"
        await wait_until(pilot, lambda: (out / "steps.csv").exists(), what="the CSV export")
        await _quit(pilot, app)
    assert load_run(second).meta.status == "complete"
    assert sum(1 for _ in load_run(second).rows("steps")) > 0
    assert sorted(p.name for p in out.iterdir()) == [
        "device.csv",
        "gpu_others.csv",
        "host.csv",
        "processes.csv",
        "run.json",
        "steps.csv",
    ]


@run_async
async def test_a_crashing_child_shows_exited_n_while_the_other_keeps_updating(runs_dir):
    plan = make_test_plan(runs_dir, [probe_command(steps=30, exit_code=3), probe_command()])
    app = LiveApp(Controller(plan))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: _state(app, "A") == "exited 3", what="A to show exited 3")
        panel = app.monitor.query_one("#panel-A", WorkloadPanel)
        assert panel.has_class("-failed")
        assert any(
            "child done after 30 steps" in line for line in app.monitor.latest.workload("A").log
        )
        before = _steps_shown(app, "B")
        await wait_until(
            pilot, lambda: _steps_shown(app, "B") > before + 20, what="B to keep updating"
        )
        assert _state(app, "B") == "running"
        await _quit(pilot, app)
    assert app.return_value == 1, "a workload that failed on its own makes the exit status 1"


@run_async
async def test_stack_dump_shows_the_stack_or_a_readable_error(runs_dir):
    app = LiveApp(Controller(make_test_plan(runs_dir, [probe_command()])))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: _state(app, "A") == "running", what="A to run")
        await pilot.press("s")
        screen = await wait_until(
            pilot,
            lambda: isinstance(app.screen, StackScreen) and app.screen,
            what="the stack dialog",
        )
        dump = await wait_until(pilot, lambda: screen.dump, 30, "py-spy")
        if dump.ok:
            assert "Thread" in dump.text and "<module>" in dump.text
        else:
            assert "permission" in dump.text or "py-spy" in dump.text
        await pilot.press("escape")
        await pilot.press("S")
        await wait_until(
            pilot,
            lambda: any("nothing runs in slot B" in n.message for n in app._notifications),
            what="a notice",
        )
        await _quit(pilot, app)


@run_async
async def test_a_stagger_that_a_slow_start_outlasts_is_said_not_asked_for(runs_dir):
    """Issue 43: with --stagger given, two jobs that took no step alone (their start outlasted it) were told to
    "use --stagger S"; the line says what happened instead."""
    from gpumon.frontends.plan import make_plan
    from gpumon.core.capture.session import SessionConfig

    config = SessionConfig(device="cpu", interval_ms=100, runs_dir=runs_dir, nvml=False)
    plan = make_plan(
        [], ["sleep 60", "sleep 60"], session=config, label=None, duration_s=None, stagger_s=0.5
    )
    app = LiveApp(Controller(plan))
    async with app.run_test(size=(120, 40)) as pilot:
        said = "no exclusive rates: A took too few steps alone in --stagger 0.5 s"
        await wait_until(
            pilot, lambda: said in "\n".join(screen_text(app)), 60, "the line saying why"
        )
        assert "use --baseline A=RUN or --stagger S" not in "\n".join(screen_text(app))
        await _quit(pilot, app)
