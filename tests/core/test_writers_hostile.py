"""Every writer of gpumon against what another user (or a copied directory) can plant where it writes: a symlink
to a file of theirs or ours, a folder another user owns, a folder others can write, a folder or FIFO where the
file goes. The property: the write succeeds or is refused in one line (a GpumonError: exit 1 or 2), never a
traceback, never a hang; the planted link's target is untouched; nothing is written outside the destination."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.analysis.compare import compare
from gpumon.analysis.report import write_report
from gpumon.core.store import calibration
from gpumon.core.store.recorder import Recorder, create_run_dir
from gpumon.core.store.runmeta import RunMeta
from gpumon.core.store.trace import export, load_run
from gpumon.errors import GpumonError
from gpumon.experiments.runner.manifest import Manifest
from gpumon.experiments.runner.outlock import FolderLock
from tests.tracegen import Job, write_run

ROOT = os.geteuid() == 0
PLANTS = ["symlink", "folder", "fifo", "shared-folder", *(["foreign-folder"] if ROOT else [])]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A run to export and a comparison to report, made once."""
    root = tmp_path_factory.mktemp("made")
    xa = write_run(root / "xa", [Job("A", "fcn:preset=tiny", phases=((12, 0.1),))])
    xb = write_run(root / "xb", [Job("A", "gemm:preset=tiny", phases=((12, 0.05),))])
    ab = write_run(
        root / "ab",
        [
            Job("A", "fcn:preset=tiny", phases=((12, 0.2),)),
            Job("B", "gemm:preset=tiny", phases=((12, 0.1),)),
        ],
    )
    runs = [load_run(p) for p in (xa, xb, ab)]
    return runs[0], compare(runs[:2], runs[2:]), runs


def _recorder(folder: Path, made) -> None:
    meta = {"schema": 1, "label": "x", "mode": "exclusive", "status": "recording", "workloads": []}
    Recorder(folder, RunMeta.from_json(meta)).close(0.0)


def _run_dir(folder: Path, made) -> None:
    import time

    _recorder(create_run_dir(folder, "x", time.gmtime(0)), made)


def _calibration(folder: Path, made) -> None:
    os.environ[calibration.ENV] = str(folder)
    try:
        calibration.save(calibration.Calibration("Some GPU", {"slice_s": 0.002}))
    finally:
        del os.environ[calibration.ENV]


WRITERS: dict[str, tuple[Callable[[Path, object], object], tuple[str, ...]]] = {
    "export": (lambda folder, made: export(made[0], folder, "csv"), ("steps.csv", "device.csv")),
    "export --force": (
        lambda folder, made: export(made[0], folder, "csv", overwrite=True),
        ("steps.csv", "host.csv"),
    ),
    "compare --report": (
        lambda folder, made: write_report(made[1], made[2], folder),
        ("report.md", "summary.json", "rates.csv"),
    ),
    "compare --report --force": (
        lambda folder, made: write_report(made[1], made[2], folder, replace=True),
        ("report.md", "slowdown.png"),
    ),
    "recorder": (_recorder, ("steps.csv", "run.json", ".reserve", "runner.lock", "logs")),
    "run --out": (_run_dir, ()),
    "calibration": (_calibration, ("Some_GPU.json",)),
    "experiment cells.json": (
        lambda folder, made: Manifest(folder, {"name": "x"}).save(),
        ("cells.json",),
    ),
    "experiment lock": (
        lambda folder, made: FolderLock.take(folder).release(),
        (".gpumon-experiment.lock",),
    ),
}


def _plant(folder: Path, name: str | None, kind: str, victim: Path) -> None:
    """Make ``folder`` (the destination) and plant ``kind`` at ``folder/name`` (or make the folder itself hostile)."""
    folder.mkdir()
    if kind == "shared-folder":
        folder.chmod(0o777)
    elif kind == "foreign-folder":
        os.chown(folder, 4321, 4321)
    elif name is None:
        return
    elif kind == "symlink":
        (folder / name).symlink_to(victim)
    elif kind == "folder":
        (folder / name).mkdir()
    elif kind == "fifo":
        os.mkfifo(folder / name)


def _snapshot(root: Path, skip: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` but ``skip``'s own, with a file's content."""
    seen: dict[str, bytes | None] = {}
    for path in root.rglob("*"):
        if path == skip or skip in path.parents:
            continue
        regular = stat.S_ISREG(path.lstat().st_mode)
        seen[str(path.relative_to(root))] = path.read_bytes() if regular else None
    return seen


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writer=st.sampled_from(sorted(WRITERS)),
    kind=st.sampled_from(PLANTS),
    pick=st.integers(min_value=0, max_value=10),
    victim_is_file=st.booleans(),
)
def test_a_writer_refuses_or_writes_only_its_own_files(made, writer, kind, pick, victim_is_file):
    write, names = WRITERS[writer]
    name = names[pick % len(names)] if names else None
    root = Path(tempfile.mkdtemp(prefix="gpumon-hostile-"))
    try:
        victim = root / "victim"
        victim.write_bytes(b"precious") if victim_is_file else None
        folder = root / "dest"
        _plant(folder, name, kind, victim)
        before = _snapshot(root, folder)
        try:
            write(folder, made)
        except GpumonError as exc:
            assert "\n" not in str(exc) and str(exc), repr(exc)
        else:
            assert kind not in ("shared-folder", "foreign-folder") or writer == "run --out", (
                f"{writer} wrote into a {kind}"
            )
            # a recorder with no job output never opens logs/: a link planted there is only left alone
            assert not (
                kind == "symlink" and name not in (None, "logs") and writer != "run --out"
            ), "wrote through a link"
        assert _snapshot(root, folder) == before, "something outside the destination changed"
        assert not victim_is_file or victim.read_bytes() == b"precious"
    finally:
        for path in (root, *root.rglob("*")):
            if not path.is_symlink():
                os.chmod(path, 0o700) if path.is_dir() else None
        shutil.rmtree(root, ignore_errors=True)
