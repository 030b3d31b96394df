"""In-process publish/subscribe: every sample and event goes through one bus to its consumers."""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)

Subscriber = Callable[[object], None]


class Bus:
    """Delivers each published item to every subscriber on the publisher's thread.

    Subscribers must be quick (append to a buffer, set an event); a failing
    subscriber is logged and never stops the publisher or the other subscribers.
    """

    def __init__(self) -> None:
        self._subscribers: tuple[Subscriber, ...] = ()
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns the function that removes it."""
        with self._lock:
            self._subscribers = (*self._subscribers, subscriber)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = tuple(s for s in self._subscribers if s is not subscriber)

        return unsubscribe

    def publish(self, item: object) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber(item)
            except Exception:
                log.exception("bus subscriber %r failed on %s", subscriber, type(item).__name__)
