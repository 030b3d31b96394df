"""Errors that say what failed: bad input exits 2, a machine that cannot carry out good input exits 1; both are one
line (``gpumon: error: …``) without a traceback."""

from __future__ import annotations

from pathlib import Path

from gpumon.errors import EnvironmentFailure, GpumonError, UsageError
from tests.helpers import gpumon

RUN = Path(__file__).parents[1] / "data" / "h100" / "20261123-032320-x-resnet50"


def test_the_two_kinds_and_their_statuses() -> None:
    assert issubclass(UsageError, GpumonError) and issubclass(EnvironmentFailure, GpumonError)
    assert (UsageError.exit_status, EnvironmentFailure.exit_status) == (2, 1)


def test_a_directory_that_cannot_be_written_is_exit_1_and_a_missing_run_exit_2(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    done = gpumon("export", str(RUN), "--csv", str(blocker / "out"))
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == f"gpumon: error: cannot create {blocker / 'out'}: Not a directory"
    missing = gpumon("export", str(tmp_path / "nothing"), "--csv", str(tmp_path / "out"))
    assert (
        missing.returncode == 2
        and missing.stderr.startswith("gpumon: error: ")
        and "Traceback" not in missing.stderr
    )
    assert len(missing.stderr.strip().splitlines()) == 1
