"""The Ray runner's pieces that need no cluster: claiming a core, and the line for a cluster out of reach."""

from __future__ import annotations

import fcntl
import io
import os
import socket
import tarfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumon.experiments.runner import rayrun


@pytest.fixture()
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(rayrun, "CORE_LOCKS", tmp_path)
    return tmp_path


def _hold_every_core(locks: Path) -> list[int]:
    """Lock every core this process may run on, as the workers of an earlier sweep would (fds to release)."""
    fds = []
    for core in sorted(os.sched_getaffinity(0)):
        fd = os.open(locks / f"core-{core}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fds.append(fd)
    return fds


def test_a_core_held_by_an_exiting_worker_is_claimed_once_released(locks: Path) -> None:
    held = _hold_every_core(locks)
    released = threading.Event()

    def release_first() -> None:
        time.sleep(0.5)
        os.close(held[0])
        released.set()

    threading.Thread(target=release_first, daemon=True).start()
    core, fd = rayrun.claim_core(wait_s=30)
    try:
        assert released.is_set()
        assert core == min(os.sched_getaffinity(0))
    finally:
        os.close(fd)
        for other in held[1:]:
            os.close(other)


def test_cores_held_past_the_wait_are_one_clear_error(locks: Path) -> None:
    held = _hold_every_core(locks)
    try:
        with pytest.raises(RuntimeError, match="held by another gpumon worker for 0.3 s"):
            rayrun.claim_core(wait_s=0.3)
    finally:
        for fd in held:
            os.close(fd)


def test_an_unreachable_address_hints_at_token_authentication() -> None:
    exc = ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379\nmore detail")
    line = rayrun.connect_error("10.0.0.1:6379", exc, {})
    assert "\n" not in line
    assert line.startswith("--ray: cannot reach a Ray cluster at 10.0.0.1:6379: Failed to connect")
    assert "RAY_AUTH_MODE=token" in line
    # in token mode already, or starting a local cluster: no hint
    assert "RAY_AUTH_MODE" not in rayrun.connect_error(
        "10.0.0.1:6379", exc, {"RAY_AUTH_MODE": "token"}
    )
    assert "RAY_AUTH_MODE" not in rayrun.connect_error(None, RuntimeError("no space"), {})


def test_a_dead_address_is_found_before_ray_is_asked() -> None:
    """Ray retries an address where nothing listens for minutes; a TCP probe says so at once."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert rayrun.unreachable(f"127.0.0.1:{port}") is None
    # the port is closed now: refused
    assert "refused" in (rayrun.unreachable(f"127.0.0.1:{port}") or "").lower()
    assert rayrun.unreachable("auto") is None and rayrun.unreachable("ray://head:10001") is None


def _tar(members: list[tuple[str, bytes | None, str | None]]) -> bytes:
    """A gzip tar of (name, content or None for a folder, link target or None) members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_a_cells_archive_unpacks_its_folders_and_files_and_skips_links(tmp_path: Path) -> None:
    """What a Ray worker ships back lands under the experiment directory as it was (on any Python 3.11: CI's
    3.11.2 has no tarfile.data_filter)."""
    data = _tar(
        [
            ("runs/c1", None, None),
            ("runs/c1/steps.csv", b"process,step\n", None),
            ("logs/c1.log", b"ran\n", None),
            ("runs/c1/link", None, "/etc/passwd"),
        ]
    )
    rayrun._unpack(data, tmp_path)
    assert (tmp_path / "runs/c1/steps.csv").read_bytes() == b"process,step\n"
    assert (tmp_path / "logs/c1.log").read_text() == "ran\n"
    assert not (tmp_path / "runs/c1/link").exists() and not (tmp_path / "runs/c1/link").is_symlink()


@pytest.mark.parametrize("name", ["../escaped", "runs/../../escaped", "/tmp/escaped-abs"])
def test_an_archive_member_outside_the_experiment_is_refused_before_a_byte_is_written(
    tmp_path: Path, name: str
) -> None:
    inside = tmp_path / "exp" / "inner"
    inside.mkdir(parents=True)
    with pytest.raises(rayrun.ArchiveOutside, match="outside the experiment directory"):
        rayrun._unpack(_tar([(name, b"x", None)]), inside)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["exp", "inner"]
    assert not Path("/tmp/escaped-abs").exists()


@given(st.lists(st.sampled_from(["a", "b", "..", ".", "", "/"]), min_size=1, max_size=6))
def test_every_member_path_is_inside_the_directory_or_refused(parts: list[str]) -> None:
    directory = Path("/exp/dir")
    name = "/".join(parts)
    try:
        target = rayrun._member_path(directory, name)
    except rayrun.ArchiveOutside:
        return
    assert os.path.normpath(target).startswith(str(directory) + os.sep) or target == directory
