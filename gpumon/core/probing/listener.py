"""The probe listener: one thread reads every child's probe pipe and output pipe and publishes events.

It wakes at most once per period, chosen by the front end: ``GATHER_S`` (0.1 s) for a screen,
longer for a runner nobody watches (steps carry the child's own timestamps, so reading them
later loses nothing). Each probe flushes its batch every 100 ms on its own phase; waking per
batch would cost a thread wake-up per child per flush, and a wake-up's work runs on cold
caches on a busy host. A stream that fills its pipe faster than the period allows (a chatty
child, a fast pair) shortens the wait, down to ``GATHER_S``; each pipe is asked for
``PIPE_BYTES`` so that a burst of output never blocks its child. ``hurry`` reads at once
(a child exited: its last steps and EOF are waiting); ``read_now`` reads at once and waits for that read (a
screen about to draw: what the probes flushed is on the bus before the frame is built, with no wake-up of its own).
"""

from __future__ import annotations

import logging
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
from gpumon.core.records import probemsg
from gpumon.core.records.decode import Refused
from gpumon.core.records.model import (
    THREAD_DIED,
    LogLine,
    Notice,
    StepBatch,
    StepEvent,
    WorkloadMeta,
)

log = logging.getLogger(__name__)

READ_SIZE = 65536
MAX_LINE = probemsg.MAX_LINE
NOTICES_PER_JOB = (
    5  # refused probe messages said as notices, per job (their count: ``Listener.refused``)
)
GATHER_S = 0.1
PIPE_BYTES = (
    1 << 20
)  # Linux's default pipe-max-size; asked with F_SETPIPE_SZ, kept as it is where refused
DEFAULT_PIPE_BYTES = 65536


@dataclass
class _Stream:
    slot: str
    kind: str
    # a child gpumon launched: its steps end between its launch (CLOCK_MONOTONIC ns) and the read; None: a process
    # gpumon did not start (its probe's history may predate the watch)
    since_ns: int | None = None
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
    """Turns probe JSON lines into StepBatch/WorkloadMeta and output into LogLine, on one thread."""

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
        self._asked: list[threading.Event] = []  # read_now callers waiting for the next read
        # woken to loop again at once (new streams, hurry, stop), not only to read (read_now)
        self._hurried = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._warned: set[object] = set()
        self.refused: dict[str, int] = {}  # slot -> probe messages (or rows) refused
        self.failure: str | None = None  # why this thread died, if it did (the run is then failed)
        self.wakeups = 0

    def watch(self, fd: int, slot: str, kind: str, since_ns: int | None = None) -> threading.Event:
        """Read ``fd`` (``kind`` "probe" or "output") until EOF; the event is set at EOF. ``since_ns``: when the
        child writing it was launched (``time.monotonic_ns()``): a step row that ends before it, or after the line
        is read, is no step of this child (one such row would stretch its rate over hours) and is refused."""
        stream = _Stream(slot, kind, since_ns=since_ns)
        with self._lock:
            reading = self.failure is None
            if reading:
                self._pending.append((fd, stream))
        if (
            not reading
        ):  # nobody would read it: closed now, so its writer gets EPIPE instead of blocking
            os.close(fd)
            stream.closed.set()
        self._wake()
        return stream.closed

    def hurry(self) -> None:
        """Read every stream now instead of at the end of the period."""
        self._wake()

    def read_now(self, timeout_s: float) -> bool:
        """Read every stream now and wait, at most ``timeout_s``, until that read is done: whatever the children had
        written before this call is then published. False when it was not done in time or this thread is not reading.
        The period's own reads go on as before (the next one a period after this)."""
        done = threading.Event()
        with self._lock:
            if self.failure is not None or not self.is_alive():
                return False
            self._asked.append(done)
        self._signal()
        return done.wait(timeout_s)

    def stop(self) -> None:
        self._stopping.set()
        self._wake()

    def _wake(self) -> None:
        self._hurried = True
        self._signal()

    def _signal(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def run(self) -> None:
        """Read until stopped; a failure of this thread itself ends it with ``failure`` set (``_die``)."""
        try:
            self._loop()
            self._drain_all()
        except Exception as exc:  # noqa: BLE001 - never silently: the run is failed with the reason
            log.exception("probe listener failed")
            self._die(f"{type(exc).__name__}: {exc}")

    def _die(self, reason: str) -> None:
        """This thread cannot go on: say why (a THREAD_DIED notice: the run ends failed), and close every stream so
        that no child blocks on a pipe nobody reads and nobody waits for an EOF that would never be seen."""
        with self._lock:
            self.failure = reason
            pending, self._pending = self._pending, []
        self.bus.publish(
            Notice(
                self.clock.now(),
                f"the probe listener stopped ({reason}): steps from now on are not recorded",
                None,
                THREAD_DIED,
            )
        )
        streams = [(key.fd, key.data) for key in self._selector.get_map().values() if key.data]
        for fd, stream in [*streams, *pending]:
            try:
                self._selector.unregister(fd)
            except (KeyError, ValueError):
                pass
            try:
                os.close(fd)
            except OSError:
                pass
            stream.closed.set()

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stopping.is_set():
            selected = [key for key, _ in self._selector.select()]
            woke = time.monotonic()
            self.wakeups += 1
            with self._lock:
                asked, self._asked = self._asked, []
            wait = self.period_s
            woken = any(
                key.data is None for key in selected
            )  # new streams, hurry, stop or read_now
            if woken:
                os.read(self._wake_r, 4096)
                self._register_pending()  # new streams may hold data already
                if self._hurried:
                    self._hurried = False
                    wait = 0.0
            # read_now: what was written before it, in every stream, not only those ready when select returned
            keys = list(self._selector.get_map().values()) if asked else selected
            gathered = False
            for key in keys:
                if key.data is None:
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
            for done in asked:
                done.set()
            if wait:
                self._nap(max(min(self.period_s, GATHER_S), wait) - (time.monotonic() - woke))

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
        refused = self.refused.get(stream.slot, 0)
        if stream.kind == "probe" and refused > 1:
            self.bus.publish(
                Notice(
                    self.clock.now(),
                    f"ignored {refused} malformed probe messages or step rows in all",
                    stream.slot,
                )
            )
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
                try:
                    self._message(stream, line)
                except Exception as exc:  # noqa: BLE001 - a bug on one message must not cost the next ones
                    log.exception("probe message failed")
                    self._refused(stream.slot, f"internal error {type(exc).__name__}")

    def _message(self, stream: _Stream, line: bytes) -> None:
        """One probe line: its events published, or it is refused (counted, the first one per reason a notice)."""
        slot = stream.slot
        try:
            message = probemsg.decode(line)
        except Refused as exc:
            self._refused(slot, str(exc))
            return
        if isinstance(message, probemsg.Steps):
            if stream.since_ns is not None:
                message = probemsg.within(message, stream.since_ns, time.monotonic_ns())
            self._steps(slot, message)
        elif isinstance(message, probemsg.Meta):
            self.bus.publish(WorkloadMeta(slot, message.pid, message.info))
        elif message.refused:
            text = f"the probe dropped {message.refused} values it could not send (NaN, infinite, not JSON)"
            self.bus.publish(Notice(self.clock.now(), text, slot))

    def _steps(self, slot: str, message: probemsg.Steps) -> None:
        """The message's steps published as one batch (one bus call per message, not per step), then what it refused."""
        if message.rows:
            at, pid = self.clock.at, message.pid
            steps = [
                StepEvent(
                    slot,
                    pid,
                    row.step,
                    at(row.t_ns),
                    row.iter_ns / 1e9,
                    row.samples,
                    row.warmup,
                    row.copy_bytes,
                    row.copy_ns / 1e9,
                )
                for row in message.rows
            ]
            self.bus.publish(StepBatch(slot, tuple(steps)))
        for _ in range(message.bad_rows):
            self._refused(slot, message.reason)
        if message.dropped:
            self.bus.publish(
                Notice(
                    self.clock.now(),
                    f"probe dropped {message.dropped} steps (monitor too slow)",
                    slot,
                )
            )

    def _refused(self, slot: str, reason: str) -> None:
        """Count a refused message (or row); the first of each reason per job is a notice."""
        self.refused[slot] = self.refused.get(slot, 0) + 1
        said = sum(1 for key in self._warned if isinstance(key, tuple) and key[0] == slot)
        if (slot, reason) not in self._warned and said < NOTICES_PER_JOB:
            self._warned.add((slot, reason))
            self.bus.publish(
                Notice(self.clock.now(), f"ignored a malformed probe message: {reason}", slot)
            )
