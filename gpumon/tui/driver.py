"""The terminal driver: Textual's Linux driver with an input thread that sleeps until a key comes.

Textual's input thread polls: it wakes ten times a second to look for a key and for its own end, 0.08-0.09 % of a
core on the 2-core box while nobody types (observer_cost, docs/tui.md). This one blocks until the terminal or a
wake-up pipe has something to read; a timeout only while a lone escape waits to be told from the start of a
sequence (the parser's own timeout, as Textual's), and the pipe is written when the input is to end.
"""

from __future__ import annotations

import os
import selectors
import threading
from codecs import getincrementaldecoder

from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver


class WakingEvent(threading.Event):
    """An ``Event`` whose ``set`` also writes a byte to a pipe, so a thread blocked in ``select`` on it wakes."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self.wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        if (
            self.wake_fd < 0
        ):  # the driver was closed: no thread to wake, and the number may name another file now
            return
        try:
            os.write(self.wake_fd, b"\0")
        except OSError:  # closed, or full: a byte is already there to wake the reader
            pass


def parser_timeout(parser: XTermParser) -> float | None:
    """How long ``select`` may wait before the parser's pending escape must be given up on (None: no limit)."""
    deadline = parser._timeout_time
    return None if deadline is None else max(0.0, deadline - get_time())


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` whose input thread wakes only for input, the parser's escape timeout, or its end."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        self.exit_event: WakingEvent = WakingEvent(self._wake_write)

    def run_input_thread(self) -> None:
        """Wait for input (or the end) and dispatch events: Textual's loop, without its 0.1 s poll."""
        fileno, wake = self.fileno, self._wake_read
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        with selectors.DefaultSelector() as selector:
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

    def close(self) -> None:
        super().close()
        self.exit_event.wake_fd = -1
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass
