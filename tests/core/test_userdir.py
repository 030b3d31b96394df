"""The per-user runtime directory is created private and refused when it is not."""

from __future__ import annotations

import os
import stat

import pytest

from gpumon.core.probing import userdir


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    path = tmp_path / "rt"
    monkeypatch.setenv(userdir.ENV_RUNTIME_DIR, str(path))
    return path


def test_created_0700_with_its_subdirectory(runtime) -> None:
    made = userdir.runtime_dir("probes")
    assert made == runtime / "probes"
    for path in (runtime, made):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_a_directory_open_to_others_is_refused(runtime) -> None:
    runtime.mkdir(mode=0o755)
    os.chmod(runtime, 0o755)
    with pytest.raises(userdir.UserDirError, match="open to other users"):
        userdir.runtime_dir()


def test_a_file_in_its_place_is_refused(runtime) -> None:
    runtime.write_text("")
    with pytest.raises(userdir.UserDirError):
        userdir.runtime_dir()


def test_xdg_runtime_dir_then_tmp(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(userdir.ENV_RUNTIME_DIR, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert userdir.runtime_dir_path() == tmp_path / "gpumon"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert userdir.runtime_dir_path() == __import__("pathlib").Path(f"/tmp/gpumon-{os.getuid()}")
