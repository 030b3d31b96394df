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
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, NOT_PLAIN, str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_plain(path: Path | str, *, follow: bool = True, max_bytes: int = -1) -> bytes:
    """The bytes of the plain file ``path`` (``open_plain``), at most ``max_bytes`` (-1: all)."""
    with open_plain(path, follow=follow) as f:
        return f.read(max_bytes)
