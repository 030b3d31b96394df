"""In-process publish/subscribe: every sample and event goes through one bus to its consumers."""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)

Subscriber = Callable[[object], None]


class Bus:
    """Delivers each published item to its subscribers on the publisher's thread.

    A subscriber names the record types it takes (none: every item), so a step is not offered to
    the consumers of device samples: at hundreds of steps a second, each call skipped counts.
    Subscribers must be quick (append to a buffer, set an event); a failing
    subscriber is logged and never stops the publisher or the other subscribers.
    """

    def __init__(self) -> None:
        self._subscribers: tuple[tuple[Subscriber, tuple[type, ...]], ...] = ()
        self._routes: dict[type, tuple[Subscriber, ...]] = {}
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber, *types: type) -> Callable[[], None]:
        """Add a subscriber of items of ``types`` (and their subclasses; every item when none); returns the
        function that removes it."""
        entry = (subscriber, types)
        with self._lock:
            self._subscribers = (*self._subscribers, entry)
            self._routes = {}

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = tuple(s for s in self._subscribers if s is not entry)
                self._routes = {}

        return unsubscribe

    def _route(self, kind: type) -> tuple[Subscriber, ...]:
        """The subscribers of ``kind``, in the order they subscribed (cached until the next change)."""
        with self._lock:
            route = tuple(
                s for s, types in self._subscribers if not types or issubclass(kind, types)
            )
            self._routes[kind] = route
        return route

    def publish(self, item: object) -> None:
        route = self._routes.get(type(item))
        if route is None:
            route = self._route(type(item))
        for subscriber in route:
            try:
                subscriber(item)
            except Exception:
                log.exception("bus subscriber %r failed on %s", subscriber, type(item).__name__)
