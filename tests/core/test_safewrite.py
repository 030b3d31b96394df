"""gpumon.safewrite: the one way gpumon writes a file."""

from __future__ import annotations

import os

import pytest

from gpumon.safewrite import (
    UnsafeDestination,
    ensure_folder,
    open_new,
    replacing,
    write_bytes,
    write_text,
)


def test_replacing_writes_the_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "report.md"
    write_text(target, "old\n", replace=False)
    write_text(target, "new\n", replace=True)
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_an_existing_file_is_kept_unless_replace(tmp_path):
    target = tmp_path / "a.csv"
    target.write_text("mine")
    with pytest.raises(UnsafeDestination, match="already exists"):
        write_bytes(target, b"x", replace=False)
    assert target.read_text() == "mine"


@pytest.mark.parametrize("replace", [False, True])
def test_a_symlinked_destination_is_refused_and_its_target_untouched(tmp_path, replace):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").symlink_to(victim)
    with pytest.raises(UnsafeDestination, match="symbolic link"):
        write_text(tmp_path / "out" / "report.md", "overwritten", replace=replace)
    with pytest.raises(UnsafeDestination):
        open_new(tmp_path / "out" / "report.md")
    assert victim.read_text() == "precious"


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target, replace=True) as f:
        f.write("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_a_planted_temporary_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "steps.parquet"
    (tmp_path / f".steps.parquet.{os.getpid()}.0.tmp").symlink_to(victim)
    write_bytes(target, b"data", replace=False)
    assert target.read_bytes() == b"data" and victim.read_text() == "precious"


def test_a_folder_others_can_write_is_refused(tmp_path):
    shared = ensure_folder(tmp_path / "shared")
    shared.chmod(0o777)
    with pytest.raises(UnsafeDestination, match="other users"):
        write_text(shared / "x", "y", replace=False)
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot replace what we write
    write_text(shared / "x", "y", replace=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder another user owns")
def test_a_folder_of_another_user_is_refused_even_to_root(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 4321, 4321)
    with pytest.raises(UnsafeDestination, match="another user"):
        write_text(theirs / "steps.parquet", "x", replace=False)
    assert list(theirs.iterdir()) == []


def test_open_new_never_opens_an_existing_file(tmp_path):
    target = tmp_path / "steps.csv"
    with open_new(target) as f:
        f.write("a,b\n")
    with pytest.raises(FileExistsError):
        open_new(target)
    assert target.read_text() == "a,b\n"
