"""Strangers holding idle connections cannot lock users out of nimbus.

A real secure dev cluster's nimbus (TLS, tokens) on 127.0.0.1: 64 idle connections - plain
sockets that never send a byte, and sockets that finish their TLS handshake and then send
nothing - far more than ``nimbus.http.max.connections``; meanwhile a client with a token
gets every answer.  The strangers are turned away (the oldest first, with a 503 over TLS
once their handshake is done) or closed at their deadline, and no thread serves them."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from squall.cli.client import credentials, http_client
from squall.cli.devcluster import DevCluster
from squall.security import tls
from squall.security.keyring import Keyring

IDLE = 64
TLS_IDLE = 16
MAX_CONNECTIONS = 8
PER_ADDRESS = 32
STRANGER_SECS = 3

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = DevCluster(Path(tmp_path_factory.mktemp("idle")) / "c", supervisors=1, slots=1, conf={
        "nimbus.http.max.connections": MAX_CONNECTIONS,
        "nimbus.http.max.pending.per.address": PER_ADDRESS,
        "nimbus.http.handshake.timeout.secs": STRANGER_SECS,
    })
    try:
        c.start()
        yield c
    finally:
        c.stop()


def drain(sock: socket.socket | ssl.SSLSocket, until: float) -> bytes | None:
    """What the server sent before it closed the connection; None if it was still open at ``until``."""
    out = b""
    while True:
        sock.settimeout(max(0.05, until - time.monotonic()))
        try:
            chunk = sock.recv(4096)
        except (TimeoutError, socket.timeout):
            return None
        except (ssl.SSLError, OSError):
            return out
        if not chunk:
            return out
        out += chunk


def test_64_idle_connections_do_not_starve_a_client_with_a_token(cluster: DevCluster) -> None:
    port = cluster.nimbus_ports[0]
    nimbus = psutil.Process(cluster.procs["nimbus-0"].pid)
    threads_before = nimbus.num_threads()
    context = tls.client_context(ca_pem=Keyring.load(cluster.keyring_file).ca_pem)
    idle: list[socket.socket | ssl.SSLSocket] = []
    try:
        # Strangers that finish TLS and say nothing (each handshake done is the server's progress),
        for _ in range(TLS_IDLE):
            raw = socket.create_connection(("127.0.0.1", port), timeout=30)
            idle.append(context.wrap_socket(raw, server_hostname="127.0.0.1"))
        # then strangers that never even begin TLS: 64 in all, eight times the request budget.
        for _ in range(IDLE - TLS_IDLE):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        assert len(idle) == IDLE > MAX_CONNECTIONS

        token, client_context = credentials(cluster.conf)
        headers = {"Authorization": f"Bearer {token}"}
        # A user with a token: requests on fresh connections, and on one kept alive.
        for _ in range(5):
            with http_client(client_context, timeout=30) as client:
                response = client.get(f"{cluster.nimbus_url}/api/v1/cluster/summary", headers=headers)
            assert response.status_code == 200, response.text
            assert response.json()["supervisors"] == 1
        with http_client(client_context, timeout=30) as client:
            for path in ("/api/v1/topology/summary", "/api/v1/nimbus/summary", "/api/v1/cluster",
                         "/api/v1/topologies", "/metrics"):
                response = client.get(cluster.nimbus_url + path, headers=headers)
                assert response.status_code == 200, (path, response.text)
        # No thread per stranger: the handshakes and idle sockets live on the event loop.
        assert nimbus.num_threads() < threads_before + MAX_CONNECTIONS

        # Every stranger is gone by its deadline: turned away (a TLS one told it is busy) or timed out.
        deadline = time.monotonic() + STRANGER_SECS * 4
        answers = [drain(sock, deadline) for sock in idle]
        assert all(answer is not None for answer in answers), "a stranger outlived its deadline"
        busy = [a for a in answers[:TLS_IDLE] if a]
        assert busy, "no TLS stranger turned away was told it is busy"
        for answer in busy:
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503") and "busy" in json.loads(body)["error"], answer
    finally:
        for sock in idle:
            sock.close()
    assert cluster.dead() == []
