"""The one way gpumon writes a file.

Every file gpumon writes goes through here (``tests/core/test_safewrite.py`` fails when any other module
opens a file for writing). Two kinds of write:

- **Replacing** (:func:`replacing`, :func:`write_text`, :func:`write_bytes`): the content goes to a new
  temporary file in the destination's folder, created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (so it can be
  neither an existing file nor a planted symlink), is fsynced, then renamed over the destination: a reader
  sees the old file or the new one, never half of one, and a crash leaves the old file.
  :func:`replacing_together` does it for several files at once: none is replaced unless every one was written.
- **New** (:func:`open_new`, :func:`create_new_fd`): a file that must not exist yet (a live capture's
  tables, a log, a lock), created with ``O_EXCL | O_NOFOLLOW``: it is never an existing file or the target
  of a link.
- **Kept** (:func:`open_append`, :func:`open_lock`): a file kept between runs (a log appended to, a lock
  file), opened ``O_NOFOLLOW`` and refused unless it is a plain file.

Before either, the destination is checked: a destination that is a symbolic link, a folder another user
could write into (owned by another user, or writable by group or others without the sticky bit), or a folder
reached through a symbolic link another user owns (they could point it anywhere of yours), is
refused in one line (:class:`UnsafeDestination`, exit status 2) and nothing is written. A destination that
exists is replaced only when the caller says so (``replace=True``; commands pass their ``--force``).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal, TextIO, overload

from gpumon.errors import UsageError

NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeDestination(UsageError):
    """A destination gpumon refuses to write: a symlink, a folder others can write, or an existing file."""


def _foreign_link(folder: Path) -> str | None:
    """Why ``folder``'s path is unsafe to follow: one of its components is a symbolic link another user (not root)
    owns, so that user chooses where a write lands; None when none is."""
    me = os.geteuid()
    path = Path(os.path.abspath(folder))
    for part in (*reversed(path.parents), path):
        try:
            st = os.lstat(part)
        except OSError:
            return None  # missing from here on: nothing to follow
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (me, 0):
            return f"{part} is a symbolic link of another user (uid {st.st_uid}): not followed"
    return None


def refuse_foreign_link(folder: Path) -> None:
    """UnsafeDestination when ``folder``'s path goes through a symbolic link another user owns: call it before
    creating anything there (a folder made with ``mkdir`` would land wherever that user pointed the link)."""
    link = _foreign_link(folder)
    if link:
        raise UnsafeDestination(link)


def folder_problem(folder: Path) -> str | None:
    """Why gpumon must not write into ``folder`` (it may not exist yet: then None), else None."""
    link = _foreign_link(folder)
    if link:
        return link
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot use {folder}: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if st.st_uid != os.geteuid() and st.st_uid != 0:
        return f"{folder} belongs to another user (uid {st.st_uid}): not written into"
    shared = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if shared and not st.st_mode & stat.S_ISVTX:
        return f"{folder} can be written by other users (mode {stat.S_IMODE(st.st_mode):o}): not written into"
    return None


def check_destination(path: Path, *, replace: bool) -> None:
    """Refuse (UnsafeDestination) a destination that is a symlink, in an unsafe folder, or existing and not ``replace``."""
    problem = folder_problem(path.parent)
    if problem:
        raise UnsafeDestination(problem)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDestination(f"{path} is a symbolic link: not written through")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeDestination(f"{path} exists and is not a plain file: not replaced")
    if not replace:
        raise UnsafeDestination(f"{path} already exists: not replaced (--force replaces it)")


def ensure_folder(folder: Path, mode: int = 0o755) -> Path:
    """``folder``, created (with its parents) if missing; refused if it is unsafe to write into (a foreign link on
    its path before anything is created through it)."""
    refuse_foreign_link(folder)
    folder.mkdir(parents=True, exist_ok=True, mode=mode)
    problem = folder_problem(folder)
    if problem:
        raise UnsafeDestination(problem)
    return folder


def create_new_fd(path: Path, mode: int = 0o644) -> int:
    """A write-only descriptor of ``path``, which this call creates (FileExistsError if anything is there)."""
    problem = folder_problem(path.parent)
    if problem:
        raise UnsafeDestination(problem)
    if os.path.islink(path):
        raise UnsafeDestination(f"{path} is a symbolic link: not written through")
    return os.open(path, NEW_FLAGS, mode)


@overload
def open_new(path: Path, *, binary: Literal[False] = ..., mode: int = ...) -> TextIO: ...
@overload
def open_new(path: Path, *, binary: Literal[True], mode: int = ...) -> IO[bytes]: ...
def open_new(path: Path, *, binary: bool = False, mode: int = 0o644) -> TextIO | IO[bytes]:
    """``path`` created and opened for writing (UTF-8 text with ``\\n`` lines, or bytes)."""
    fd = create_new_fd(path, mode)
    if binary:
        return os.fdopen(fd, "wb")
    return os.fdopen(fd, "w", encoding="utf-8", newline="")


APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_kept(path: Path, flags: int, mode: int) -> int:
    """``path`` opened with ``flags`` (never through a symlink), created if missing; refused unless a plain file."""
    problem = folder_problem(path.parent)
    if problem:
        raise UnsafeDestination(problem)
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, mode)  # O_NONBLOCK: a planted FIFO does not block
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeDestination(f"{path} is a symbolic link: not written through") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):  # a folder, a FIFO nobody reads
            raise UnsafeDestination(
                f"{path} exists and is not a plain file: not written into"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeDestination(f"{path} exists and is not a plain file: not written into")
    os.set_blocking(fd, True)
    return fd


@overload
def open_append(path: Path, *, binary: Literal[False] = ..., mode: int = ...) -> TextIO: ...
@overload
def open_append(path: Path, *, binary: Literal[True], mode: int = ...) -> IO[bytes]: ...
def open_append(path: Path, *, binary: bool = False, mode: int = 0o644) -> TextIO | IO[bytes]:
    """``path`` opened to append to (a log kept across runs), created if missing."""
    fd = _open_kept(path, APPEND_FLAGS, mode)
    if binary:
        return os.fdopen(fd, "ab")
    return os.fdopen(fd, "a", encoding="utf-8", newline="")


def open_lock(path: Path, mode: int = 0o644) -> int:
    """A read-write descriptor of the lock file ``path`` (kept between holders), created if missing."""
    return _open_kept(path, LOCK_FLAGS, mode)


def scratch_file() -> TextIO:
    """An unnamed temporary text file to write and read back (a child's log): nothing to follow or leave."""
    return tempfile.TemporaryFile("w+", encoding="utf-8")


def _temporary(path: Path, mode: int) -> tuple[int, Path]:
    for attempt in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{attempt}.tmp")
        try:
            return os.open(tmp, NEW_FLAGS, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


@overload
def replacing(
    path: Path, *, replace: bool, binary: Literal[False] = ..., mode: int = ...
) -> contextlib.AbstractContextManager[IO[str]]: ...
@overload
def replacing(
    path: Path, *, replace: bool, binary: Literal[True], mode: int = ...
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
def replacing(
    path: Path, *, replace: bool, binary: bool = False, mode: int = 0o644
) -> contextlib.AbstractContextManager[IO[str]] | contextlib.AbstractContextManager[IO[bytes]]:
    """A file to write ``path``'s new content into; it replaces ``path`` when the block ends without error."""
    return _replacing(path, replace, binary, mode)


@contextlib.contextmanager
def _written(path: Path, replace: bool, binary: bool, mode: int) -> Iterator[tuple[IO, Path]]:
    """A new temporary file beside ``path`` and its name, fsynced when the block ends (removed on error)."""
    check_destination(path, replace=replace)
    fd, tmp = _temporary(path, mode)
    try:
        raw = os.fdopen(fd, "wb")
        f: IO = raw if binary else io.TextIOWrapper(raw, encoding="utf-8", newline="")
        with f:
            yield f, tmp
            f.flush()
            os.fsync(raw.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _rename(tmp: Path, path: Path, replace: bool) -> None:
    try:
        check_destination(path, replace=replace)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _replacing(path: Path, replace: bool, binary: bool, mode: int) -> Iterator[IO]:
    with _written(path, replace, binary, mode) as (f, tmp):
        yield f
    _rename(tmp, path, replace)


class Together:
    """Files written in turn that replace their destinations together when the batch ends, or none does."""

    def __init__(self, replace: bool) -> None:
        self.replace = replace
        self._written: list[tuple[Path, Path]] = []  # (temporary, destination)

    @contextlib.contextmanager
    def file(self, path: Path, *, binary: bool = False, mode: int = 0o644) -> Iterator[IO]:
        """A file to write ``path``'s new content into; it lands with the rest of the batch."""
        with _written(path, self.replace, binary, mode) as (f, tmp):
            self._written.append((tmp, path))
            yield f

    def _commit(self) -> None:
        for _, path in self._written:
            check_destination(path, replace=self.replace)
        while self._written:
            _rename(*self._written.pop(0), self.replace)

    def _discard(self) -> None:
        for tmp, _ in self._written:
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def replacing_together(*, replace: bool) -> Iterator[Together]:
    """A batch of files (``batch.file(path)``) that replace their destinations only if every one was written."""
    batch = Together(replace)
    try:
        yield batch
        batch._commit()
    except BaseException:
        batch._discard()
        raise


def write_text(path: Path, text: str, *, replace: bool, mode: int = 0o644) -> None:
    """Write ``text`` (UTF-8) as ``path``, atomically (see :func:`replacing`)."""
    with replacing(path, replace=replace, mode=mode) as f:
        f.write(text)


def write_bytes(path: Path, data: bytes, *, replace: bool, mode: int = 0o644) -> None:
    """Write ``data`` as ``path``, atomically (see :func:`replacing`)."""
    with replacing(path, replace=replace, binary=True, mode=mode) as f:
        f.write(data)
