"""Child-side probe: a training process reports steps and copies to the monitor.

The monitor passes the write end of a pipe in ``GPUMON_PROBE_FD``. Events are
buffered and written as versioned JSON lines at most every ``FLUSH_NS`` (or when
the buffer fills), with a non-blocking write: a step costs microseconds, a slow
monitor costs dropped batches (counted), a dead monitor turns the probe off.
Without ``GPUMON_PROBE_FD`` every call is a cheap no-op. Protocol: docs/probe.md.
This module must not import torch at import time (the parent imports it).
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import select
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

PROTOCOL_VERSION = 1
ENV_FD = "GPUMON_PROBE_FD"
ENV_PROCESS = "GPUMON_PROCESS"
ENV_WARMUP = "GPUMON_WARMUP"
DEFAULT_WARMUP_STEPS = 5
FLUSH_NS = 100_000_000
MAX_ROWS_PER_BATCH = 512
MAX_PENDING_BYTES = 1 << 20
EXIT_DRAIN_S = 2.0


class _Channel:
    """Buffers step rows and writes them without ever blocking the trainer."""

    def __init__(self, fd: int | None, process: str, warmup_steps: int) -> None:
        self.fd = fd
        self.process = process
        self.warmup_steps = warmup_steps
        self.pid = os.getpid()
        self.step = 0
        self.rows: list[list[Any]] = []
        self.pending = b""
        self.dropped = 0
        self.last_flush_ns = time.monotonic_ns()
        self.last_step_ns = self.last_flush_ns
        self.copy_bytes = 0
        self.copy_ns = 0
        self.cuda_copies: list[tuple[int, Any, Any]] = []
        self.lock = threading.Lock()
        if fd is not None:
            try:
                flags = fcntl.fcntl(fd, fcntl.F_GETFL)
                fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
            except OSError:
                self.fd = None
        self._send({"type": "hello", "process": process, "t_ns": self.last_step_ns, "warmup_steps": warmup_steps})

    @property
    def enabled(self) -> bool:
        return self.fd is not None

    def _send(self, message: dict[str, Any]) -> None:
        if self.fd is None:
            return
        message = {"v": PROTOCOL_VERSION, "pid": os.getpid(), **message}
        data = (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()
        if len(self.pending) + len(data) > MAX_PENDING_BYTES:
            self.dropped += len(message.get("rows", ())) + message.get("dropped", 0)
            return
        self.pending += data
        self._drain()

    def _drain(self) -> None:
        while self.pending and self.fd is not None:
            try:
                written = os.write(self.fd, self.pending)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.fd = None
                self.pending = b""
                return
            self.pending = self.pending[written:]

    def _resolve_cuda_copies(self) -> None:
        for nbytes, start, end in self.cuda_copies:
            end.synchronize()
            self.copy_bytes += nbytes
            self.copy_ns += int(start.elapsed_time(end) * 1e6)
        self.cuda_copies.clear()

    def record_step(self, samples: float | None, iter_s: float | None, warmup: bool | None) -> None:
        if self.fd is None:
            return
        now = time.monotonic_ns()
        with self.lock:
            if self.cuda_copies:
                self._resolve_cuda_copies()
            iter_ns = int(iter_s * 1e9) if iter_s is not None else now - self.last_step_ns
            self.last_step_ns = now
            is_warmup = self.step < self.warmup_steps if warmup is None else warmup
            copy_ns = self.copy_ns if self.copy_bytes else None
            self.rows.append([self.step, now, iter_ns, samples, int(is_warmup), self.copy_bytes, copy_ns])
            self.step += 1
            self.copy_bytes = 0
            self.copy_ns = 0
            if len(self.rows) >= MAX_ROWS_PER_BATCH or now - self.last_flush_ns >= FLUSH_NS:
                self._flush_locked(now)

    def add_copy(self, nbytes: int, seconds: float) -> None:
        if self.fd is None:
            return
        with self.lock:
            self.copy_bytes += int(nbytes)
            self.copy_ns += int(seconds * 1e9)

    def add_cuda_copy(self, nbytes: int, start: Any, end: Any) -> None:
        with self.lock:
            self.cuda_copies.append((int(nbytes), start, end))

    def _flush_locked(self, now: int) -> None:
        self.last_flush_ns = now
        if self.fd is None:
            self.rows.clear()
            return
        if self.rows:
            message: dict[str, Any] = {"type": "steps", "rows": self.rows}
            if self.dropped:
                message["dropped"] = self.dropped
                self.dropped = 0
            self.rows = []
            self._send(message)
        else:
            self._drain()

    def flush(self) -> None:
        with self.lock:
            self._flush_locked(time.monotonic_ns())

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self._send(message)

    def close(self) -> None:
        if os.getpid() != self.pid:
            return
        with self.lock:
            self._flush_locked(time.monotonic_ns())
            self._send({"type": "bye", "steps": self.step, "dropped": self.dropped})
            deadline = time.monotonic() + EXIT_DRAIN_S
            while self.pending and self.fd is not None and time.monotonic() < deadline:
                select.select([], [self.fd], [], max(0.0, deadline - time.monotonic()))
                self._drain()
            self.fd = None


_channel: _Channel | None = None
_channel_lock = threading.Lock()


def _get() -> _Channel:
    global _channel
    if _channel is None or _channel.pid != os.getpid():
        with _channel_lock:
            if _channel is None:
                _channel = _open_from_env(inherit_fd=True)
            elif _channel.pid != os.getpid():
                _channel = _open_from_env(inherit_fd=False)
    return _channel


def _open_from_env(inherit_fd: bool) -> _Channel:
    """The channel of this process; after a fork (``inherit_fd`` False) a disabled one, so only
    the process that opened the pipe reports (DataLoader workers do not)."""
    fd: int | None = None
    if inherit_fd:
        try:
            fd = int(os.environ[ENV_FD])
            os.fstat(fd)
        except (KeyError, ValueError, OSError):
            fd = None
    try:
        warmup = int(os.environ.get(ENV_WARMUP, DEFAULT_WARMUP_STEPS))
    except ValueError:
        warmup = DEFAULT_WARMUP_STEPS
    channel = _Channel(fd, os.environ.get(ENV_PROCESS, "A"), max(0, warmup))
    atexit.register(channel.close)
    return channel


def enabled() -> bool:
    """True when a monitor is listening (``GPUMON_PROBE_FD`` is a usable fd)."""
    return _get().enabled


def step(samples: float | None = None, *, iter_s: float | None = None, warmup: bool | None = None) -> None:
    """Mark the end of one training step.

    ``iter_s`` defaults to the time since the previous ``step()``; ``warmup``
    defaults to "one of the first GPUMON_WARMUP steps" (5 unless set).
    """
    _get().record_step(samples, iter_s, warmup)


def add_copy(nbytes: int, seconds: float) -> None:
    """Account a host-to-device copy measured by the caller (bytes, seconds of the copy itself)."""
    _get().add_copy(nbytes, seconds)


@contextmanager
def copy(nbytes: int, device: str = "cpu") -> Iterator[None]:
    """Time a host-to-device copy of ``nbytes``.

    On ``cuda`` devices the copy is timed with CUDA events on the current stream
    and resolved at the next ``step()``, so the trainer is never synchronised here.
    """
    if not _get().enabled:
        yield
        return
    if str(device).startswith("cuda"):
        import torch

        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        yield
        end.record()
        _get().add_cuda_copy(nbytes, start, end)
        return
    began = time.perf_counter_ns()
    yield
    _get().add_copy(nbytes, (time.perf_counter_ns() - began) / 1e9)


def meta(**info: Any) -> None:
    """Describe the workload (model, device, batch, parameters...) to the monitor."""
    _get().send({"type": "meta", "info": info})


def flush() -> None:
    """Send buffered steps now (normally automatic, every 100 ms and at exit)."""
    _get().flush()
