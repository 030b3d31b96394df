"""What a failed write means to the user, in a few words (gpumon.core.store.recorder.describe_write_error), and the
labels a run directory may carry. Written for the mutation run (benchmarks/mutation.py, docs/testing.md)."""

from __future__ import annotations

import errno
import json
import math
import threading
import time
from pathlib import Path

import pytest

from gpumon.core.store.recorder import (
    Recorder,
    create_run_dir,
    describe_write_error,
    safe_label,
    write_json_atomic,
)
from gpumon.core.store.runmeta import RunMeta
from gpumon.errors import EnvironmentFailure

RUN = Path("/runs/20261126-050000-x")


@pytest.mark.parametrize(
    ("code", "strerror", "said"),
    [
        (errno.ENOSPC, "No space left on device", f"no space left on {RUN}"),
        (errno.EDQUOT, "Disk quota exceeded", f"disk quota exceeded on {RUN}"),
        (errno.EROFS, "Read-only", f"{RUN} is on a read-only file system"),
        (errno.ENOENT, "No such file", f"run directory {RUN} was removed"),
    ],
)
def test_each_errno_in_words(code: int, strerror: str, said: str) -> None:
    assert describe_write_error(OSError(code, strerror), RUN) == said


def test_permission_denied_names_the_file_when_known() -> None:
    for code in (errno.EACCES, errno.EPERM):
        assert (
            describe_write_error(OSError(code, "Permission denied"), RUN)
            == f"permission denied writing {RUN}"
        )
        named = OSError(code, "Permission denied", "/runs/x/steps.csv")
        assert describe_write_error(named, RUN) == "permission denied writing /runs/x/steps.csv"


def test_any_other_error_by_its_own_words() -> None:
    assert (
        describe_write_error(OSError(errno.EIO, "Input/output error"), RUN)
        == f"Input/output error ({RUN})"
    )
    assert describe_write_error(
        OSError(errno.EIO, "Input/output error", "/runs/x/device.csv"), RUN
    ) == ("Input/output error (/runs/x/device.csv)")
    assert (
        describe_write_error(OSError("the disk is not keeping up"), RUN)
        == f"the disk is not keeping up ({RUN})"
    )


def test_a_label_usable_in_a_directory_name() -> None:
    assert safe_label("fcn+gemm r1") == "fcn+gemm-r1"
    assert safe_label("../../etc/passwd") == "etc-passwd"
    assert safe_label("...") == "run" and safe_label("") == "run"
    assert safe_label("x" * 100) == "x" * 80
    assert safe_label("Xavier.R2-X") == "Xavier.R2-X"  # capitals kept, and an X at either end


def test_run_directories_are_named_by_start_and_label(tmp_path: Path) -> None:
    started = time.strptime("2026-11-26 05:04:03", "%Y-%m-%d %H:%M:%S")
    first = create_run_dir(
        tmp_path / "a" / "runs", "fcn gemm", started
    )  # the runs directory made with its parents
    assert (
        first == tmp_path / "a" / "runs" / "20261126-050403-fcn-gemm" and (first / "logs").is_dir()
    )
    assert (
        create_run_dir(tmp_path / "a" / "runs", "fcn gemm", started).name
        == "20261126-050403-fcn-gemm-2"
    )
    assert (
        create_run_dir(tmp_path / "a" / "runs", "fcn gemm", started).name
        == "20261126-050403-fcn-gemm-3"
    )
    (tmp_path / "file").write_text("")
    with pytest.raises(
        EnvironmentFailure
    ) as err:  # the machine failed, not the input (docs/architecture.md, Errors)
        create_run_dir(tmp_path / "file", "x", started)
    assert str(err.value) == f"cannot create runs directory {tmp_path / 'file'}: File exists"


def test_a_runs_directory_the_kernel_makes_no_directory_in_is_one_line(tmp_path: Path) -> None:
    """procfs refuses a new directory (as a read-only or full file system would): the line names the run directory
    and gives the kernel's words."""
    started = time.strptime("2026-11-26 05:04:03", "%Y-%m-%d %H:%M:%S")
    with pytest.raises(EnvironmentFailure) as err:
        create_run_dir(Path("/proc/self"), "x", started)
    try:
        Path("/proc/self/20261126-050403-x").mkdir()
    except OSError as exc:
        words = exc.strerror
    assert str(err.value) == f"cannot create run directory /proc/self/20261126-050403-x: {words}"


def test_run_json_is_written_whole_readable_and_strict(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_json_atomic(path, {"label": "é", "where": Path("/runs/x"), "n": [1]})
    assert (
        path.read_text(encoding="utf-8")
        == '{\n  "label": "\\u00e9",\n  "where": "/runs/x",\n  "n": [\n    1\n  ]\n}\n'
    )
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left
    with pytest.raises(ValueError):
        write_json_atomic(path, {"duration_s": math.nan})  # NaN is not JSON: never written as such
    assert json.loads(path.read_text())["label"] == "é"


def test_a_thousandth_run_of_one_name_and_second_is_refused(tmp_path: Path) -> None:
    started = time.strptime("2026-11-26 05:04:03", "%Y-%m-%d %H:%M:%S")
    runs = tmp_path / "runs"
    base = "20261126-050403-x"
    for name in [base, *(f"{base}-{n}" for n in range(2, 1000))]:
        (runs / name).mkdir(parents=True)
    with pytest.raises(
        EnvironmentFailure
    ) as err:  # a run directory that cannot be created: exit status 1
        create_run_dir(runs, "x", started)
    assert str(err.value) == f"too many runs named {base} in {runs}"


def test_the_writer_thread_is_named_and_does_not_hold_the_process(tmp_path: Path) -> None:
    path = create_run_dir(tmp_path, "thread", time.localtime())
    # no workloads yet
    before = set(
        threading.enumerate()
    )  # another test's recorder may still be closing on a loaded box
    rec = Recorder(
        path,
        RunMeta.from_json({"schema": 1, "label": "thread", "status": "recording", "workloads": []}),
    )
    writers = [t for t in set(threading.enumerate()) - before if t.name == "gpumon-recorder"]
    assert len(writers) == 1 and writers[0].daemon
    rec.close(1.0)
    assert not writers[0].is_alive()  # close waits for its writer
    meta = json.loads((path / "run.json").read_text())
    assert meta["workloads"] == [] and meta["mode"] == "exclusive" and meta["status"] == "complete"
