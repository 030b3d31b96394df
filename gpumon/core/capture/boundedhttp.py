"""The ``--metrics`` endpoint's HTTP server: a thread per connection, but a bounded number of them.

Anyone who can reach the port can open connections: each one held open (idle, or sending a request a byte
at a time) would keep a thread forever with a plain threading server. Here a connection that sends nothing
for ``IDLE_TIMEOUT_S`` is closed, and at most ``MAX_CONNECTIONS`` are served at once: a new one closes the
oldest (a Prometheus scrape lasts milliseconds; what stays open longest is what is idle). So a scrape
still gets through however many idle sockets are open, and the server's threads stay bounded.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections import OrderedDict
from typing import Any, Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

MAX_CONNECTIONS = 16
IDLE_TIMEOUT_S = 10.0


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """No access log on the run's terminal."""


class BoundedServer(socketserver.ThreadingMixIn, WSGIServer):
    """A WSGI server with at most ``max_connections`` connections, each closed after ``idle_s`` of silence."""

    daemon_threads = True
    max_connections = MAX_CONNECTIONS
    idle_s = IDLE_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: OrderedDict[socket.socket, None] = OrderedDict()  # oldest first
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(self.idle_s)
        with self._open_lock:
            while len(self._open) >= self.max_connections:
                oldest, _ = self._open.popitem(last=False)
                try:
                    oldest.shutdown(socket.SHUT_RDWR)  # its thread reads the end and leaves
                except OSError:
                    pass
            self._open[request] = None
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that timed out or was closed is no error to print (the run's terminal stays clean)."""

    @property
    def connections(self) -> int:
        with self._open_lock:
            return len(self._open)


def serve(host: str, port: int, app: Callable[..., Any]) -> tuple[BoundedServer, threading.Thread]:
    """``app`` served on ``host:port`` (IPv4 or IPv6, as the address is) from a daemon thread."""
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]

    class Server(BoundedServer):
        address_family = family

    server = make_server(str(address[0]), port, app, Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="gpumon-metrics", daemon=True)
    thread.start()
    return server, thread
