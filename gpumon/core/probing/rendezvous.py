"""The monitor's side of the probe rendezvous: find, clean and connect to the probes of this user.

A probed process that no monitor launched listens on ``<pid>.sock`` in
``runtime_dir("probes")`` (0700, checked private; ``gpumon.core.probing.probe`` makes it). An entry
whose process is gone, or whose socket nobody listens on (the process died by ``kill -9``, or
its PID now belongs to another process), is stale: it is removed by the monitor that finds it.
Protocol: docs/probe.md.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import psutil

from gpumon.core.probing.probe import PEERCRED, RENDEZVOUS_SUBDIR, SOCKET_SUFFIX
from gpumon.core.probing.userdir import UserDirError, runtime_dir

CONNECT_TIMEOUT_S = 2.0


def probes_dir() -> Path | None:
    """The rendezvous directory (created 0700), or None when it cannot be made private (``problem`` says why)."""
    try:
        return runtime_dir(RENDEZVOUS_SUBDIR)
    except UserDirError:
        return None


def problem() -> str | None:
    """Why the rendezvous directory cannot be used ("/tmp/gpumon-0 is open to other users (mode 777); chmod 700 it or
    remove it"), or None when it can: what ``gpumon wrap`` and ``--beside`` tell the user instead of a silent
    "no probe"."""
    try:
        runtime_dir(RENDEZVOUS_SUBDIR)
    except UserDirError as exc:
        return exc.strerror or str(exc)
    return None


def socket_path(directory: Path, pid: int) -> Path:
    return directory / f"{pid}{SOCKET_SUFFIX}"


def _alive(pid: int) -> bool:
    """The PID is a live process (a zombie is not); never signals it."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _entry_pid(name: str) -> int | None:
    """The PID of a rendezvous file name (``123.sock``, or a half-made ``.123.tmp``), else None."""
    stem = (
        name[1:-4]
        if name.startswith(".") and name.endswith(".tmp")
        else name.removesuffix(SOCKET_SUFFIX)
    )
    if stem == name or not stem.isdigit():
        return None
    return int(stem)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def probed_pids() -> list[int]:
    """PIDs of this user's processes with a probe rendezvous, after removing the entries of dead ones."""
    directory = probes_dir()
    if directory is None:
        return []
    found = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        pid = _entry_pid(name)
        if pid is None:
            continue
        if not _alive(pid):
            _remove(directory / name)
        elif name.endswith(SOCKET_SUFFIX):
            found.append(pid)
    return sorted(found)


def connect(pid: int, timeout: float = CONNECT_TIMEOUT_S) -> socket.socket | None:
    """A connection to the probe of ``pid``, or None: no rendezvous, or a stale one (then removed).

    The listener must be ``pid`` itself, run by this user (SO_PEERCRED).
    """
    directory = probes_dir()
    if directory is None:
        return None
    path = socket_path(directory, pid)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        peer_pid, uid, _ = PEERCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size)
        )
    except (FileNotFoundError, NotADirectoryError):
        sock.close()
        return None
    except (
        ConnectionRefusedError
    ):  # nobody listens: a live probe always does, from before its entry is visible
        sock.close()
        _remove(path)
        return None
    except OSError:  # a full backlog, a timeout: not stale, just not now
        sock.close()
        return None
    if peer_pid != pid or uid != os.getuid():
        sock.close()
        return None
    sock.settimeout(None)
    return sock
