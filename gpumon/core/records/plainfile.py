"""The one way gpumon opens a file someone else may have put there: only a plain file, never blocking on it.

A run's tables and logs, run.json, a calibration, an experiment spec or a pairs CSV can be anything another user
(or a copied directory) left under that name: a FIFO nobody writes (``open`` waits forever), one a writer holds
open and never writes to, a symbolic link to ``/dev/zero`` (a read that never ends) or a folder. ``open_plain``
opens without blocking, then refuses whatever is not a regular file with an ``OSError`` whose ``strerror`` says so,
before a byte is read: the caller's own ``OSError`` handling turns it into its one line.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

NOT_PLAIN = "not a plain file"


def open_plain(path: Path | str, *, follow: bool = True) -> BinaryIO:
    """``path`` opened for reading in binary; OSError when it is missing, unreadable, not a regular file (a FIFO,
    a device, a socket, a folder: ``NOT_PLAIN``) or, with ``follow=False``, a symbolic link (ELOOP)."""
    fd, _ = _open_fd(path, follow)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_plain(path: Path | str, *, follow: bool = True, max_bytes: int = -1) -> bytes:
    """The bytes of the plain file ``path`` (``open_plain``'s checks), at most ``max_bytes`` (-1: all).

    Read through the descriptor, without a file object: ``gpumon runs`` reads thousands of small files, and the
    buffered reader with its second ``fstat`` cost as much as reading one.
    """
    fd, size = _open_fd(path, follow)
    try:
        return _read_at_most(fd, size, max_bytes)
    finally:
        os.close(fd)


def _open_fd(path: Path | str, follow: bool) -> tuple[int, int]:
    """A blocking descriptor of the plain file ``path`` and its size (``open_plain``'s refusals)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, NOT_PLAIN, str(path))
        os.set_blocking(fd, True)
        return fd, st.st_size
    except BaseException:
        os.close(fd)
        raise


def _read_at_most(fd: int, size: int, limit: int) -> bytes:
    """The descriptor's bytes up to its end or ``limit`` (-1: none), whichever comes first.

    Asks for the ``size`` ``fstat`` gave (and one byte more, to meet the end) rather than for ``limit``: a buffer of
    ``limit`` bytes (4 MiB for run.json) is allocated by every read that asks for it, which cost more than reading
    and parsing a small file (``gpumon runs`` reads thousands).
    """
    want = size + 1
    chunks: list[bytes] = []
    got = 0
    while limit < 0 or got < limit:
        chunk = os.read(fd, want if limit < 0 else min(want, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        want = 1 << 16  # then 64 KiB at a time: a file that grew while read
    return b"".join(chunks)
