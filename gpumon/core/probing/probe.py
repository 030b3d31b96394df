"""Child-side probe: a training process reports steps and copies to a monitor.

Two ways to meet a monitor (protocol: docs/probe.md):

* launched by gpumon: the monitor passes the write end of a pipe in ``GPUMON_PROBE_FD``;
* started by the user: the probe listens on ``<pid>.sock`` in the per-user runtime directory
  (``gpumon.core.probing.userdir``, 0700) and keeps its last ``RING_ROWS`` steps, so a monitor of the
  same user can attach at any time (``gpumon run --beside PID``) and gets the history first.

Events are buffered and written as versioned JSON lines at most every ``FLUSH_NS`` (or when
the buffer fills), with non-blocking writes: a step costs about a microsecond, a slow monitor
costs dropped batches (counted), a dead launching monitor turns the probe off, a departed
attached one leaves it waiting for the next. Nothing here may block or crash the trainer: a
rendezvous that cannot be made turns itself off quietly.
This module must not import torch at import time (the parent imports it).
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import math
import os
import select
import struct
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from gpumon.core.records.protocol import PROTOCOL_VERSION
from gpumon.core.probing.userdir import runtime_dir

ENV_FD = "GPUMON_PROBE_FD"
ENV_SLOT = "GPUMON_PROCESS"
ENV_WARMUP = "GPUMON_WARMUP"
ENV_RENDEZVOUS = "GPUMON_RENDEZVOUS"  # "off": no rendezvous without a launching monitor
ENV_AUTOPROBE = "GPUMON_AUTOPROBE"  # "1": `gpumon wrap` started the process (autoprobe/sitecustomize.py reads it too)
DEFAULT_WARMUP_STEPS = 5
FLUSH_NS = 100_000_000
MAX_ROWS_PER_BATCH = 512
MAX_PENDING_BYTES = 1 << 20
EXIT_DRAIN_S = 2.0
WELCOME_S = 10.0
RING_ROWS = 8192
# What one step can hold (a value beyond is no measurement and is dropped, counted): the monitor's bounds
# (core/records/probemsg.py) with room to spare.
MAX_SAMPLES = 1e12
MAX_ITER_S = 1e5
MAX_COPY_BYTES = float(2**48)
RENDEZVOUS_SUBDIR = "probes"
SOCKET_SUFFIX = ".sock"
BACKLOG = 8
PEERCRED = struct.Struct(
    "3i"
)  # struct ucred: pid, uid, gid (SO_PEERCRED, both sides of the rendezvous)


class _Sink:
    """One monitor reading the probe's lines: the launching monitor's pipe, or an attached socket."""

    def __init__(self, fd: int, sock: Any = None, flags: int = 0) -> None:
        self.fd = fd
        self.sock = sock
        self.flags = flags  # for a socket: MSG_NOSIGNAL | MSG_DONTWAIT, so a gone reader never SIGPIPEs the trainer
        self.pending = b""
        self.dropped = 0
        self.gone = False

    def queue(self, data: bytes, rows: int, carried: int = 0) -> None:
        """Queue a line carrying ``rows`` steps and the count of ``carried`` earlier drops; drop it when full."""
        if len(self.pending) + len(data) > MAX_PENDING_BYTES:
            self.dropped += rows + carried
            return
        self.pending += data
        self.drain()

    def drain(self) -> None:
        """Write what the reader can take now; a reader that is gone marks the sink ``gone``."""
        while self.pending and not self.gone:
            try:
                if self.sock is not None:
                    written = self.sock.send(self.pending, self.flags)
                else:
                    written = os.write(self.fd, self.pending)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.close()
                return
            self.pending = self.pending[written:]

    def close(self) -> None:
        self.gone = True
        self.pending = b""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass


class _Rendezvous:
    """The listening socket ``<pid>.sock`` of a process no monitor launched, and its history ring."""

    def __init__(self) -> None:
        # deferred: +0.003 s CPU (a quarter of the probe's import), for a rendezvous only
        import socket

        self.pid = os.getpid()
        directory = runtime_dir(RENDEZVOUS_SUBDIR)
        self.path = directory / f"{self.pid}{SOCKET_SUFFIX}"
        temporary = directory / f".{self.pid}.tmp"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                temporary.unlink()
            except FileNotFoundError:
                pass
            self.sock.bind(str(temporary))
            os.chmod(temporary, 0o600)
            self.sock.listen(BACKLOG)
            os.replace(
                temporary, self.path
            )  # listening before it is visible: a refused connect means stale
        except BaseException:
            self.sock.close()
            try:
                temporary.unlink()
            except OSError:
                pass
            raise
        self.ring: deque[list[Any]] = deque(maxlen=RING_ROWS)
        self._socket = socket

    def serve(self, welcome: Callable[[_Sink], None]) -> None:
        """Accept monitors on a thread of their own (blocked in accept: nothing added to a step), so one can
        attach at any time, even while the trainer does not step; ``welcome`` gets each one of this user."""
        threading.Thread(
            target=self._accept, args=(welcome,), name="gpumon-probe-rendezvous", daemon=True
        ).start()

    def _accept(self, welcome: Callable[[_Sink], None]) -> None:
        flags = self._socket.MSG_NOSIGNAL | self._socket.MSG_DONTWAIT
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed at exit
                return
            try:
                _, uid, _ = PEERCRED.unpack(
                    conn.getsockopt(
                        self._socket.SOL_SOCKET, self._socket.SO_PEERCRED, PEERCRED.size
                    )
                )
                conn.setblocking(False)
            except OSError:
                conn.close()
                continue
            if uid != os.getuid():
                conn.close()
                continue
            welcome(_Sink(conn.fileno(), conn, flags))

    def close(self) -> None:
        """Stop listening and remove the entry (only the process that made it)."""
        if os.getpid() != self.pid:
            return
        try:
            self.path.unlink()
            self.sock.shutdown(self._socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self.sock.close()

    def close_in_fork(self) -> None:
        """A forked child (a DataLoader worker) must not hold the trainer's listening socket."""
        try:
            self.sock.close()
        except OSError:
            pass


class _Channel:
    """Buffers step rows and writes them without ever blocking the trainer."""

    def __init__(
        self, fd: int | None, slot: str, warmup_steps: int, rendezvous: _Rendezvous | None = None
    ) -> None:
        self.slot = slot
        self.warmup_steps = warmup_steps
        self.pid = os.getpid()
        self.step = 0
        self.rows: list[list[Any]] = []
        self.sinks: list[_Sink] = []
        self.rendezvous = rendezvous
        self.ring = rendezvous.ring if rendezvous is not None else None
        self.info: dict[str, Any] | None = None
        self.started_ns = time.monotonic_ns()
        self.last_flush_ns = self.started_ns
        self.last_step_ns = self.started_ns
        self.copy_bytes = 0
        self.copy_ns = 0
        self.cuda_copies: list[tuple[int, Any, Any]] = []
        self.refused = (
            0  # values and messages dropped because they could not be sent (NaN, not JSON...)
        )
        self.lock = threading.Lock()
        if fd is not None:
            try:
                flags = fcntl.fcntl(fd, fcntl.F_GETFL)
                fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
                self.sinks.append(_Sink(fd))
            except OSError:
                pass
        self.recording = bool(self.sinks) or rendezvous is not None
        for sink in self.sinks:
            sink.queue(self._encode(self._hello()), 0)

    @property
    def enabled(self) -> bool:
        """A monitor reads this probe now."""
        return bool(self.sinks)

    def _hello(self) -> dict[str, Any]:
        hello = {
            "type": "hello",
            "process": self.slot,
            "t_ns": self.started_ns,
            "warmup_steps": self.warmup_steps,
        }
        if self.rendezvous is not None:
            hello.update(
                rendezvous=True, argv=list(sys.argv), steps=self.step, history=len(self.ring or ())
            )
        return hello

    @staticmethod
    def _encode(message: dict[str, Any]) -> bytes:
        message = {"v": PROTOCOL_VERSION, "pid": os.getpid(), **message}
        return (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()

    def _send(self, message: dict[str, Any]) -> None:
        if not self.sinks:
            return
        rows = len(message.get("rows", ()))
        try:
            data = self._encode(message)
        except (
            ValueError,
            TypeError,
            RecursionError,
        ):  # not JSON: dropped and counted, never raised
            self.refused += max(rows, 1)
            return
        for sink in self.sinks:
            if rows and sink.dropped:
                carried, sink.dropped = sink.dropped, 0
                sink.queue(self._encode({**message, "dropped": carried}), rows, carried)
            else:
                sink.queue(data, rows)
        self._forget_gone()

    def _forget_gone(self) -> None:
        if any(sink.gone for sink in self.sinks):
            self.sinks = [sink for sink in self.sinks if not sink.gone]
            self.recording = bool(self.sinks) or self.rendezvous is not None

    def _resolve_cuda_copies(self) -> None:
        for nbytes, start, end in self.cuda_copies:
            try:
                end.synchronize()
                copy_ns = int(start.elapsed_time(end) * 1e6)
            except Exception:  # noqa: BLE001 - the trainer's CUDA error is the trainer's, not raised here
                self.refused += 1
                continue
            self.copy_bytes += nbytes
            self.copy_ns += copy_ns
        self.cuda_copies.clear()

    def record_step(self, samples: Any, iter_s: Any, warmup: Any) -> None:
        if not self.recording:
            return
        now = time.monotonic_ns()
        # the common values (None, an int or float in range, a bool) pass inline; the rest go to _unusual
        if not (
            (samples is None or (type(samples) in _REALS and 0 <= samples <= MAX_SAMPLES))
            and (iter_s is None or (type(iter_s) in _REALS and 0 <= iter_s <= MAX_ITER_S))
            and (warmup is None or warmup is True or warmup is False)
        ):
            samples, iter_s, warmup = self._unusual(samples, iter_s, warmup)
        with self.lock:
            if self.cuda_copies:
                self._resolve_cuda_copies()
            iter_ns = int(iter_s * 1e9) if iter_s is not None else now - self.last_step_ns
            self.last_step_ns = now
            is_warmup = self.step < self.warmup_steps if warmup is None else warmup
            copy_ns = self.copy_ns if self.copy_bytes else None
            row = [self.step, now, iter_ns, samples, int(is_warmup), self.copy_bytes, copy_ns]
            if self.ring is not None:
                self.ring.append(row)
            if self.sinks:
                self.rows.append(row)
            self.step += 1
            self.copy_bytes = 0
            self.copy_ns = 0
            if len(self.rows) >= MAX_ROWS_PER_BATCH or now - self.last_flush_ns >= FLUSH_NS:
                self._flush_locked(now)

    def _unusual(self, samples: Any, iter_s: Any, warmup: Any) -> tuple[Any, Any, Any]:
        """A step's values that are not plain in-range numbers: converted (a numpy float, a 0/1 flag), or dropped
        (None: NaN, infinite, negative, not a number) and counted in ``refused``."""
        checked = (_amount(samples, MAX_SAMPLES), _amount(iter_s, MAX_ITER_S), _flag(warmup))
        with self.lock:
            self.refused += sum(value is _REFUSED for value in checked)
        return tuple(None if value is _REFUSED else value for value in checked)  # type: ignore[return-value]

    def add_copy(self, nbytes: Any, seconds: Any) -> None:
        if not self.sinks:
            return
        nbytes, seconds = _amount(nbytes, MAX_COPY_BYTES), _amount(seconds, MAX_ITER_S)
        with self.lock:
            if type(nbytes) is not float or type(seconds) is not float:
                self.refused += 1
                return
            self.copy_bytes += int(nbytes)
            self.copy_ns += int(seconds * 1e9)

    def add_cuda_copy(self, nbytes: Any, start: Any, end: Any) -> None:
        size = _amount(nbytes, MAX_COPY_BYTES)
        with self.lock:
            if type(size) is not float:
                self.refused += 1
                return
            self.cuda_copies.append((int(size), start, end))

    def _flush_locked(self, now: int) -> None:
        self.last_flush_ns = now
        if self.rows:
            message: dict[str, Any] = {"type": "steps", "rows": self.rows}
            self.rows = []
            self._send(message)
        else:
            for sink in self.sinks:
                sink.drain()
            self._forget_gone()

    def welcome(self, sink: _Sink) -> None:
        """A monitor attached: it gets the hello, the workload's meta and the history ring, then what comes next.

        Under the lock, after the batch in progress was sent to the others: the ring holds every step so far.
        """
        with self.lock:
            if self.rendezvous is None:
                sink.close()
                return
            self._flush_locked(time.monotonic_ns())
            sink.queue(self._encode(self._hello()), 0)
            if self.info is not None:
                sink.queue(self._encode({"type": "meta", "info": self.info}), 0)
            history = list(self.ring or ())
            for i in range(0, len(history), MAX_ROWS_PER_BATCH):
                batch = history[i : i + MAX_ROWS_PER_BATCH]
                sink.queue(
                    self._encode({"type": "steps", "rows": batch, "history": True}), len(batch)
                )
            if not sink.gone:
                self.sinks.append(sink)
        self._settle(sink)

    def _settle(self, sink: _Sink) -> None:
        """On the accepting thread: write the history out as the monitor reads it (more than a socket buffer holds),
        without waiting for the trainer's next step, for at most ``WELCOME_S``."""
        deadline = time.monotonic() + WELCOME_S
        while sink.pending and not sink.gone and time.monotonic() < deadline:
            try:
                select.select([], [sink.fd], [], max(0.0, deadline - time.monotonic()))
            except (OSError, ValueError):
                return
            with self.lock:
                sink.drain()

    def flush(self) -> None:
        with self.lock:
            self._flush_locked(time.monotonic_ns())

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            if (
                message.get("type") == "meta"
            ):  # each meta adds to what was said: the monitor gets it all
                info, dropped = _encodable(message.get("info") or {})
                self.refused += dropped
                self.info = {**(self.info or {}), **info}
                message = {**message, "info": self.info}
            self._send(message)

    def close(self) -> None:
        if os.getpid() != self.pid:
            return
        with self.lock:
            if self.rendezvous is not None:
                self.rendezvous.close()
                self.rendezvous = None
            self._flush_locked(time.monotonic_ns())
            for sink in self.sinks:
                bye = {"type": "bye", "steps": self.step, "dropped": sink.dropped}
                sink.queue(self._encode({**bye, "refused": self.refused}), 0)
            deadline = time.monotonic() + EXIT_DRAIN_S
            while any(s.pending and not s.gone for s in self.sinks) and time.monotonic() < deadline:
                waiting = [s.fd for s in self.sinks if s.pending and not s.gone]
                select.select([], waiting, [], max(0.0, deadline - time.monotonic()))
                for sink in self.sinks:
                    sink.drain()
            for sink in self.sinks:
                if sink.sock is not None:
                    sink.close()
            self.sinks = []
            self.recording = False


_REFUSED = object()  # a value the probe cannot send: dropped and counted (``_Channel.refused``)
_REALS = (int, float)


def _amount(value: Any, high: float) -> Any:
    """A real in [0, ``high``] as a float; None for None; ``_REFUSED`` for anything else (NaN, -1, "8", 1e400)."""
    if value is None:
        return None
    try:
        number = float(value) if not isinstance(value, (bool, str, bytes)) else math.nan
    except Exception:  # noqa: BLE001 - whatever the script's object raises (its __float__), never into the script
        return _REFUSED
    return number if 0 <= number <= high else _REFUSED


def _flag(value: Any) -> Any:
    """A warm-up flag: None, a bool, 0 or 1; ``_REFUSED`` for anything else."""
    if value is None or isinstance(value, bool):
        return value
    return bool(value) if type(value) is int and value in (0, 1) else _REFUSED


def _encodable(info: Any) -> tuple[dict[str, Any], int]:
    """``info``'s entries that JSON can carry (strict: no NaN or infinity), and how many were dropped."""
    if not isinstance(info, dict):
        return {}, 1
    kept: dict[str, Any] = {}
    for key, value in info.items():
        try:
            json.dumps({key: value}, allow_nan=False)
        except (ValueError, TypeError, RecursionError):
            continue
        kept[str(key)] = value
    return kept, len(info) - len(kept)


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


def _open_rendezvous() -> _Rendezvous | None:
    """This process's rendezvous, or None (switched off, or it cannot be made: quietly, never an error)."""
    if os.environ.get(ENV_RENDEZVOUS, "").lower() in ("off", "0", "no"):
        return None
    try:
        rendezvous = _Rendezvous()
    except Exception:  # noqa: BLE001 - a probe must never crash the trainer
        return None
    os.register_at_fork(after_in_child=rendezvous.close_in_fork)
    return rendezvous


def _open_from_env(inherit_fd: bool) -> _Channel:
    """The channel of this process; after a fork (``inherit_fd`` False) a disabled one, so only
    the process that opened the pipe or the rendezvous reports (DataLoader workers do not).

    Without ``GPUMON_PROBE_FD`` (no launching monitor) the process opens its rendezvous.
    """
    fd: int | None = None
    rendezvous = None
    if inherit_fd:
        try:
            fd = int(os.environ[ENV_FD])
            os.fstat(fd)
        except (KeyError, ValueError, OSError):
            fd = None
        if ENV_FD not in os.environ:
            rendezvous = _open_rendezvous()
    try:
        warmup = int(os.environ.get(ENV_WARMUP, DEFAULT_WARMUP_STEPS))
    except ValueError:
        warmup = DEFAULT_WARMUP_STEPS
    channel = _Channel(fd, os.environ.get(ENV_SLOT, "A"), max(0, warmup), rendezvous)
    if rendezvous is not None:
        rendezvous.serve(channel.welcome)
    atexit.register(channel.close)
    return channel


def enabled() -> bool:
    """True when a monitor reads this probe now (the launching monitor's pipe, or one attached to the rendezvous)."""
    return _get().enabled


def step(
    samples: float | None = None, *, iter_s: float | None = None, warmup: bool | None = None
) -> None:
    """Mark the end of one training step.

    ``iter_s`` defaults to the time since the previous ``step()``; ``warmup``
    defaults to "one of the first GPUMON_WARMUP steps" (5 unless set).
    """
    try:
        _get().record_step(samples, iter_s, warmup)
    except Exception:  # noqa: BLE001 - the probe never raises into the training script
        _count_failure()


_steps_from: str | None = None


def steps_from(source: str) -> None:
    """A framework callback (``gpumon.callbacks``) reports this process's steps from now on: the auto-probe's
    optimizer hook then stands aside, so no step is counted twice."""
    global _steps_from
    _steps_from = source


def steps_reported_by() -> str | None:
    """The framework callback that reports the steps, or None (the auto-probe's hook, or the script's own calls)."""
    return _steps_from


def add_copy(nbytes: int, seconds: float) -> None:
    """Account a host-to-device copy measured by the caller (bytes, seconds of the copy itself)."""
    try:
        _get().add_copy(nbytes, seconds)
    except Exception:  # noqa: BLE001
        _count_failure()


def _count_failure() -> None:
    """A call the probe could not carry out: counted in the channel's ``refused``, never raised."""
    if _channel is not None:
        _channel.refused += 1


@contextmanager
def copy(nbytes: int, device: str = "cpu") -> Iterator[None]:
    """Time a host-to-device copy of ``nbytes``.

    On ``cuda`` devices the copy is timed with CUDA events on the current stream
    and resolved at the next ``step()``, so the trainer is never synchronised here.
    """
    if not _get().enabled:
        yield
        return
    try:
        on_cuda = str(device).startswith("cuda")
    except Exception:  # noqa: BLE001 - a device object whose str() raises: timed on the host, never raised
        on_cuda = False
    if on_cuda:
        # never at import: the probe goes into scripts that may not use torch (+1.8 s CPU)
        import torch

        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        yield
        end.record()
        try:
            _get().add_cuda_copy(nbytes, start, end)
        except Exception:  # noqa: BLE001
            _count_failure()
        return
    began = time.perf_counter_ns()
    yield
    add_copy(nbytes, (time.perf_counter_ns() - began) / 1e9)


def meta(**info: Any) -> None:
    """Describe the workload (model, device, batch, parameters...) to the monitor; each call adds to (or replaces
    keys of) what earlier calls said. Keys gpumon reads: ``counts`` (what one step is: ``"optimizer steps"``),
    ``micro_batches`` (backward passes per step), ``training`` (True once the first backward pass ran). What JSON
    cannot carry (NaN, an infinity, an object) is dropped and counted, never raised."""
    try:
        _get().send({"type": "meta", "info": info})
    except Exception:  # noqa: BLE001
        _count_failure()


def flush() -> None:
    """Send buffered steps now (normally automatic, every 100 ms and at exit)."""
    try:
        _get().flush()
    except Exception:  # noqa: BLE001
        _count_failure()
