"""A CUDA device that is not there is refused before anything starts: one line, exit 2, no run dir.

The GPU count comes from the real pynvml binding loaded against the fake libnvidia-ml (in a
child process, as LD_LIBRARY_PATH is read at start), or from a /proc/driver/nvidia tree written
here; CUDA_VISIBLE_DEVICES is applied the way CUDA applies it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpumon.core.jobs.devices import check_device_present, count_gpus, visible_gpus
from gpumon.errors import UsageError
from tests.fakenvml import build as fake
from tests.helpers import GPUMON


@pytest.mark.parametrize(
    ("mask", "physical", "visible"),
    [
        (None, 2, 2),
        ("", 2, 0),
        ("-1", 2, 0),
        ("1", 2, 1),
        ("1,0", 2, 2),
        ("0,5,1", 2, 1),  # CUDA stops at the first invalid entry
        ("0,0", 2, 1),
        ("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", 1, 1),
        ("MIG-GPU-1/0/0,7", 1, 1),
        ("0", 0, 0),
    ],
)
def test_cuda_visible_devices_renumbers_like_cuda(mask, physical, visible):
    env = {} if mask is None else {"CUDA_VISIBLE_DEVICES": mask}
    assert visible_gpus(physical, env) == visible


def test_proc_driver_counts_gpus_without_nvml(tmp_path: Path):
    assert count_gpus(use_nvml=False, proc_driver=tmp_path / "absent").count == 0
    (tmp_path / "gpus").mkdir()
    for bus_id in ("0000:17:00.0", "0000:65:00.0"):
        (tmp_path / "gpus" / bus_id).mkdir()
    assert count_gpus(use_nvml=False, proc_driver=tmp_path).count == 2
    (tmp_path / "nogpus").mkdir()
    assert count_gpus(use_nvml=False, proc_driver=tmp_path / "nogpus").count is None


def test_cpu_and_auto_are_never_refused():
    check_device_present("cpu")
    check_device_present("auto")


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if fake.compiler() is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml")
    return fake.build(tmp_path_factory.mktemp("fakenvml"))


def run_with_fake(
    tmp_path: Path, lib: Path, scenario: str, *args: str, **env: str
) -> subprocess.CompletedProcess:
    """``gpumon ARGS`` on the fake NVML library playing ``scenario``."""
    return _with_fake(tmp_path, lib, scenario, [*GPUMON, *args], env)


def python_with_fake(
    tmp_path: Path, lib: Path, scenario: str, code: str
) -> subprocess.CompletedProcess:
    """Python ``code`` in a child on the fake NVML library playing ``scenario``."""
    return _with_fake(tmp_path, lib, scenario, [sys.executable, "-c", code], {})


def _with_fake(
    tmp_path: Path, lib: Path, scenario: str, argv: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess:
    script = fake.write_scenario(tmp_path / "scenario.txt", scenario)
    environ = fake.environment(lib, script)
    environ.update(env)
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=120)


TWO_GPUS = """
device name="NVIDIA H100 80GB HBM3" uuid=GPU-0
device name="NVIDIA H100 80GB HBM3" uuid=GPU-1
"""
NO_GPU = "driver 550.54.15\n"


@pytest.mark.parametrize(
    ("scenario", "device", "mask", "says"),
    [
        (
            TWO_GPUS,
            "cuda:7",
            None,
            "device cuda:7 is not here: 2 GPU(s) visible, cuda:0 to cuda:1 (found by NVML)",
        ),
        (
            TWO_GPUS,
            "cuda:1",
            "1",
            "device cuda:1 is not here: 1 GPU(s) visible, cuda:0 to cuda:0 (found by NVML, CUDA_VISIBLE_DEVICES='1')",
        ),
        (
            TWO_GPUS,
            "cuda",
            "",
            "device cuda is not here: no CUDA GPU visible (2 GPU(s) found by NVML, CUDA_VISIBLE_DEVICES=''); use --device cpu or auto",
        ),
        (
            NO_GPU,
            "cuda",
            None,
            "device cuda is not here: no CUDA GPU visible (0 GPU(s) found by NVML); use --device cpu or auto",
        ),
    ],
    ids=["index-past-the-last", "masked-by-cuda-visible-devices", "all-masked", "no-gpu-at-all"],
)
def test_missing_device_is_one_line_exit_2_and_no_run_dir(
    fake_lib, tmp_path, scenario, device, mask, says
):
    env = {} if mask is None else {"CUDA_VISIBLE_DEVICES": mask}
    runs = tmp_path / "runs"
    done = run_with_fake(
        tmp_path,
        fake_lib,
        scenario,
        "run",
        "fcn",
        "--headless",
        "--duration",
        "30",
        "--device",
        device,
        "--out",
        str(runs),
        **env,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"gpumon: error: {says}\n"
    assert not runs.exists(), "nothing may start, not even the run directory"


def test_present_devices_pass_the_check(fake_lib, tmp_path):
    code = (
        "from gpumon.core.jobs.devices import check_device_present as c\n"
        "for d in ('cuda', 'cuda:0', 'cuda:1'): c(d)\n"
        "import os; os.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
        "c('cuda:0')\n"  # the one visible device is cuda:0 to CUDA, whatever its NVML index
        "print('ok')\n"
    )
    done = python_with_fake(tmp_path, fake_lib, TWO_GPUS, code)
    assert done.stdout == "ok\n", done.stderr


def test_launch_dialog_and_experiments_use_the_same_check(fake_lib, tmp_path):
    code = (
        "from gpumon.errors import UsageError\n"
        "from gpumon.tui.screens.launch import build_request\n"
        "try:\n    build_request('fcn', '', 'cuda:3', '')\n"
        "except UsageError as e:\n    print(e)\n"
    )
    done = python_with_fake(tmp_path, fake_lib, TWO_GPUS, code)
    assert done.stdout.startswith("device cuda:3 is not here: 2 GPU(s) visible"), done.stderr
    experiment = run_with_fake(
        tmp_path, fake_lib, TWO_GPUS, "experiment", "q2_pairwise", "--device", "cuda:3"
    )
    assert experiment.returncode == 2
    assert experiment.stderr.startswith("gpumon: error: device cuda:3 is not here"), (
        experiment.stderr
    )


@pytest.mark.skipif(
    count_gpus().count in (0, None), reason="needs a machine with an NVIDIA GPU (real NVML)"
)
def test_real_gpus_pass_and_one_past_the_last_is_refused():
    visible = visible_gpus(count_gpus().count or 0, __import__("os").environ)
    if visible == 0:
        pytest.skip("CUDA_VISIBLE_DEVICES hides every GPU")
    check_device_present("cuda")
    check_device_present(f"cuda:{visible - 1}")
    with pytest.raises(UsageError, match=f"device cuda:{visible} is not here"):
        check_device_present(f"cuda:{visible}")
