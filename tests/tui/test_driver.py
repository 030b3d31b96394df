"""The terminal driver's input thread sleeps until a key comes: keys, a lone escape and its end still arrive, and it
never polls (gpumon/tui/driver.py)."""

from __future__ import annotations

import os
import queue
import selectors
import signal
import threading
import tty

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver

from gpumon.tui import driver as driver_module
from gpumon.tui.app import GpumonApp
from gpumon.tui.driver import QuietLinuxDriver
from tests.tui.conftest import run_async

WAIT_S = 30.0  # the most a test waits for an event (never reached unless broken)


class Recording(QuietLinuxDriver):
    """The driver, its events collected instead of sent to an app."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.got: queue.Queue = queue.Queue()

    def process_message(self, message) -> None:
        self.got.put(message)


class CountingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """A selector that records the timeout of every ``select``."""

    timeouts: list[float | None] = []

    def select(self, timeout=None):
        CountingSelector.timeouts.append(timeout)
        return super().select(timeout)


@pytest.fixture
def terminal():
    """A pty (master, slave), and the signal handlers a Linux driver replaces, restored after."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = os.openpty()
    tty.setraw(
        slave
    )  # as Textual sets its terminal: each byte readable at once, not a line at a time
    yield master, slave
    os.close(master)
    os.close(slave)
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def next_key(driver: Recording) -> events.Key:
    while True:
        event = driver.got.get(timeout=WAIT_S)
        if isinstance(event, events.Key):
            return event


def test_the_app_uses_it_in_place_of_textuals_linux_driver():
    assert issubclass(QuietLinuxDriver, LinuxDriver)
    assert GpumonApp().driver_class is QuietLinuxDriver


@run_async
async def test_keys_and_a_lone_escape_arrive_and_the_thread_never_polls(terminal, monkeypatch):
    master, slave = terminal
    monkeypatch.setattr(driver_module.selectors, "DefaultSelector", CountingSelector)
    CountingSelector.timeouts = []
    driver = Recording(None)  # type: ignore[arg-type]
    driver.fileno = slave
    thread = threading.Thread(target=driver.run_input_thread)
    thread.start()
    try:
        os.write(master, b"q")
        assert next_key(driver).key == "q"
        idle = list(CountingSelector.timeouts)
        # nothing pending: each wait is without a timeout (Textual's own thread waits 0.1 s, ten times a second)
        assert idle and all(timeout is None for timeout in idle), idle
        os.write(
            master, b"\x1b"
        )  # a lone escape: told from a sequence's start by the parser's timeout
        assert next_key(driver).key == "escape"
        timed = [t for t in CountingSelector.timeouts[len(idle) :] if t is not None]
        assert timed and all(0 <= t <= 1.0 for t in timed), timed
    finally:
        driver.exit_event.set()
        thread.join(WAIT_S)
    assert not thread.is_alive()  # the end wakes it at once, not at a poll


@run_async
async def test_after_the_end_of_input_the_end_still_wakes_it():
    reader, writer = os.pipe()
    driver = Recording(None)  # type: ignore[arg-type]
    driver.fileno = reader
    thread = threading.Thread(target=driver.run_input_thread)
    thread.start()
    try:
        os.write(writer, b"x")
        assert next_key(driver).key == "x"
        os.close(writer)  # end of input (a closed terminal): the thread stops watching it
    finally:
        driver.exit_event.set()
        thread.join(WAIT_S)
        os.close(reader)
    assert not thread.is_alive()


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@run_async
async def test_each_run_of_the_thread_has_its_own_wake_pipe_closed_when_it_ends(terminal):
    """A Ctrl+Z ends the input thread and closes the driver; ``fg`` starts the thread again, which must still take
    keys and still end when told (the pipe was once the driver's, closed by ``close`` for good)."""
    master, slave = terminal
    driver = Recording(None)  # type: ignore[arg-type]
    driver.fileno = slave
    before = open_fds()
    for key in "ab":
        thread = threading.Thread(target=driver.run_input_thread)
        thread.start()
        try:
            os.write(master, key.encode())
            assert next_key(driver).key == key
        finally:
            driver.exit_event.set()
            thread.join(WAIT_S)
        assert not thread.is_alive()
        assert open_fds() == before  # its pipe closed with it
        driver.close()  # as a suspend does
        driver.exit_event.clear()  # as Textual's disable_input does after the join
    driver.exit_event.set()  # no thread waits: nothing is written (to a number another file may have now)
