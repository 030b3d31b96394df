"""The per-user runtime directory: rendezvous files that only their owner may read.

``$GPUMON_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/gpumon``, else ``/tmp/gpumon-UID``. It is
created mode 0700 and refused (``UserDirError``) when it exists but belongs to another user or
is readable by anyone else, so nothing gpumon publishes there is exposed beyond its owner.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpumon.safewrite import UnsafeDestination, refuse_foreign_link

ENV_RUNTIME_DIR = "GPUMON_RUNTIME_DIR"


class UserDirError(OSError):
    """The runtime directory cannot be made private to this user."""


def runtime_dir_path() -> Path:
    """Where the runtime directory is (not created)."""
    if os.environ.get(ENV_RUNTIME_DIR):
        return Path(os.environ[ENV_RUNTIME_DIR]).expanduser()
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "gpumon"
    return Path("/tmp") / f"gpumon-{os.getuid()}"


def runtime_dir(subdir: str | None = None) -> Path:
    """The runtime directory (or ``subdir`` in it), created 0700 and checked private; never created through a
    symbolic link another user owns (``$XDG_RUNTIME_DIR`` pointing into someone's folder)."""
    path = runtime_dir_path()
    try:
        refuse_foreign_link(path)
    except UnsafeDestination as exc:
        raise UserDirError(0, str(exc)) from None
    for directory in (path, path / subdir) if subdir else (path,):
        try:
            directory.mkdir(mode=0o700, parents=directory is path, exist_ok=True)
        except OSError as exc:
            raise UserDirError(
                exc.errno, f"cannot create {directory}: {exc.strerror or exc}"
            ) from None
        check_private(directory)
    return path / subdir if subdir else path


def check_private(path: Path) -> None:
    """Raise ``UserDirError`` unless ``path`` is a directory of ours that nobody else can open."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UserDirError(exc.errno, f"cannot inspect {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise UserDirError(0, f"{path} is a symbolic link, not a directory of yours; remove it")
    if not stat.S_ISDIR(info.st_mode):
        raise UserDirError(0, f"{path} is not a directory; remove it")
    if info.st_uid != os.getuid():
        raise UserDirError(
            0, f"{path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
        )
    if info.st_mode & 0o077:
        raise UserDirError(
            0,
            f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"chmod 700 it or remove it",
        )
