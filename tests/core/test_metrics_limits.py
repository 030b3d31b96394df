"""The ``--metrics`` server under idle connections: a scrape gets through, threads stay bounded, idle ones end."""

from __future__ import annotations

import socket
import threading
import urllib.request

import pytest

from gpumon.core.capture import boundedhttp
from gpumon.core.capture.metrics import MetricsServer
from gpumon.core.interference.live import LiveStats
from gpumon.core.records.bus import Bus
from tests.helpers import wait_for

IDLE = 3 * boundedhttp.MAX_CONNECTIONS  # far more idle sockets than the server serves at once


@pytest.fixture
def server():
    bus = Bus()
    metrics = MetricsServer("127.0.0.1", 0, bus, lambda: 1.0, LiveStats(bus=bus))
    try:
        yield metrics
    finally:
        metrics.close()


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def test_many_idle_connections_neither_block_a_scrape_nor_grow_the_threads(server):
    host, port = server._server.server_address[:2]
    before = threading.active_count()
    idle = []
    try:
        for _ in range(IDLE):
            idle.append(socket.create_connection((host, port), timeout=30))
        wait_for(
            lambda: server._server.connections == boundedhttp.MAX_CONNECTIONS,
            what="the server to hold its most connections",
        )
        assert "process_cpu_seconds_total" in _scrape(server.url)
        assert threading.active_count() <= before + boundedhttp.MAX_CONNECTIONS + 1
        assert server._server.connections <= boundedhttp.MAX_CONNECTIONS
        oldest = idle[: IDLE - boundedhttp.MAX_CONNECTIONS]
        assert all(s.recv(1) == b"" for s in oldest), "the oldest were closed to make room"
    finally:
        for s in idle:
            s.close()


def test_an_idle_connection_is_closed_after_the_idle_timeout(server, monkeypatch):
    monkeypatch.setattr(server._server, "idle_s", 0.2)
    host, port = server._server.server_address[:2]
    with socket.create_connection((host, port), timeout=30) as idle:
        idle.sendall(b"GET /metr")  # half a request, then nothing
        assert idle.recv(1) == b"", "the server closed the silent connection"
    wait_for(lambda: server._server.connections == 0, what="its thread to end")
    assert "process_cpu_seconds_total" in _scrape(server.url)
