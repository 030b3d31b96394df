"""``gpumon experiment`` end to end on the CPU: two tiny workloads, interrupted once, resumed, reported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from gpumon.core.store.trace import load_run
from tests.helpers import GPUMON, interrupt_once, tiny_pairs_spec

SPEC = tiny_pairs_spec("tiny_pairs", "Tiny pairs", "Does fcn beside gemm pay on this machine?", 3)


def statuses(out) -> dict[str, str]:
    path = out / "cells.json"
    if not path.exists():
        return {}
    return {c["id"]: c["status"] for c in json.loads(path.read_text())["cells"]}


def test_interrupted_experiment_resumes_and_fills_the_matrix_from_real_runs(tmp_path):
    spec = tmp_path / "tiny_pairs.toml"
    spec.write_text(SPEC)
    out = tmp_path / "exp"
    args = ["experiment", str(spec), "--out", str(out), "--device", "cpu", "--profile"]
    env = {k: v for k, v in os.environ.items() if k != "GPUMON_PYTHON"}
    env["NO_COLOR"] = "1"
    # the workloads' Python named once: cells.json records it, and the resume below (without it) uses it again
    first = subprocess.Popen(
        [*GPUMON, *args, "--python", sys.executable],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    err = interrupt_once(
        first, lambda: statuses(out).get("x-fcn-r1") == "ok", 90, "the first cell to complete", 60
    )
    assert first.returncode == 130, err
    assert "interrupted; run the same command again to resume" in err
    done = statuses(out)
    assert done["x-fcn-r1"] == "ok" and done.get("s-fcn+gemm-r1") is None
    assert done.get("x-gemm-r1") in (None, "interrupted")

    second = subprocess.run([*GPUMON, *args], capture_output=True, text=True, timeout=180, env=env)
    assert second.returncode == 0, second.stderr
    assert (
        f"the workloads' python, as {out / 'cells.json'} recorded it: {sys.executable}"
        in second.stderr
    )
    assert "[1/3] x-fcn-r1: ok: done earlier" in second.stderr
    assert statuses(out) == {"x-fcn-r1": "ok", "x-gemm-r1": "ok", "s-fcn+gemm-r1": "ok"}
    assert second.stdout.strip() == f"{out / 'results.md'}  (3 ok)"

    cells = {c["id"]: c for c in json.loads((out / "cells.json").read_text())["cells"]}
    fcn_runs = [p for p in (out / "runs").iterdir() if p.name.endswith("-x-fcn-r1")]
    assert [p.name for p in fcn_runs] == [cells["x-fcn-r1"]["run"].split("/")[-1]], (
        "x-fcn-r1 must not run twice"
    )
    for cell in cells.values():
        run = load_run(out / cell["run"])
        assert run.meta.status == "complete" and run.label == cell["id"]
        assert run.meta.device == "cpu" and all(w.exit_status == 0 for w in run.workloads)
        command = cell["command"][
            cell["command"].index("run") :
        ]  # after the interpreter running this gpumon
        assert command[:2] == ["run", "fcn:preset=tiny,threads=1"] or cell["id"] == "x-gemm-r1"
        assert cell["command"][0] == sys.executable and cell["command"][-2:] == [
            "--python",
            sys.executable,
        ]

    results = (out / "results.md").read_text()
    row = re.search(r"\| \*\*fcn\*\* \| – \| \[(\d+\.\d\d) \(", results)
    col = re.search(r"\| \*\*gemm\*\* \| \[(\d+\.\d\d) \(", results)
    assert row and col, results
    assert 0.2 < float(row.group(1)) < 20 and 0.2 < float(col.group(1)) < 20
    assert "| [fcn+gemm](pairs/fcn+gemm/report.md) |" in results
    for cell in cells.values():
        assert f"({cell['run']})" in results
    for name in (
        "slowdown_heatmap.png",
        "stp.png",
        "slowdown_matrix.csv",
        "pairs/fcn+gemm/report.md",
    ):
        assert (out / name).is_file(), name

    profiles = {k: v for c in cells.values() for k, v in c["profiles"].items()}
    if "py-spy profiles were asked for but not recorded" not in results:
        assert {"pyspy-A", "pyspy-B"} <= set(cells["s-fcn+gemm-r1"]["profiles"]), profiles
        assert all(
            (out / p).is_file() and (out / p).parent.name.endswith(("r1"))
            for p in profiles.values()
        )
        assert "## Where Python time goes (py-spy)" in results
