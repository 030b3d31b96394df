"""Built-in workloads: spec parsing, settings, and the real child process on the CPU (tiny presets)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from gpumon.errors import UsageError
from gpumon.workloads.diskdata import ensure_dataset
from gpumon.workloads.samples import Field, token_windows
from gpumon.workloads.settings import resolve
from gpumon.workloads.spec import WORKLOADS, parse_workload_spec, to_argv

CHILD_TIMEOUT_S = 90.0
ROW_STEP, ROW_T, ROW_ITER, ROW_SAMPLES, ROW_WARMUP, ROW_COPY_BYTES, ROW_COPY_NS = range(7)


# --- spec parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "options", "canonical"),
    [
        ("fcn", "fcn", {}, "fcn"),
        ("  ResNet50  ", "resnet50", {}, "resnet50"),
        (
            "resnet50:batch=16,preset=tiny,input=disk",
            "resnet50",
            {"batch": 16, "preset": "tiny", "input": "disk"},
            "resnet50:batch=16,preset=tiny,input=disk",
        ),
        (
            "lstm:seed=-3,warmup=0,pin=no",
            "lstm",
            {"seed": -3, "warmup": 0, "pin": False},
            "lstm:pin=false,seed=-3,warmup=0",
        ),
        (
            "gemm:cpus=2,0-1,steps=4",
            "gemm",
            {"cpus": (0, 1, 2), "steps": 4},
            "gemm:cpus=0-2,steps=4",
        ),
        (
            "h2d:duration=2.5,memory_fraction=1,workers=0",
            "h2d",
            {"duration": 2.5, "memory_fraction": 1.0, "workers": 0},
            "h2d:memory_fraction=1,workers=0,duration=2.5",
        ),
        (
            "vgg19:threads=1,cpus=0,3",
            "vgg19",
            {"threads": 1, "cpus": (0, 3)},
            "vgg19:threads=1,cpus=0,3",
        ),
    ],
)
def test_good_specs_parse_to_typed_options(
    text: str, name: str, options: dict, canonical: str
) -> None:
    spec = parse_workload_spec(text)
    assert (spec.name, spec.options, spec.text) == (name, options, canonical)
    assert parse_workload_spec(spec.text) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("resnet", "unknown workload 'resnet' (choose from fcn, vgg19, resnet50, lstm, h2d, gemm)"),
        ("", "unknown workload '(empty)'"),
        ("fcn:bach=3", "unknown option 'bach' for fcn (choose from batch, preset,"),
        ("fcn:batch=0", "bad value for batch: '0' (expected an integer > 0)"),
        ("fcn:batch=two", "bad value for batch: 'two' (expected an integer > 0)"),
        ("fcn:preset=huge", "bad value for preset: 'huge' (expected tiny or paper)"),
        ("fcn:threads=-1", "bad value for threads"),
        ("fcn:cpus=1-0", "bad value for cpus: '1-0' (expected a CPU list like 0, 0-1 or 0,2)"),
        ("fcn:cpus=a", "bad value for cpus"),
        (
            "fcn:memory_fraction=0",
            "bad value for memory_fraction: '0' (expected a number with 0 < f <= 1)",
        ),
        ("fcn:memory_fraction=1.5", "bad value for memory_fraction"),
        ("fcn:input=tape", "bad value for input: 'tape' (expected synthetic or disk)"),
        ("fcn:workers=-1", "bad value for workers: '-1' (expected an integer >= 0)"),
        ("fcn:pin=maybe", "bad value for pin: 'maybe' (expected true or false)"),
        ("fcn:seed=1.5", "bad value for seed"),
        ("fcn:steps=0", "bad value for steps"),
        ("fcn:duration=-2", "bad value for duration: '-2' (expected a number of seconds > 0)"),
        ("fcn:duration=inf", "bad value for duration"),
        ("fcn:warmup=-1", "bad value for warmup"),
        ("fcn:batch=2,batch=3", "option 'batch' given twice for fcn"),
        ("fcn:", "empty option in workload spec 'fcn:'"),
        ("fcn:batch=2,,seed=1", "empty option"),
        ("fcn:batch", "bad option 'batch' (expected key=value)"),
        ("gemm:input=disk", "gemm reads no input data, so input=disk is not available"),
    ],
)
def test_bad_specs_raise_one_line_usage_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_workload_spec(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_to_argv_builds_the_child_command() -> None:
    spec = parse_workload_spec("fcn:cpus=0,1,batch=8")
    assert to_argv(spec, "cuda:1") == [
        sys.executable,
        "-m",
        "gpumon.workloads",
        "fcn",
        "--device",
        "cuda:1",
        "--opt",
        "batch=8",
        "--opt",
        "cpus=0-1",
    ]


def test_spec_module_never_imports_torch() -> None:
    code = "import sys, gpumon.workloads, gpumon.workloads.spec; print(sorted({'torch', 'numpy'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


# --- settings -------------------------------------------------------------------------------------


def test_settings_defaults_follow_the_device() -> None:
    cpu = resolve(parse_workload_spec("resnet50"), "auto", cuda_available=False, env={})
    assert (cpu.device, cpu.preset, cpu.batch, cpu.threads, cpu.pin, cpu.warmup) == (
        "cpu",
        "tiny",
        4,
        None,
        False,
        5,
    )
    cuda = resolve(
        parse_workload_spec("resnet50"),
        "auto",
        cuda_available=True,
        env={"GPUMON_DEFAULT_THREADS": "3"},
    )
    assert (cuda.device, cuda.preset, cuda.batch, cuda.threads, cuda.pin) == (
        "cuda:0",
        "paper",
        32,
        None,
        True,
    )
    assert (
        resolve(parse_workload_spec("fcn"), "cuda:1", cuda_available=True, env={}).device
        == "cuda:1"
    )


def test_settings_read_the_monitor_environment_and_note_ignored_options() -> None:
    spec = parse_workload_spec("fcn:memory_fraction=0.5,pin=true,workers=3,batch=7")
    settings = resolve(
        spec, "cpu", cuda_available=False, env={"GPUMON_DEFAULT_THREADS": "1", "GPUMON_WARMUP": "2"}
    )
    assert (settings.threads, settings.warmup, settings.batch, settings.sizes["batch"]) == (
        1,
        2,
        7,
        7,
    )
    assert (settings.memory_fraction, settings.pin) == (None, False)
    assert set(settings.ignored) == {"memory_fraction", "pin", "workers"}
    explicit = resolve(
        parse_workload_spec("fcn:threads=2,warmup=0"), "cpu", False, {"GPUMON_DEFAULT_THREADS": "1"}
    )
    assert (explicit.threads, explicit.warmup) == (2, 0)


@pytest.mark.parametrize(
    ("device", "env", "message"),
    [
        ("cuda", {}, "CUDA is not available"),
        ("gpu", {}, "unknown device 'gpu' (choose from auto, cpu, cuda, cuda:N)"),
        (
            "cpu",
            {"GPUMON_DEFAULT_THREADS": "many"},
            "GPUMON_DEFAULT_THREADS='many' is not an integer > 0",
        ),
    ],
)
def test_settings_reject_unusable_devices(device: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        resolve(parse_workload_spec("fcn"), device, cuda_available=False, env=env)
    assert message in str(caught.value)


# --- data -----------------------------------------------------------------------------------------


def test_token_windows_continue_each_stream_across_batches() -> None:
    lanes, window = 4, 6
    rows = token_windows(
        Field("tokens", (window,), "tokens", 50), 3 * lanes, lanes, np.random.default_rng(0)
    )
    assert rows.shape == (3 * lanes, window) and rows.max() < 50
    for row in range(2 * lanes):
        assert rows[row][-1] == rows[row + lanes][0]


def test_dataset_is_created_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUMON_DATA_DIR", str(tmp_path))
    fields = (Field("x", (3,), "pixels"), Field("y", (), "labels", 5))
    first = ensure_dataset("fcn", fields, 8, 4, 7)
    stamp = (first / "x.uint8").stat().st_mtime_ns
    assert ensure_dataset("fcn", fields, 8, 4, 7) == first
    assert (first / "x.uint8").stat().st_mtime_ns == stamp
    assert (first / "x.uint8").stat().st_size == 8 * 3 and (
        first / "y.int64"
    ).stat().st_size == 8 * 8
    assert ensure_dataset("fcn", fields, 8, 4, 8) != first
    assert sorted(p.name.startswith(".") for p in tmp_path.iterdir()) == [False, False]


# --- the real child process -----------------------------------------------------------------------


@dataclass
class Child:
    """A workload child with its probe pipe; ``messages`` fill up as they are read."""

    proc: subprocess.Popen
    fd: int
    messages: list[dict] = field(default_factory=list)
    buffer: bytes = b""
    eof: bool = False

    @property
    def rows(self) -> list[list]:
        return [row for m in self.messages if m["type"] == "steps" for row in m["rows"]]

    def first(self, kind: str) -> dict:
        found = [m for m in self.messages if m["type"] == kind]
        assert found, f"no {kind} message in {[m['type'] for m in self.messages]}"
        return found[0]

    def read_until(self, done: Callable[[Child], bool], timeout: float = CHILD_TIMEOUT_S) -> None:
        """Read probe messages until ``done(self)`` or EOF; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.fd, selectors.EVENT_READ)
            while not self.eof and not done(self):
                remaining = deadline - time.monotonic()
                assert remaining > 0, (
                    f"child gave no EOF within {timeout:.0f}s; got {self.messages[-3:]}"
                )
                if not selector.select(remaining):
                    continue
                chunk = os.read(self.fd, 1 << 16)
                self.eof = not chunk
                self.buffer += chunk
                *lines, self.buffer = self.buffer.split(b"\n")
                self.messages += [json.loads(line) for line in lines]

    def finish(self) -> tuple[int, str, str]:
        """Read to EOF and return (exit status, stdout, stderr)."""
        self.read_until(lambda child: False)
        os.close(self.fd)
        stdout, stderr = self.proc.communicate(timeout=CHILD_TIMEOUT_S)
        return self.proc.returncode, stdout, stderr


def start(text: str, data_dir: Path, **env: str) -> Child:
    """Start ``python -m gpumon.workloads`` for spec ``text`` on the CPU with a probe pipe, in its own group."""
    read_fd, write_fd = os.pipe()
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUMON_")}
    environment = {
        **base,
        "GPUMON_PROBE_FD": str(write_fd),
        "GPUMON_DATA_DIR": str(data_dir),
        **env,
    }
    proc = subprocess.Popen(
        to_argv(parse_workload_spec(text), "cpu"),
        env=environment,
        pass_fds=(write_fd,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    os.close(write_fd)
    return Child(proc, read_fd)


def assert_steps(rows: list[list], count: int, batch: int, warmup: int, copies: bool) -> None:
    assert [row[ROW_STEP] for row in rows] == list(range(count))
    stamps = [row[ROW_T] for row in rows]
    assert stamps == sorted(stamps)
    assert all(row[ROW_ITER] > 0 and row[ROW_SAMPLES] == batch for row in rows)
    assert [row[ROW_WARMUP] for row in rows] == [1 if i < warmup else 0 for i in range(count)]
    for row in rows:
        if copies:
            assert row[ROW_COPY_BYTES] > 0 and row[ROW_COPY_NS] is not None and row[ROW_COPY_NS] > 0
        else:
            assert (row[ROW_COPY_BYTES], row[ROW_COPY_NS]) == (0, None)


@dataclass
class Finished:
    child: Child
    status: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def every_workload(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Finished]:
    """All six workloads for 6 steps each, two at a time with one thread each, as gpumon runs a pair."""
    data_dir = tmp_path_factory.mktemp("data")
    finished: dict[str, Finished] = {}
    for pair in (("vgg19", "fcn"), ("resnet50", "lstm"), ("h2d", "gemm")):
        children = {
            name: start(f"{name}:steps=6", data_dir, GPUMON_DEFAULT_THREADS="1") for name in pair
        }
        finished.update(
            {name: Finished(child, *child.finish()) for name, child in children.items()}
        )
    assert set(finished) == set(WORKLOADS)
    return finished


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_trains_and_reports_each_step(
    name: str, every_workload: dict[str, Finished]
) -> None:
    run = every_workload[name]
    child = run.child
    assert run.status == 0, run.stderr
    assert child.messages[0]["type"] == "hello"
    meta = child.first("meta")["info"]
    assert (meta["model"], meta["device"], meta["preset"], meta["warmup"]) == (
        name,
        "cpu",
        "tiny",
        5,
    )
    assert meta["parameters"] > 0 and meta["torch"]
    assert_steps(child.rows, 6, meta["batch"], warmup=5, copies=name != "gemm")
    if name != "gemm":
        assert all(row[ROW_COPY_BYTES] == meta["copy_bytes_per_step"] for row in child.rows)
    assert child.first("bye")["steps"] == 6
    assert (
        run.stdout.count("\n") == 1
        and f"training {name} " in run.stdout
        and " on cpu " in run.stdout
    )


def test_sigterm_to_the_group_finishes_the_step_and_sends_every_step(tmp_path: Path) -> None:
    child = start("fcn:input=disk,workers=1,warmup=1", tmp_path)
    child.read_until(lambda c: len(c.rows) >= 3)
    os.killpg(child.proc.pid, signal.SIGTERM)
    status, _, stderr = child.finish()
    assert status == 0, stderr
    rows = child.rows
    assert len(rows) >= 3
    assert child.first("bye")["steps"] == len(rows)
    assert_steps(rows, len(rows), child.first("meta")["info"]["batch"], warmup=1, copies=True)


def test_disk_input_with_one_worker_and_one_dataset_for_concurrent_children(tmp_path: Path) -> None:
    spec = "lstm:input=disk,workers=1,steps=6,warmup=2"
    children = [start(spec, tmp_path, GPUMON_DEFAULT_THREADS="1") for _ in range(2)]
    for child in children:
        status, _, stderr = child.finish()
        assert status == 0, stderr
        meta = child.first("meta")["info"]
        assert (meta["input"], meta["workers"]) == ("disk", 1)
        assert_steps(child.rows, 6, meta["batch"], warmup=2, copies=True)
    datasets = list(tmp_path.iterdir())
    assert len(datasets) == 1 and datasets[0].name.startswith("lstm-")


def test_cpus_threads_and_duration(tmp_path: Path) -> None:
    child = start(
        "gemm:cpus=0,duration=0.3,memory_fraction=0.5", tmp_path, GPUMON_DEFAULT_THREADS="1"
    )
    status, _, stderr = child.finish()
    assert status == 0, stderr
    meta = child.first("meta")["info"]
    assert (meta["cpus"], meta["affinity"], meta["threads"], meta["duration"]) == ("0", [0], 1, 0.3)
    assert "memory_fraction" in meta["ignored"] and meta["memory_fraction"] is None
    rows = child.rows
    first_began = rows[0][ROW_T] - rows[0][ROW_ITER]
    assert rows[-1][ROW_T] - first_began >= 0.3e9 - 1e6
    assert rows[-1][ROW_T] - rows[-1][ROW_ITER] - first_began < 0.3e9


def test_child_rejects_bad_arguments_in_one_line(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "gpumon.workloads", "resnet", "--device", "cpu"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == (
        "gpumon.workloads: error: unknown workload 'resnet' (choose from fcn, vgg19, resnet50, lstm, h2d, gemm)\n"
    )
