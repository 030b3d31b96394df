"""``gpumon run --headless`` end to end with real processes on the CPU (tiny presets)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import psutil
import pytest

from gpumon.core.store.trace import load_run
from tests.helpers import GPUMON, gpumon, headless_cpu, only_run, wait_for


def test_two_workloads_overlap_and_match_status_lines(tmp_path):
    # Stop on an event, not after a guessed number of steps: once each job has printed
    # RUNNING_LINES status lines with a rate, Ctrl-C (the jobs run unbounded, --duration is a cap).
    RUNNING_LINES = 3
    proc = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                tmp_path,
                "fcn",
                "gemm",
                "--json",
                "--duration",
                "240",
                "--label",
                "pair",
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed, running = [], {"A": 0, "B": 0}
    for line in proc.stdout:
        printed.append(line)
        status = json.loads(line) if line.startswith("{") else {}
        if status.get("state") == "running" and status.get("iter_per_s"):
            running[status["process"]] += 1
            if min(running.values()) >= RUNNING_LINES:
                proc.send_signal(signal.SIGINT)
                break
    out, err = proc.communicate(timeout=120)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "".join(printed) + out, err)
    assert min(running.values()) >= RUNNING_LINES, result.stdout + result.stderr
    assert result.returncode == 128 + signal.SIGINT, result.stderr
    run = load_run(only_run(tmp_path))
    assert run.meta.status == "complete" and run.meta.mode == "shared"
    assert {w.spec.split(":")[0] for w in run.workloads} == {"fcn", "gemm"}
    assert all(w.exit_status is not None and w.meta["device"] == "cpu" for w in run.workloads)
    assert run.meta.versions["torch"]

    steps = run.steps()
    spans = {}
    for process, group in steps.groupby("process"):
        assert group["step"].is_monotonic_increasing and group["step"].iloc[0] == 0
        assert group["t"].is_monotonic_increasing
        assert (group["iter_s"] > 0).all()
        assert group["warmup"].iloc[:5].all() and not group["warmup"].iloc[5:].any()
        spans[process] = (group["t"].min(), group["t"].max())
    assert set(spans) == {"A", "B"}
    assert max(s[0] for s in spans.values()) < min(s[1] for s in spans.values()), (
        "the two jobs must overlap"
    )
    fcn = steps[steps.process == "A"]
    assert (fcn["copy_bytes"] > 0).all() and (fcn["copy_s"] > 0).all()
    assert (steps[steps.process == "B"]["copy_bytes"] == 0).all()

    procs = run.processes()
    assert set(procs["process"]) == {"A", "B"}
    assert (
        procs["cpu_pct"].max() > 10
        and (procs["rss_mib"] > 5).all()
        and procs["rss_mib"].median() > 100
    )

    status = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    lines = [s for s in status if "process" in s and s["state"] == "running" and s["iter_per_s"]]
    assert lines, result.stdout
    for process in ("A", "B"):
        group = steps[(steps.process == process) & (steps.warmup == 0)]
        trace_rate = 1 / group["iter_s"].mean()
        live = [s["iter_per_s"] for s in lines if s["process"] == process]
        median_live = sorted(live)[len(live) // 2]
        assert median_live == pytest.approx(trace_rate, rel=0.35)
    assert status[-1]["run"] == str(run.path)

    out = (
        tmp_path / "exports" / "csv"
    )  # not a folder of the runs directory: with its run.json it would read as a run
    export = gpumon("export", str(run.path), "--csv", str(out))
    assert export.returncode == 0, export.stderr
    exported = pd.read_csv(out / "steps.csv")
    assert len(exported) == len(steps)
    assert exported["step_s"].tolist() == pytest.approx(steps["iter_s"].tolist())
    assert list(pd.read_csv(out / "device.csv").columns)[:3] == ["t", "wall_epoch_s", "gpu_util"]

    listing = gpumon("runs", str(tmp_path), "--json")
    assert listing.returncode == 0, listing.stderr
    (entry,) = json.loads(listing.stdout)
    assert entry["mode"] == "shared" and set(entry["iter_per_s"]) == {"A", "B"}


def test_unmodified_script_gets_rate_from_auto_probe(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            model = torch.nn.Linear(32, 4)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            critic = torch.optim.SGD(model.parameters(), lr=0.1)
            x, y = torch.randn(64, 32), torch.randn(64, 4)
            for _ in range(40):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
                critic.step()
            print("trained")
            """
        )
    )
    result = gpumon(
        "run",
        "--cmd",
        f"{sys.executable} {script}",
        "--headless",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "runs"),
    )
    assert result.returncode == 0, result.stderr
    run = load_run(only_run(tmp_path / "runs"))
    steps = run.steps()
    assert list(steps["step"]) == list(range(40)), "one step per iteration of the first optimizer"
    assert (run.path / "logs" / "A.out").read_text().strip().endswith("trained")
    assert run.workloads[0].kind == "cmd" and run.workloads[0].exit_status == 0


def _block_stop_signals() -> None:
    """What a Ray worker does to the processes it starts: they inherit its mask, with SIGINT blocked."""
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])


def _start_capture(tmp_path, *extra: str, blocked: bool = False) -> tuple[subprocess.Popen, object]:
    proc = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                tmp_path,
                "fcn",
                "lstm",
                *extra,
            ),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_block_stop_signals if blocked else None,
    )
    run_dir = wait_for(
        lambda: next(iter(tmp_path.glob("*/run.json")), None), what="run directory"
    ).parent
    wait_for(
        lambda: stepping(run_dir) == {"A", "B"}, timeout=60, what="steps of both workloads recorded"
    )
    return proc, run_dir


def stepping(run_dir) -> set[str]:
    """The processes with a complete post-warm-up row in steps.csv."""
    text = (run_dir / "steps.csv").read_text()
    complete = text[: text.rfind("\n") + 1].splitlines()[1:]
    return {line.split(",")[0] for line in complete if line.split(",")[6] == "0"}


def _children(run_dir) -> list[psutil.Process]:
    meta = json.loads((run_dir / "run.json").read_text())
    pids = [w["pid"] for w in meta["workloads"] if w.get("pid")]
    assert len(pids) == 2
    return [psutil.Process(pid) for pid in pids]


def test_kill_9_of_the_monitor_leaves_no_orphans_and_a_readable_trace(tmp_path):
    proc, run_dir = _start_capture(tmp_path)
    children = _children(run_dir)
    proc.kill()
    proc.wait(10)
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"orphans survived: {alive}"
    run = load_run(run_dir)
    assert run.meta.status == "recording"
    steps = run.steps()
    assert set(steps["process"]) == {"A", "B"}
    assert not run.processes().empty


@pytest.mark.parametrize(
    ("signum", "blocked"),
    [
        (signal.SIGTERM, False),
        (signal.SIGINT, False),
        (signal.SIGHUP, False),
        (signal.SIGINT, True),
    ],
)
def test_signals_stop_children_and_finalise(tmp_path, signum, blocked):
    """Also when the parent started gpumon with the stop signals blocked (a Ray worker blocks SIGINT)."""
    proc, run_dir = _start_capture(tmp_path, blocked=blocked)
    children = _children(run_dir)
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if (
            proc.poll() is None
        ):  # deaf to the signal: the test fails, and leaves nothing training (children die with it)
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, err
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive
    run = load_run(run_dir)
    assert run.meta.status == "complete"
    assert all(w.state == "stopped" for w in run.workloads)
    assert "run saved to" in err


def test_a_crashing_child_does_not_stop_the_other(tmp_path):
    crash = f"{sys.executable} -c \"import sys, time; time.sleep(1); print('fatal: out of cheese', file=sys.stderr); sys.exit(3)\""
    result = gpumon(
        *headless_cpu(
            tmp_path,
            "fcn",
            "--cmd",
            crash,
            "--duration",
            "15",
        ),
    )
    assert result.returncode == 1, result.stderr
    assert "workload B exited with status 3" in result.stderr
    assert "out of cheese" in result.stderr
    run = load_run(only_run(tmp_path))
    b = next(w for w in run.workloads if w.slot == "B")
    assert b.exit_status == 3 and "out of cheese" in b.tail
    steps = run.steps()
    a = steps[steps.process == "A"]
    assert a["t"].max() > b.stop_t + 2, "A kept training after B crashed"


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "resnet", "--headless"], "unknown workload 'resnet'"),
        (["run", "fcn:batch=0", "--headless"], "batch"),
        (["run", "fcn:colour=red", "--headless"], "colour"),
        (["run", "fcn", "gemm", "lstm", "--headless"], "at most 2 workloads"),
        (
            ["run", "fcn", "--cmd", "no-such-binary-xyz", "--headless"],
            "command not found: no-such-binary-xyz",
        ),
        (["run", "fcn", "--device", "tpu", "--headless"], "bad --device"),
        (
            ["run", "fcn", "--duration", "2", "--stagger", "3", "--headless"],
            "longer than --stagger",
        ),
        (["export", "/nonexistent/run", "--csv", "/tmp/x"], "no such run directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = gpumon(*args, env={"GPUMON_RUNS": str(tmp_path)})
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not list(tmp_path.iterdir()), "nothing is created for bad input"


def test_corrupt_run_is_exit_2(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text("{")
    result = gpumon("export", str(run), "--csv", str(tmp_path / "out"))
    assert (
        result.returncode == 2 and "corrupt" in result.stderr and "Traceback" not in result.stderr
    )


def test_headless_reports_slowdown_and_stp_against_baselines(tmp_path):
    from tests.tracegen import exclusive

    base_a = exclusive(tmp_path / "base-a", "A", rate=500.0, spec="lstm")
    base_b = exclusive(tmp_path / "base-b", "A", rate=250.0, spec="gemm")
    result = gpumon(
        # 10 s each: the live line gives r and STP once the overlap holds MIN_OVERLAP_S (whatever the machine's speed)
        *headless_cpu(
            tmp_path / "runs",
            "lstm:duration=10",
            "gemm:duration=10",
            "--json",
            "--baseline",
            f"A={base_a}",
            "--baseline",
            f"B={base_b}",
        ),
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    checked = 0
    for entry in (s for s in lines if "slowdown" in s):
        for slot, baseline in (("A", 500.0), ("B", 250.0)):
            shared = entry["shared_rate"][slot]
            if shared and entry["slowdown"][slot]:
                assert entry["slowdown"][slot] == pytest.approx(baseline / shared, rel=0.01)
                checked += 1
        if all(entry["slowdown"].values()):
            assert entry["stp"] == pytest.approx(sum(1 / r for r in entry["slowdown"].values()))
            # the live line has a point, no interval: the verdict its STP implies at the two digits it shows
            shown = round(entry["stp"], 2)
            assert entry["verdict"] == (
                "pays" if shown > 1 else "loses" if shown < 1 else "cannot tell"
            ), entry
    assert checked, result.stdout


def test_a_closed_stdout_does_not_stop_the_run(tmp_path):
    """`gpumon run ... --headless | head -1`: the reader goes away, the capture still completes."""
    proc = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                tmp_path,
                "lstm:steps=400",
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    run = load_run(only_run(tmp_path))
    assert run.meta.status == "complete"
    assert len(run.steps()) == 400
