"""Session and HeadlessRun with a fast fake host source, real children and a real run directory."""

from __future__ import annotations

import io
import json
import shlex
import shutil
import sys

import pytest

from gpumon.core.jobs.launcher import LaunchRequest
from gpumon.core.records.model import HostSample, Notice
from gpumon.frontends.plan import make_plan
from gpumon.core.capture.session import Session, SessionConfig
from gpumon.core.store.trace import list_runs, load_run, summarize
from gpumon.errors import EnvironmentFailure
from gpumon.frontends.headless import HeadlessRun
from tests.core.test_pipeline_sampler import Collect, FakeHost
from tests.helpers import wait_for


def _stepper(steps: int, exit_code: int = 0, step_s: float = 0.005) -> str:
    code = (
        "import sys, time\nfrom gpumon import probe\n"
        f"for _ in range({steps}):\n    time.sleep({step_s})\n    probe.step(samples=2)\nsys.exit({exit_code})"
    )
    return shlex.join([sys.executable, "-c", code])


def _session(tmp_path, **config) -> tuple[Session, Collect]:
    session = Session(
        SessionConfig(
            device="cpu", interval_ms=50, runs_dir=tmp_path / "runs", nvml=False, **config
        )
    )
    session.host = FakeHost()
    return session, Collect(session.bus)


def test_a_capture_records_the_job_and_the_fake_host_then_completes(tmp_path):
    session, items = _session(tmp_path)
    request = LaunchRequest.command(_stepper(40))
    session.start()
    path = session.start_capture("unit", [request])
    session.launch(slot="A", request=request)
    wait_for(lambda: not session.launcher.get("A").running, what="the job to finish")
    hosts = len(items.of(HostSample))
    wait_for(lambda: len(items.of(HostSample)) > hosts, what="a host sample during the capture")
    assert session.shutdown() == path
    run = load_run(path)
    assert run.meta.status == "complete" and run.meta.mode == "exclusive"
    assert len(run.steps()) == 40 and set(run.steps()["process"]) == {"A"}
    assert not run.host().empty and set(run.host()["cpu_pct"]) == {12.5}, (
        "host rows come from the sampler's source"
    )
    with pytest.raises(EnvironmentFailure, match="shutting down"):
        session.start_capture("late")
    with pytest.raises(EnvironmentFailure, match="shutting down"):
        session.launch(slot="B", request=request)


def _capture_removed(tmp_path, **config) -> tuple[Session, Collect, LaunchRequest]:
    """A session capturing job A (``request``) whose run directory was removed, once it has said so."""
    session, items = _session(tmp_path, **config)
    request = LaunchRequest.command("sleep 60")
    session.start()
    path = session.start_capture("unit", [request])
    session.launch(slot="A", request=request)
    shutil.rmtree(path)
    wait_for(lambda: session.capture_error is not None, what="the capture error")
    return session, items, request


def test_a_failed_capture_stops_the_jobs_and_says_so(tmp_path):
    session, items, request = _capture_removed(tmp_path)
    wait_for(lambda: not session.launcher.get("A").running, what="the job to be stopped")
    texts = [n.text for n in items.of(Notice)]
    assert texts[0] == session.capture_error.line() and texts[0].endswith("was removed")
    assert any(t.startswith("could not finalise") for t in texts)
    assert not session.capturing
    with pytest.raises(EnvironmentFailure, match="capture stopped"):
        session.launch(slot="B", request=request)
    session.shutdown()


def test_on_capture_error_continue_keeps_the_jobs(tmp_path):
    session, _, _ = _capture_removed(tmp_path, on_capture_error="continue")
    assert session.launcher.get("A").running
    session.shutdown()
    workload = session.launcher.get("A")
    assert not workload.running and workload.stop_requested


def _headless(tmp_path, commands, stagger_s=0.0, duration_s=None) -> tuple[int, str, str]:
    config = SessionConfig(
        device="cpu", interval_ms=50, runs_dir=tmp_path / "runs", nvml=False, stagger_s=stagger_s
    )
    plan = make_plan(
        [], commands, session=config, label="unit", duration_s=duration_s, stagger_s=stagger_s
    )
    out, err = io.StringIO(), io.StringIO()
    run = HeadlessRun(plan, as_json=True, out=out, err=err)
    run.session.host = FakeHost()
    return run.run(), out.getvalue(), err.getvalue()


def test_headless_runs_a_pair_to_completion_with_json_status_lines(tmp_path):
    code, out, err = _headless(tmp_path, [_stepper(300), _stepper(300)])
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["status"] == 0
    run = load_run(lines[-1]["run"])
    assert run.meta.mode == "shared" and {w.slot: w.exit_status for w in run.workloads} == {
        "A": 0,
        "B": 0,
    }
    assert len(run.steps()) == 600
    assert {s["process"] for s in lines if "process" in s} <= {"A", "B"}


def test_headless_reads_the_probes_once_a_second_records_every_step_and_prints_a_line_a_second(
    tmp_path,
):
    """The runner nobody watches (headless, detached) reads the probes at its own period, not the screen's;
    two fast steppers (thousands of steps a second) lose no step, and the status lines keep their second."""
    from statistics import median

    from gpumon.core.probing.listener import GATHER_S
    from gpumon.frontends.headless import LISTEN_S, STATUS_PERIOD_S

    steps = 8000
    config = SessionConfig(device="cpu", interval_ms=50, runs_dir=tmp_path / "runs", nvml=False)
    assert Session(config).listener.period_s == GATHER_S, (
        "a screen's session reads at the screen's latency"
    )
    plan = make_plan(
        [],
        [_stepper(steps, step_s=0.0003)] * 2,
        session=config,
        label="unit",
        duration_s=None,
        stagger_s=0.0,
    )
    out, err = io.StringIO(), io.StringIO()
    run = HeadlessRun(plan, as_json=True, out=out, err=err)
    run.session.host = FakeHost()
    assert run.session.listener.period_s == LISTEN_S > GATHER_S
    assert run.run() == 0, err.getvalue()
    assert "dropped" not in err.getvalue()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    recorded = load_run(lines[-1]["run"]).steps()
    for process in "AB":
        assert list(recorded[recorded.process == process]["step"]) == list(range(steps)), (
            "every step, in order"
        )
        times = [s["t"] for s in lines if s.get("process") == process]
        assert len(times) >= 2, out.getvalue()
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert min(gaps) >= STATUS_PERIOD_S - 0.01 and median(gaps) < 1.5 * STATUS_PERIOD_S, gaps


def test_headless_exits_1_naming_the_failed_job_and_never_starts_the_staggered_one(tmp_path):
    code, out, err = _headless(
        tmp_path, [_stepper(5, exit_code=4), "sleep 1"], stagger_s=30.0, duration_s=60.0
    )
    assert code == 1
    (failure,) = [line for line in err.splitlines() if line.startswith("gpumon: run failed:")]
    assert (
        "workload A" in failure
        and "exited with status 4" in failure
        and "workload B not started" in failure
    )
    run = load_run(json.loads(out.splitlines()[-1])["run"])
    a, b = run.workloads
    assert (
        (a.slot, a.exit_status) == ("A", 4)
        and b.state == "not started"
        and "pid" not in b.to_json()
    )


def test_a_job_relaunched_into_its_slot_starts_a_new_capture_and_no_run_mixes_two_jobs(tmp_path):
    """Issue 40, defect 6: stop job A, launch another into slot A (the live screen's way): each capture holds one
    job per slot, with its own pid and steps, so runs, compare and export never mix the two."""
    session, items = _session(tmp_path)
    first, second = LaunchRequest.command(_stepper(30)), LaunchRequest.command(_stepper(20))
    session.start()
    path = session.start_capture("relaunch")
    a1 = session.launch(slot="A", request=first)
    wait_for(lambda: not session.launcher.get("A").running, what="the first job to finish")
    a2 = session.launch(slot="A", request=second)
    assert session.recorder is not None and session.recorder.path != path
    wait_for(lambda: not session.launcher.get("A").running, what="the second job to finish")
    second_path = session.shutdown()
    runs = [load_run(path), load_run(second_path)]
    for run, job, steps in zip(runs, (a1, a2), (30, 20)):
        assert run.meta.status == "complete"
        assert [(w.slot, w.pid) for w in run.workloads] == [("A", job.pid)]
        frame = run.steps()
        assert set(frame["pid"]) == {job.pid} and list(frame["step"]) == list(range(steps))
    assert any("a new one starts" in n.text for n in items.of(Notice))
    listed = {r.path.name: r for r in list_runs(tmp_path / "runs")}
    assert {name: summarize(r).rates.keys() for name, r in listed.items()} == {
        path.name: {"A"},
        second_path.name: {"A"},
    }


@pytest.mark.parametrize(("given", "chosen"), [(None, 1000), (250, 250)])
def test_the_interval_not_given_is_chosen_at_start_and_recorded(tmp_path, given, chosen):
    """Without --interval and without NVML a tick would read nothing between the once-a-second process ticks: the
    sampler ticks once a second, and run.json says the interval it ran at; one given is kept as given."""
    session = Session(
        SessionConfig(device="cpu", interval_ms=given, runs_dir=tmp_path / "runs", nvml=False)
    )
    session.host = FakeHost()
    assert session.interval_ms == given  # chosen when NVML has been opened
    session.start()
    try:
        assert session.interval_ms == chosen
        assert session.sampler is not None and session.sampler.interval_s == chosen / 1000
        assert session.sampler.process_every == (1 if given is None else 4)
        path = session.start_capture("unit")
    finally:
        session.shutdown()
    assert json.loads((path / "run.json").read_text())["interval_ms"] == chosen
