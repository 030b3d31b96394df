"""Issue 40, defects 3 and 4, through the real CLI: malformed probe messages, NaN and a job that prints without end
cost no valid step, never hang the job, and never make a run `complete` that lost steps or leave it `recording`."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path

from tests.helpers import gpumon, headless_cpu, only_run, recorded

# Writes the probe protocol itself on GPUMON_PROBE_FD: 230 valid steps in batches, hostile lines between them,
# and 8 MB on stdout (far more than a pipe holds: the job blocks unless the listener keeps draining it).
HOSTILE_JOB = textwrap.dedent(
    """
    import json, os, sys, time
    fd = int(os.environ["GPUMON_PROBE_FD"])
    def send(line):
        os.write(fd, line.encode() + b"\\n")
    def message(**fields):
        send(json.dumps({"v": 1, "pid": os.getpid(), **fields}))
    message(type="hello", process="A", t_ns=time.monotonic_ns(), warmup_steps=0)
    hostile = [
        '{"v":[1],"pid":1,"type":"steps","rows":[]}',
        '{"v":1,"pid":1,"type":"steps","rows":[[0,1e400,1,1,0,0,null]]}',
        '{"v":1,"pid":1e400,"type":"steps","rows":[]}',
        '{"v":1,"pid":1,"type":"meta","info":{"lr":NaN}}',
        '{"v":1,"pid":1,"type":"meta","info":' + "[" * 10000 + "]" * 10000 + '}',
        '{"v":1,"type":"steps","rows":[[1,2,3]]}',
        '\\x00\\xff not json',
    ]
    step = 0
    for batch in range(23):
        rows = []
        for _ in range(10):
            rows.append([step, time.monotonic_ns(), 1_000_000, 8, 0, 0, None])
            step += 1
            time.sleep(0.001)
        message(type="steps", rows=rows)
        send(hostile[batch % len(hostile)])
        sys.stdout.write("x" * 360_000 + "\\n")
    sys.stdout.flush()
    message(type="meta", info={"model": "hostile", "lr": 0.1})
    message(type="bye", steps=step, dropped=0)
    """
)

# The probe API called with what JSON cannot carry: nothing may raise into the script.
NAN_JOB = textwrap.dedent(
    """
    import math
    from gpumon import probe
    probe.meta(lr=float("nan"), model="toy", handle=object(), big=float("inf"))
    for i in range(40):
        probe.step(samples=float("nan") if i % 2 else 8, iter_s=float("inf") if i == 3 else None)
    probe.step(samples="eight", warmup="maybe")
    probe.add_copy(-1, float("nan"))
    probe.flush()
    print("the script ran to its end")
    """
)


def _run(tmp_path: Path, script: str) -> tuple[object, Path]:
    runs = tmp_path / "runs"
    done = gpumon(
        *headless_cpu(
            runs,
            "--cmd",
            shlex.join([sys.executable, "-c", script]),
        ),
        timeout=240,
    )
    return done, runs


def test_malformed_probe_messages_lose_no_step_and_the_output_keeps_draining(tmp_path):
    done, runs = _run(tmp_path, HOSTILE_JOB)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    run_dir = only_run(runs)
    steps = [int(row["step"]) for row in recorded(runs)]
    assert steps == list(range(230)), "every valid step after a bad line is recorded"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["workloads"][0]["meta"] == {"model": "hostile", "lr": 0.1}
    notices = " | ".join(n["text"] for n in meta["notices"])
    assert "malformed probe message" in notices and "v[1]" in notices
    assert "ignored" in notices and "in all" in notices, notices
    assert not (run_dir / "run.json.tmp").exists()
    assert (run_dir / "logs" / "A.out").stat().st_size > 8_000_000


def test_nan_and_unencodable_values_never_raise_into_the_script(tmp_path):
    done, runs = _run(tmp_path, NAN_JOB)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    run_dir = only_run(runs)
    assert "the script ran to its end" in (run_dir / "logs" / "A.out").read_text()
    rows = recorded(runs)
    assert [int(r["step"]) for r in rows] == list(range(41))
    assert [r["samples"] for r in rows[:4]] == ["8.0", "", "8.0", ""]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["workloads"][0]["meta"] == {"model": "toy"}
    dropped = [n["text"] for n in meta["notices"] if "could not send" in n["text"]]
    # lr, handle, big; 20 NaN samples, one infinite iter_s; "eight", "maybe"; the copy
    assert dropped == ["the probe dropped 27 values it could not send (NaN, infinite, not JSON)"]
