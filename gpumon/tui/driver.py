"""The terminal driver: Textual's Linux driver with an input thread that sleeps until a key comes.

Textual's input thread polls: it wakes ten times a second to look for a key and for its own end, 0.08-0.09 % of a
core on the 2-core box while nobody types (observer_cost, docs/tui.md). This one blocks until the terminal or a
wake-up pipe has something to read; a timeout only while a lone escape waits to be told from the start of a
sequence (the parser's own timeout, as Textual's), and the pipe is written when the input is to end. Each run of
the thread has a pipe of its own, closed when it ends (a Ctrl+Z ends it, ``fg`` starts another).

Textual starts its terminal mode again on every SIGCONT, meant for the ``fg`` after a Ctrl+Z that stopped it; but a
terminal that hangs up sends SIGCONT with its SIGHUP, and ``kill -CONT`` sends one to a running app. A second input
thread then replaced the first, which nothing ended: a non-daemon thread, so the process outlived its quit (a viewer
outlived its closed terminal). Here the terminal mode starts only when it is not running.
"""

from __future__ import annotations

import os
import selectors
import threading
from codecs import getincrementaldecoder
from contextlib import contextmanager
from typing import Iterator

from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver


class WakingEvent(threading.Event):
    """An ``Event`` whose ``set`` also writes a byte to the pipe of the thread that waits on it, so that thread wakes
    from ``select``."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._wake_fd = -1

    @contextmanager
    def pipe(self) -> Iterator[int]:
        """For the waiting thread: the read end of a pipe that ``set`` writes to, until the block ends (closed then)."""
        read, write = os.pipe()
        os.set_blocking(write, False)
        with self._lock:
            self._wake_fd = write
        try:
            yield read
        finally:
            with self._lock:
                self._wake_fd = -1
            os.close(read)
            os.close(write)

    def set(self) -> None:
        super().set()
        # under the lock the pipe stays open: a closed one's number may name another file by now
        with self._lock:
            if self._wake_fd < 0:  # no thread waits
                return
            try:
                os.write(self._wake_fd, b"\0")
            except BlockingIOError:  # full: bytes are there to wake the reader already
                pass


def parser_timeout(parser: XTermParser) -> float | None:
    """How long ``select`` may wait before the parser's pending escape must be given up on (None: no limit)."""
    deadline = parser._timeout_time
    return None if deadline is None else max(0.0, deadline - get_time())


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` whose input thread wakes only for input, the parser's escape timeout, or its end."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.exit_event: WakingEvent = WakingEvent()

    def start_application_mode(self) -> None:
        """Textual's, unless it is running already (a SIGCONT with no Ctrl+Z before it)."""
        if self._key_thread is not None and self._key_thread.is_alive():
            return
        super().start_application_mode()

    def run_input_thread(self) -> None:
        """Wait for input (or the end) and dispatch events: Textual's loop, without its 0.1 s poll."""
        fileno = self.fileno
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        with self.exit_event.pipe() as wake, selectors.DefaultSelector() as selector:
            selector.register(fileno, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while not self.exit_event.is_set():
                for key, _ in selector.select(parser_timeout(parser)):
                    if key.fd == wake:
                        os.read(wake, 512)
                        continue
                    data = decode(os.read(fileno, 4096))
                    if not data:  # end of input (a closed terminal): nothing more to wait for there
                        selector.unregister(fileno)
                    for event in parser.feed(data) if data else ():
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        try:
            for _ in parser.feed(""):
                pass
        except (EOFError, ParseError):
            pass
