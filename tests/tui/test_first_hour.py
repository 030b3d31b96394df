"""Snapshots of what a newcomer meets in the monitor (issue 34), at 80x24 and 120x40, fed by replays of generated runs:
the launch dialog with its buttons and its own keys, a job that takes no step the probe sees, a replay without
exclusive rates, the compare screen's tables; and the live monitor's footer, notices and key hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumon.core.capture.nosteps import no_steps_text, withdrawn_text
from gpumon.core.records.model import NO_STEPS, NO_STEPS_WITHDRAWN, Notice, WorkloadMeta
from gpumon.tui.app import LiveApp, ViewerApp
from gpumon.tui.controller import Controller
from gpumon.tui.screens.compare import CompareScreen
from gpumon.tui.screens.launch import LaunchScreen
from gpumon.tui.screens.monitor import NOTICE_S
from tests.tracegen import Job, beside_pair, exclusive, paced_job, staggered_pair, write_run
from tests.tui.conftest import make_test_plan, run_async, screen_text
from tests.helpers import wait_until
from tests.tui.test_snapshots import SIZES, _first_frame, _replay

FCN, GEMM = "fcn:preset=tiny", "gemm:preset=tiny"


def no_steps_app(root: Path) -> ViewerApp:
    """A command with a manual SGD loop (no step for the auto-probe) beside a job that steps, and the notice."""
    a = Job("A", "cmd:python train_sgd.py", phases=(), stop=30.0, cpu=40.0)
    b = paced_job("B", GEMM, 0.0, 30.0, alone=25.0, shared=25.0, shared_from=0.0)
    app = _replay(write_run(root, (a, b), label="cmd-gemm", interval_s=0.5), 20.0)
    app.first_screen.feed.model.handle(Notice(7.5, no_steps_text(5.0), "A", kind=NO_STEPS))
    return app


def together_app(root: Path) -> ViewerApp:
    """Two jobs started together: the replay has no exclusive phase to measure a slowdown against."""
    jobs = (
        paced_job("A", FCN, 0.0, 30.0, alone=30.0, shared=30.0, shared_from=0.0),
        paced_job("B", GEMM, 0.0, 30.0, alone=20.0, shared=20.0, shared_from=0.0),
    )
    return _replay(write_run(root, jobs, label="fcn-gemm", interval_s=0.5), 20.0)


async def open_launch(pilot) -> None:
    await _first_frame(pilot)
    await pilot.app.push_screen(LaunchScreen("A", "cpu"))
    await wait_until(
        pilot, lambda: isinstance(pilot.app.screen, LaunchScreen), what="the launch dialog"
    )
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_launch_dialog_fits_with_its_buttons_and_keys(snap_compare, tmp_path, size):
    assert snap_compare(
        _replay(staggered_pair(tmp_path / "run"), 20.0), terminal_size=size, run_before=open_launch
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_job_with_no_steps_says_why_in_its_panel(snap_compare, tmp_path, size):
    assert snap_compare(no_steps_app(tmp_path / "run"), terminal_size=size, run_before=_first_frame)


@run_async
async def test_a_no_steps_notice_leaves_the_panel_when_it_is_withdrawn(tmp_path):
    """Steps arrived after the notice (issue 43): its withdrawal takes the words off the job's panel."""
    app = no_steps_app(tmp_path / "run")
    async with app.run_test(size=(120, 40)) as pilot:
        await _first_frame(pilot)
        await wait_until(
            pilot, lambda: any("no steps seen" in row for row in screen_text(app)), what="said"
        )
        app.first_screen.feed.model.handle(
            Notice(12.0, withdrawn_text(12.0), "A", kind=NO_STEPS_WITHDRAWN)
        )
        await wait_until(
            pilot,
            lambda: not any("no steps seen" in row for row in screen_text(app)),
            what="the words gone from the panel",
        )


def optimizer_steps_app(root: Path) -> ViewerApp:
    """A Lightning script with accumulate_grad_batches=4 (its callback's meta) beside a job that steps."""
    a = paced_job(
        "A", "cmd:python train_lightning.py", 0.0, 30.0, alone=6.0, shared=6.0, shared_from=0.0
    )
    b = paced_job("B", GEMM, 0.0, 30.0, alone=25.0, shared=25.0, shared_from=0.0)
    app = _replay(write_run(root, (a, b), label="lightning-gemm", interval_s=0.5), 20.0)
    info = {"counts": "optimizer steps", "micro_batches": 4, "framework": "lightning"}
    app.first_screen.feed.model.handle(WorkloadMeta("A", 1000, info))
    return app


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_job_of_optimizer_steps_says_so_with_its_micro_batches(snap_compare, tmp_path, size):
    """Issue 43: Lightning's bar counts batches, gpumon optimizer steps; the panel says which, and of how many."""
    assert snap_compare(
        optimizer_steps_app(tmp_path / "run"), terminal_size=size, run_before=_first_frame
    )


def tokens_app(root: Path) -> ViewerApp:
    """A Trainer script whose callback said 12 tokens a sample, beside a job that steps (and says nothing of tokens)."""
    a = paced_job(
        "A", "cmd:python train_trainer.py", 0.0, 30.0, alone=6.0, shared=6.0, shared_from=0.0
    )
    b = paced_job("B", GEMM, 0.0, 30.0, alone=25.0, shared=25.0, shared_from=0.0)
    app = _replay(write_run(root, (a, b), label="trainer-gemm", interval_s=0.5), 20.0)
    info = {"counts": "optimizer steps", "framework": "transformers", "tokens_per_sample": 12.0}
    app.first_screen.feed.model.handle(WorkloadMeta("A", 1000, info))
    return app


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_job_that_said_its_tokens_per_sample_shows_tokens_per_second(
    snap_compare, tmp_path, size
):
    """Issue 43: people compare throughput in samples/s and tokens/s; A's panel shows both (384 samples/s × 12 =
    4.61k tokens/s), B's, which said nothing of tokens, only samples/s."""
    assert snap_compare(tokens_app(tmp_path / "run"), terminal_size=size, run_before=_first_frame)


@run_async
async def test_the_tokens_line_shows_samples_per_second_times_tokens_per_sample(tmp_path):
    app = tokens_app(tmp_path / "run")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot,
            lambda: any("tokens/s" in row for row in screen_text(app)),
            what="the tokens line",
        )
        (row,) = [row for row in screen_text(app) if "tokens/s" in row]
        assert "4.61k · 12 a sample" in row and row.index("tokens/s") < row.index("││"), (
            "in A's panel only"
        )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_replay_without_exclusive_rates_points_at_compare(snap_compare, tmp_path, size):
    assert snap_compare(together_app(tmp_path / "run"), terminal_size=size, run_before=_first_frame)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_process_watched_with_beside_shows_its_rate_and_slowdown(snap_compare, tmp_path, size):
    """B, a probed process gpumon did not start (--beside): its panel reads "watched, not ours" with its iter/s on
    its own scale (0-100 it/s, not 0-5k), and the interference line has its r while A runs beside it."""
    assert snap_compare(
        _replay(beside_pair(tmp_path / "run"), 30.0), terminal_size=size, run_before=_first_frame
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_screen_tables_fit_without_wrapping(snap_compare, tmp_path, monkeypatch, size):
    monkeypatch.chdir(tmp_path)
    runs = Path("runs")
    paths = [
        write_run(
            runs / "20261122-113000-fcn-alone",
            (
                paced_job(
                    "A",
                    FCN,
                    0.0,
                    20.0,
                    alone=40.0,
                    shared=40.0,
                    shared_from=0.0,
                    cpu=98.5,
                    copy_bytes=200_704,
                    copy_s=200_704 / 12e9,
                ),
            ),
            label="fcn-alone",
            interval_s=0.5,
        ),
        exclusive(runs / "20261122-113100-gemm-alone", "A", 25.0, GEMM),
        write_run(
            runs / "20261122-114000-fcn-gemm",
            (
                paced_job(
                    "A",
                    FCN,
                    0.0,
                    20.0,
                    alone=28.0,
                    shared=28.0,
                    shared_from=0.0,
                    cpu=98.5,
                    copy_bytes=200_704,
                    copy_s=200_704 / 9e9,
                ),
                paced_job("B", GEMM, 0.0, 20.0, alone=19.0, shared=19.0, shared_from=0.0, cpu=98.5),
            ),
            label="fcn-gemm",
            interval_s=0.5,
        ),
    ]
    app = _replay(paths[2], 1.0)

    async def open_compare(pilot) -> None:
        await _first_frame(pilot)
        screen = CompareScreen(paths)
        await pilot.app.push_screen(screen)
        await wait_until(pilot, lambda: screen.lines, timeout=60, what="the analysis")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=open_compare)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@run_async
async def test_the_live_footer_fits_and_notices_leave_the_panes_soon(runs_dir, size):
    """The live monitor's footer ends with its Quit key at 80 columns too; a notice is gone within NOTICE_S."""
    app = LiveApp(Controller(make_test_plan(runs_dir)))
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.session_ready, what="the session")
        await wait_until(pilot, lambda: screen_text(app)[-1].strip(), what="the footer drawn")
        rows = screen_text(app)
        shown = rows[-1].rstrip()
        assert shown.startswith(" a b Launch") and shown.endswith("q Quit"), rows
        app.screen.notify("a notice")
        await pilot.pause()
        assert app._notifications and all(n.timeout <= NOTICE_S for n in app._notifications)
        await app.action_quit()


@run_async
async def test_a_replays_empty_slot_offers_no_key_that_does_nothing(tmp_path):
    """Issue 43: a replay's empty panel said "press b to launch", and b does nothing there."""
    app = _replay(exclusive(tmp_path / "run", "A", 40.0), 10.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await _first_frame(pilot)
        rows = "\n".join(screen_text(app))
        assert "empty: no job in slot B" in rows and "press b" not in rows


@run_async
async def test_a_replays_end_shows_the_runs_slowdown_not_a_request_for_two_jobs(tmp_path):
    """Issue 43: End played the rest, and the line then said "sharing needs two running jobs"; once every job has
    ended after running together, it keeps the run's result."""
    app = _replay(staggered_pair(tmp_path / "run"), 60.5)
    async with app.run_test(size=(120, 40)) as pilot:
        await _first_frame(pilot)
        rows = "\n".join(screen_text(app))
        assert "needs two running jobs" not in rows
        assert "A r 1.43" in rows, rows  # 40 it/s alone, 28 beside B
