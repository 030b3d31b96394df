"""``gpumon wrap -- COMMAND``: the command replaces gpumon (same PID, nothing owned) and an unmodified PyTorch loop
publishes its optimizer steps on the probe's rendezvous for a gpumon started later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from gpumon.core.probing import rendezvous
from tests.helpers import GPUMON, gpumon, wait_for

# No gpumon import: the auto-probe counts optimizer.step() calls.
TRAIN = textwrap.dedent(
    """
    import os, time, torch
    print(os.getpid(), os.environ.get("GPUMON_PROBE_FD"), flush=True)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    while True:
        opt.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
        time.sleep(0.01)
    """
)


def test_wrap_execs_the_command_with_the_probe() -> None:
    env = {
        **os.environ,
        "GPUMON_PROBE_FD": "99",
    }  # a stale pipe number from an outer gpumon is not inherited
    proc = subprocess.Popen(
        [*GPUMON, "wrap", "--", sys.executable, "-c", TRAIN],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == [
            str(proc.pid),
            "None",
        ]  # exec: gpumon's own PID, no pipe
        sock = wait_for(lambda: rendezvous.connect(proc.pid), timeout=60, what="the rendezvous")
        sock.settimeout(30)
        data = b""
        while data.count(b'"type":"steps"') < 2:
            data += sock.recv(1 << 16)
        sock.close()
        messages = [json.loads(line) for line in data.split(b"\n")[:-1]]
        assert messages[0]["type"] == "hello" and messages[0]["rendezvous"] is True
        rows = [r for m in messages if m["type"] == "steps" for r in m["rows"]]
        assert rows and [r[0] for r in rows] == list(range(len(rows)))
    finally:
        proc.kill()
        proc.wait()


def test_wrap_without_a_command_or_with_a_missing_one() -> None:
    for args, message in (
        (["wrap"], "wrap needs a command, e.g. gpumon wrap -- python train.py"),
        (["wrap", "--", "no-such-command-here"], "command not found: no-such-command-here"),
    ):
        done = gpumon(*args)
        assert (done.returncode, done.stderr) == (2, f"gpumon: error: {message}\n")
