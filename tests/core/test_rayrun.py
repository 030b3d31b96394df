"""The Ray runner's pieces that need no cluster: claiming a core, and the line for a cluster out of reach."""

from __future__ import annotations

import fcntl
import os
import socket
import threading
import time
from pathlib import Path

import pytest

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
