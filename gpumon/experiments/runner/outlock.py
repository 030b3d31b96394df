"""An experiment folder's lock: one experiment writes a folder at a time; a second is told who holds it.

The lock is an exclusive ``flock`` on ``DIR/.gpumon-experiment.lock`` (created through gpumon.safewrite:
never a symlink, never in a folder others can write). The file stays between experiments; only the lock
comes and goes, with its holder's process (a holder killed with -9 lets it go too). The holder writes who
it is into the file; a second experiment reads that as data (bounded, its text escaped) to say who holds
the folder. What the file says proves nothing: the lock does.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from gpumon.core.records.printable import printable
from gpumon.errors import EnvironmentFailure, UsageError
from gpumon.safewrite import ensure_folder, open_lock

LOCK_FILE = ".gpumon-experiment.lock"
HOLDER_BYTES = 4096  # what is read of a holder's note
FIELD_CHARS = 200  # of each of its fields


class FolderBusy(UsageError):
    """Another experiment holds the folder."""


def _me() -> dict[str, object]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {
        "pid": os.getpid(),
        "user": user,
        "host": socket.gethostname(),
        "command": shlex.join(sys.argv),
    }


def holder_text(note: bytes) -> str:
    """Who a holder's note says it is ("pid 12 of ana on box1: gpumon experiment q2"), or that it said nothing."""
    try:
        data = json.loads(note.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        return "a process that did not say who it is"

    def field(key: str) -> str:
        return printable(str(data.get(key, "?"))[:FIELD_CHARS])

    return f"pid {field('pid')} of {field('user')} on {field('host')}: {field('command')}"


@dataclass
class FolderLock:
    """The held lock of one experiment folder; ``release`` lets it go."""

    folder: Path
    fd: int | None

    @classmethod
    def take(cls, folder: Path) -> FolderLock:
        """Lock ``folder`` (created if missing) for this process; FolderBusy (one line, exit 2) if another holds it."""
        try:
            ensure_folder(folder)
            fd = open_lock(folder / LOCK_FILE)
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot write the experiment into {printable(folder)}: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            note = os.pread(fd, HOLDER_BYTES, 0)
            os.close(fd)
            raise FolderBusy(
                f"{printable(folder)} is being written by another experiment ({holder_text(note)}); "
                "wait for it to end, or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_me()).encode("utf-8"), 0)
        return cls(folder, fd)

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
