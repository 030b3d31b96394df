"""``gpumon experiment --out``: its outputs are never written through a symlink, nor into another folder's files
without ``--force``, and one experiment writes a folder at a time (the others are told who holds it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumon.experiments.runner.outlock import LOCK_FILE, FolderBusy, FolderLock, holder_text
from tests.helpers import gpumon, one_line_error, tiny_pairs_spec

SPEC = tiny_pairs_spec("tiny_pairs", "Tiny pairs", "Does fcn beside gemm pay on this machine?", 3)


def experiment(tmp_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    spec = tmp_path / "tiny_pairs.toml"
    spec.write_text(SPEC)
    env = {"NO_COLOR": "1", "GPUMON_PYTHON": sys.executable}
    return gpumon("experiment", str(spec), "--out", str(out), "--device", "cpu", *extra, env=env)


@pytest.mark.parametrize("name", ["results.md", "predicted.md"])
@pytest.mark.parametrize("force", [False, True])
def test_a_symlinked_output_is_refused_before_any_cell_runs(tmp_path, name, force):
    out = tmp_path / "exp"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (out / name).symlink_to(victim)
    err = one_line_error(experiment(tmp_path, out, *(["--force"] if force else [])))
    assert f"{out / name} is a symbolic link: not written through" in err
    assert victim.read_text() == "precious"
    assert not (out / "runs").exists() and not (out / "cells.json").exists(), "no cell ran"


def test_a_folder_that_is_not_the_experiments_needs_force(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "results.md").write_text("my own results")
    err = one_line_error(experiment(tmp_path, out))
    assert f"{out} holds results.md and is not this experiment's folder (no cells.json)" in err
    assert "--force" in err
    assert (out / "results.md").read_text() == "my own results"
    assert not (out / "cells.json").exists()


def test_a_second_experiment_into_a_held_folder_is_told_who_holds_it(tmp_path):
    out = tmp_path / "exp"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from gpumon.experiments.runner.outlock import FolderLock\n"
            "lock = FolderLock.take(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()",
            str(out),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        err = one_line_error(experiment(tmp_path, out))
        assert f"{out} is being written by another experiment (pid {holder.pid} of " in err
        assert "wait for it to end, or choose another --out" in err
        assert not (out / "cells.json").exists()
    finally:
        holder.communicate("")  # EOF: the holder exits, and its lock goes with it
    with FolderLock.take(
        out
    ) as lock:  # free again once its holder has gone (even without a release)
        assert lock.fd is not None


def test_the_lock_is_held_by_the_file_not_by_what_it_says(tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    (out / LOCK_FILE).write_text('{"pid": 1, "user": "root", "host": "x", "command": "forged"}')
    with FolderLock.take(out):  # a note nobody holds: not a holder
        with pytest.raises(FolderBusy, match=f"pid {os.getpid()} of "):
            FolderLock.take(out)


def test_a_symlinked_lock_file_is_refused(tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (out / LOCK_FILE).symlink_to(victim)
    err = one_line_error(experiment(tmp_path, out))
    assert f"{out / LOCK_FILE} is a symbolic link: not written through" in err
    assert victim.read_text() == "precious"


@given(st.binary(max_size=600) | st.text(max_size=300).map(str.encode))
def test_a_holders_note_is_data_printed_without_control_characters(note):
    text = holder_text(note)
    assert text.isprintable(), text


def test_an_experiment_replaces_its_own_outputs_and_others_only_with_force(tmp_path):
    from gpumon.experiments.runner.manifest import Manifest
    from gpumon.experiments.study.results import Context
    from gpumon.safewrite import UnsafeDestination

    def context(manifest: Manifest, force: bool = False) -> Context:
        return Context(None, None, "tiny", "cpu", [], manifest, force=force)  # type: ignore[arg-type]

    out = tmp_path / "exp"
    out.mkdir()
    (out / "results.md").write_text("someone's")
    fresh = Manifest.open(out, {"name": "x"})  # no cells.json: not this experiment's folder
    assert not fresh.own
    with pytest.raises(UnsafeDestination, match="already exists"):
        context(fresh).output_text("results.md", "new\n")
    assert (out / "results.md").read_text() == "someone's"
    context(fresh, force=True).output_text("results.md", "forced\n")
    assert (out / "results.md").read_text() == "forced\n"
    fresh.save()  # now the experiment's: what it wrote (predicted.csv twice with --predict) it replaces
    context(fresh).output_text("results.md", "again\n")
    assert (out / "results.md").read_text() == "again\n"
    resumed = Manifest.open(out, {"name": "x"})  # the folder holds this experiment's cells.json
    assert resumed.own
    context(resumed).output_text("results.md", "resumed\n")
    assert (out / "results.md").read_text() == "resumed\n"
