"""The probe listener: one thread reads every child's probe pipe and output pipe and publishes events.

It wakes at most once per period, chosen by the front end: ``GATHER_S`` (0.1 s) for a screen,
longer for a runner nobody watches (steps carry the child's own timestamps, so reading them
later loses nothing). Each probe flushes its batch every 100 ms on its own phase; waking per
batch would cost a thread wake-up per child per flush, and a wake-up's work runs on cold
caches on a busy host. A stream that fills its pipe faster than the period allows (a chatty
child, a fast pair) shortens the wait, down to ``GATHER_S``; each pipe is asked for
``PIPE_BYTES`` so that a burst of output never blocks its child. ``hurry`` reads at once
(a child exited: its last steps and EOF are waiting).
"""

from __future__ import annotations

import json
import logging
import math
import fcntl
import os
import select
import selectors
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.records.model import LogLine, Notice, StepEvent, WorkloadMeta
from gpumon.core.probing.probe import PROTOCOL_VERSION

log = logging.getLogger(__name__)

READ_SIZE = 65536
MAX_LINE = 1 << 20
GATHER_S = 0.1
PIPE_BYTES = (
    1 << 20
)  # Linux's default pipe-max-size; asked with F_SETPIPE_SZ, kept as it is where refused
DEFAULT_PIPE_BYTES = 65536


@dataclass
class _Stream:
    slot: str
    kind: str
    safe_bytes: int = DEFAULT_PIPE_BYTES // 4  # read before the pipe holds more than this
    buffer: bytes = b""
    closed: threading.Event = field(default_factory=threading.Event)


def _pipe_bytes(fd: int) -> int:
    """The pipe's capacity, raised to ``PIPE_BYTES`` where the kernel allows (a socket: the default)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass
    try:
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except OSError:
        return DEFAULT_PIPE_BYTES


class Listener(threading.Thread):
    """Turns probe JSON lines into StepEvent/WorkloadMeta and output into LogLine, on one thread."""

    def __init__(
        self,
        bus: Bus,
        clock: RunClock,
        period_s: float = GATHER_S,
        on_gathered: Callable[[], None] | None = None,
    ) -> None:
        """``on_gathered``: called on this thread after each read that published something."""
        super().__init__(name="gpumon-listener", daemon=True)
        self.bus = bus
        self.clock = clock
        self.period_s = period_s
        self.on_gathered = on_gathered
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._pending: list[tuple[int, _Stream]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._warned: set[object] = set()
        self.wakeups = 0

    def watch(self, fd: int, slot: str, kind: str) -> threading.Event:
        """Read ``fd`` (``kind`` "probe" or "output") until EOF; the event is set at EOF."""
        stream = _Stream(slot, kind)
        with self._lock:
            self._pending.append((fd, stream))
        self._wake()
        return stream.closed

    def hurry(self) -> None:
        """Read every stream now instead of at the end of the period."""
        self._wake()

    def stop(self) -> None:
        self._stopping.set()
        self._wake()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def run(self) -> None:
        last = time.monotonic()
        while not self._stopping.is_set():
            ready = self._selector.select()
            woke = time.monotonic()
            self.wakeups += 1
            wait = self.period_s
            gathered = False
            for key, _ in ready:
                if (
                    key.data is None
                ):  # woken: new streams (they may hold data already), hurry or stop
                    os.read(self._wake_r, 4096)
                    self._register_pending()
                    wait = 0.0
                    continue
                got = 0
                while n := self._read(key.fd, key.data):
                    got += n
                if (
                    got
                ):  # back before this stream's pipe holds ``safe_bytes`` at the rate it just came
                    wait = min(wait, (woke - last) * key.data.safe_bytes / got)
                    gathered = True
            last = woke
            if gathered and self.on_gathered is not None:
                self.on_gathered()
            if wait:
                self._nap(max(min(self.period_s, GATHER_S), wait) - (time.monotonic() - woke))
        self._drain_all()

    def _nap(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when woken (a new stream, ``hurry``, ``stop``)."""
        if seconds > 0:
            select.select([self._wake_r], [], [], seconds)

    def _register_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for fd, stream in pending:
            os.set_blocking(fd, False)
            stream.safe_bytes = _pipe_bytes(fd) // 4
            self._selector.register(fd, selectors.EVENT_READ, stream)

    def _drain_all(self) -> None:
        """At stop: read what is already in the pipes, then close them."""
        self._register_pending()
        for key in list(self._selector.get_map().values()):
            if key.data is not None:
                while self._read(key.fd, key.data):
                    pass
                if not key.data.closed.is_set():
                    self._close(key.fd, key.data)

    def _read(self, fd: int, stream: _Stream) -> int:
        """Bytes read from ``fd`` (published as events); 0 when it is empty or closed."""
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return 0
        except OSError:
            data = b""
        if not data:
            if stream.buffer:
                self._lines(stream, [stream.buffer])
                stream.buffer = b""
            self._close(fd, stream)
            return 0
        *complete, stream.buffer = (stream.buffer + data).split(b"\n")
        if len(stream.buffer) > MAX_LINE:
            complete.append(stream.buffer)
            stream.buffer = b""
        self._lines(stream, complete)
        return len(data)

    def _close(self, fd: int, stream: _Stream) -> None:
        self._selector.unregister(fd)
        os.close(fd)
        stream.closed.set()

    def _lines(self, stream: _Stream, lines: list[bytes]) -> None:
        if stream.kind == "output":
            t = self.clock.now()
            for line in lines:
                self.bus.publish(
                    LogLine(stream.slot, t, line.decode("utf-8", "replace").rstrip("\r"))
                )
            return
        for line in lines:
            if line:
                self._message(stream.slot, line)

    def _message(self, slot: str, line: bytes) -> None:
        try:
            message = json.loads(line)
            version = message.get("v")
            kind = message.get("type")
            pid = int(message.get("pid", 0))
        except (ValueError, AttributeError, TypeError):
            self._notice_once(("bad", slot), slot, "ignored a malformed probe message")
            return
        if version != PROTOCOL_VERSION:
            self._notice_once(
                version, slot, f"probe protocol v{version} is not v{PROTOCOL_VERSION}; ignored"
            )
            return
        if kind == "steps":
            self._steps(slot, pid, message)
        elif kind == "meta" and isinstance(message.get("info"), dict):
            self.bus.publish(WorkloadMeta(slot, pid, message["info"]))

    def _steps(self, slot: str, pid: int, message: dict) -> None:
        at, publish, nan = (
            self.clock.at,
            self.bus.publish,
            math.nan,
        )  # per step, hundreds a second: positional
        try:
            for step, t_ns, iter_ns, samples, warmup, copy_bytes, copy_ns in message["rows"]:
                publish(
                    StepEvent(
                        slot,
                        pid,
                        int(step),
                        at(int(t_ns)),
                        int(iter_ns) / 1e9,
                        nan if samples is None else float(samples),
                        bool(warmup),
                        int(copy_bytes),
                        nan if copy_ns is None else int(copy_ns) / 1e9,
                    )
                )
        except (KeyError, TypeError, ValueError):
            self._notice_once(("bad", slot), slot, "ignored a malformed probe message")
            return
        if message.get("dropped"):
            self.bus.publish(
                Notice(
                    self.clock.now(),
                    f"probe dropped {message['dropped']} steps (monitor too slow)",
                    slot,
                )
            )

    def _notice_once(self, key: object, slot: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.bus.publish(Notice(self.clock.now(), text, slot))
