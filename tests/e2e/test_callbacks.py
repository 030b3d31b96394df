"""gpumon/callbacks/ with the real trainers (issue 43): a Lightning script and a Hugging Face Trainer script with
gradient accumulation, unchanged, report optimizer steps (not micro-batches), micro-batches per step and samples
(tokens for the Trainer) through the auto-probe; the same callbacks added by hand count each step once; and a
script with the callback runs as well without gpumon."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import gpumon, headless_cpu

pytest.importorskip("lightning")
pytest.importorskip("transformers")

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
LIGHTNING = SCRIPTS / "lightning_accumulate.py"
TRAINER = SCRIPTS / "hf_trainer_accumulate.py"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _run(tmp_path: Path, command: str) -> tuple[dict, list[dict]]:
    runs = tmp_path / "runs"
    done = gpumon(
        *headless_cpu(
            runs,
            "--cmd",
            command,
            "--python",
            sys.executable,
        ),
        timeout=300,
        env=OFFLINE,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in runs.iterdir() if (p / "run.json").exists()]
    listed = gpumon("runs", str(runs)).stdout.splitlines()[1]
    assert " cpu cores " in listed, (
        "a --cmd run on the CPU shared cores, not GPU time slices (issue 43)"
    )
    (workload,) = json.loads((run_dir / "run.json").read_text())["workloads"]
    with open(run_dir / "steps.csv", newline="") as f:
        return workload, list(csv.DictReader(f))


@pytest.mark.parametrize("by_hand", [False, True], ids=["auto-probe", "by-hand"])
def test_a_lightning_script_with_accumulation_reports_optimizer_steps_and_samples(
    tmp_path, by_hand
):
    flag = " --by-hand" if by_hand else ""
    workload, steps = _run(tmp_path, f"python {LIGHTNING}{flag}")
    meta = workload["meta"]
    assert meta["counts"] == "optimizer steps" and meta["framework"] == "lightning"
    assert meta["micro_batches"] == 4
    assert meta["device"] == "cpu", "the auto-probe says where the parameters live"
    assert len(steps) == 10, (
        "40 batches of 8 with accumulate_grad_batches=4: 10 optimizer steps, each once"
    )
    assert {float(row["samples"]) for row in steps} == {32.0}


@pytest.mark.parametrize("by_hand", [False, True], ids=["auto-probe", "by-hand"])
def test_a_trainer_script_with_accumulation_reports_optimizer_steps_samples_and_tokens(
    tmp_path, by_hand
):
    flag = " --by-hand" if by_hand else ""
    workload, steps = _run(tmp_path, f"python {TRAINER} {tmp_path / 'out'}{flag}")
    meta = workload["meta"]
    assert meta["counts"] == "optimizer steps" and meta["framework"] == "transformers"
    assert meta["micro_batches"] == 4 and meta["tokens_per_sample"] == 12.0
    assert len(steps) == 10
    assert {float(row["samples"]) for row in steps} == {16.0}
    _says_tokens_per_second(meta)


def _says_tokens_per_second(meta: dict) -> None:
    """What the Trainer's callback said (its recorded meta) turns 80 samples/s into 960 tokens/s on the status line and
    in its JSON; a job that said nothing of tokens shows none."""
    import math

    from gpumon.core.interference.live import LiveFigures
    from gpumon.frontends.headless import status_json, status_line

    nan = math.nan
    figures = LiveFigures("A", 10, 5.0, 80.0, nan, nan, 99.0, nan, nan, nan, False)
    line = status_line(3.0, "cmd:python train.py", "running", figures, meta=meta)
    assert "80.0 samples/s 960 tokens/s" in line, line
    assert json.loads(status_json(3.0, "cmd:python t.py", "running", figures, meta))[
        "tokens_per_s"
    ] == pytest.approx(960.0)
    assert "tokens/s" not in status_line(3.0, "fcn", "running", figures, meta={})


def test_a_script_with_the_callback_runs_without_gpumon(tmp_path):
    """No monitor: the callback reports into a probe no one reads, and the training is the same."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, **OFFLINE, "GPUMON_RENDEZVOUS": "off", "PYTHONPATH": root}
    env.pop("GPUMON_PROBE_FD", None)
    done = subprocess.run(
        [sys.executable, str(LIGHTNING), "--by-hand"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0 and "optimizer steps 10" in done.stdout, done.stderr


def test_the_status_line_says_optimizer_steps_and_a_slow_rate_as_a_steps_time():
    """Headless (issue 43): what a step is, when the job said so, and never 0.00 it/s for a slow job."""
    import math

    from gpumon.core.interference.live import LiveFigures
    from gpumon.frontends.headless import status_json, status_line

    nan = math.nan
    figures = LiveFigures("A", 75, 1 / 6.2, 20.5, nan, nan, 99.0, nan, nan, nan, False)
    meta = {"counts": "optimizer steps", "micro_batches": 4}
    line = status_line(12.0, "cmd:python train.py", "running", figures, meta=meta)
    assert "1 step / 6.2 s" in line and line.endswith("optimizer steps 75 (4 micro-batches each)")
    assert status_line(12.0, "fcn", "running", figures).endswith("steps 75")
    said = json.loads(status_json(12.0, "cmd:python train.py", "running", figures, meta))
    assert said["counts"] == "optimizer steps" and said["micro_batches"] == 4


def test_the_pytorch_lightning_package_gets_its_own_callback(tmp_path):
    """``import pytorch_lightning``: its Trainer accepts only its own Callback class, and gets it."""
    pytest.importorskip("pytorch_lightning")
    script = tmp_path / "pl_accumulate.py"
    script.write_text(
        LIGHTNING.read_text().replace("import lightning as L", "import pytorch_lightning as L")
    )
    workload, steps = _run(tmp_path, f"python {script}")
    assert (
        workload["meta"]["counts"] == "optimizer steps" and workload["meta"]["micro_batches"] == 4
    )
    assert len(steps) == 10 and {float(row["samples"]) for row in steps} == {32.0}
