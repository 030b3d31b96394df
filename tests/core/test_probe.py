"""The probe protocol seen from a real child process: batching, warm-up, copies, never blocking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import sys, time
    from gpumon import probe
    n = int(sys.argv[1])
    probe.meta(model="toy", batch=8)
    for i in range(n):
        with probe.copy(1000):
            bytearray(1000)
        probe.step(samples=8)
    probe.add_copy(500, 0.001)
    probe.step(samples=8, iter_s=0.5, warmup=False)
    """
)


def run_child(n: int, env_extra: dict[str, str] | None = None) -> tuple[int, list[dict]]:
    r, w = os.pipe()
    env = {**os.environ, "GPUMON_PROBE_FD": str(w), "GPUMON_PROCESS": "B", **(env_extra or {})}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(n)], env=env, pass_fds=(w,))
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    status = proc.wait(timeout=60)
    return status, [json.loads(line) for line in data.splitlines()]


def step_rows(messages: list[dict]) -> list[list]:
    return [row for m in messages if m["type"] == "steps" for row in m["rows"]]


def test_protocol_hello_meta_steps_bye():
    status, messages = run_child(20)
    assert status == 0
    assert all(m["v"] == 1 for m in messages)
    assert messages[0]["type"] == "hello" and messages[0]["process"] == "B"
    assert any(m["type"] == "meta" and m["info"] == {"model": "toy", "batch": 8} for m in messages)
    assert messages[-1] == {**messages[-1], "type": "bye", "steps": 21, "dropped": 0}
    rows = step_rows(messages)
    assert [r[0] for r in rows] == list(range(21))
    stamps = [r[1] for r in rows]
    assert stamps == sorted(stamps)
    assert [r[4] for r in rows[:7]] == [1, 1, 1, 1, 1, 0, 0]
    assert all(r[5] == 1000 and r[6] > 0 for r in rows[:20])
    last = rows[-1]
    assert last[2] == 500_000_000 and last[4] == 0 and last[5] == 500 and last[6] == 1_000_000


def test_warmup_steps_from_environment():
    _, messages = run_child(10, {"GPUMON_WARMUP": "2"})
    assert [r[4] for r in step_rows(messages)[:4]] == [1, 1, 0, 0]


def test_steps_are_batched():
    _, messages = run_child(2000)
    batches = [m for m in messages if m["type"] == "steps"]
    assert len(step_rows(messages)) == 2001
    assert len(batches) < 100


def test_full_pipe_never_blocks_and_counts_drops():
    """The monitor reads nothing while the child steps: steps are dropped and counted, never blocked."""
    code = CHILD.replace(
        "n = int(sys.argv[1])", "n = int(sys.argv[1]); began = time.perf_counter()"
    )
    code += "\nprint(time.perf_counter() - began, flush=True)\n"
    r, w = os.pipe()
    env = {**os.environ, "GPUMON_PROBE_FD": str(w)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "200000"],
        env=env,
        pass_fds=(w,),
        stdout=subprocess.PIPE,
        text=True,
    )
    os.close(w)
    elapsed = float(proc.stdout.readline())
    with os.fdopen(r, "rb") as f:
        messages = [json.loads(line) for line in f.read().splitlines()]
    assert proc.wait(timeout=60) == 0
    dropped = sum(m.get("dropped", 0) for m in messages if m["type"] == "steps")
    bye = messages[-1]
    assert bye["type"] == "bye"
    assert dropped + bye["dropped"] > 0
    assert len(step_rows(messages)) + dropped + bye["dropped"] == 200_001
    assert elapsed < 30


def test_dead_monitor_is_harmless():
    r, w = os.pipe()
    os.close(r)
    env = {**os.environ, "GPUMON_PROBE_FD": str(w)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "50"], env=env, pass_fds=(w,), capture_output=True, timeout=60
    )
    os.close(w)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("value", [None, "not-a-number", "999"])
def test_no_monitor_is_a_noop(value):
    env = {k: v for k, v in os.environ.items() if k != "GPUMON_PROBE_FD"}
    if value is not None:
        env["GPUMON_PROBE_FD"] = value
    code = CHILD + "\nprint(probe.enabled())\n"
    proc = subprocess.run(
        [sys.executable, "-c", code, "10"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_a_forked_child_does_not_report():
    """DataLoader workers are forks of the trainer: only the process that opened the pipe reports."""
    code = textwrap.dedent(
        """
        import os
        from gpumon import probe
        probe.step(samples=1)
        pid = os.fork()
        if pid == 0:
            probe.step(samples=99)
            probe.flush()
            os._exit(0)
        os.waitpid(pid, 0)
        probe.step(samples=2)
        """
    )
    r, w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "GPUMON_PROBE_FD": str(w)}, pass_fds=(w,)
    )
    os.close(w)
    with os.fdopen(r, "rb") as f:
        messages = [json.loads(line) for line in f.read().splitlines()]
    assert proc.wait(timeout=60) == 0
    assert [row[3] for row in step_rows(messages)] == [1, 2]
    assert {m["pid"] for m in messages} == {proc.pid}
