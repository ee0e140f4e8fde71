"""What stands between nimbus's API and the network: TLS, tokens, and limits.

* :class:`Gate` - who is asking (a bearer token checked against the keyring,
  re-read when it changes on disk, so a rotated token works without a restart)
  and whether they may (squall.security.authz), with an audit line per
  mutating request.
* :class:`GuardedHTTPServer` - the stdlib threading server, bounded: at most
  ``nimbus.http.max.connections`` requests in service (a connection past that is
  answered 503 at once, never queued behind a slow one), and a deadline of
  ``nimbus.http.timeout.secs`` for a client to complete its TLS handshake and
  send its whole request.  A client that dribbles its headers or body (the
  slow-loris attack) is cut off at the deadline, however often it sends a byte.
  The handshake runs in the request's thread, not the accepting one.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import structlog

from squall.errors import ConfigError
from squall.security import authz, tls
from squall.security.keyring import KeyringWatch, keyring_path

log = structlog.get_logger("squall.nimbus.guard")
audit_log = structlog.get_logger("squall.audit")

REAP_EVERY_SECS = 0.5
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: 51\r\n\r\n{\"error\": \"nimbus is busy: too many open requests\"}")


class Unauthorized(Exception):
    """No valid credentials (401), or credentials that may not do this (403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Gate:
    """Authentication and authorization for one nimbus (or None when insecure)."""

    def __init__(self, conf: dict[str, Any], watch: KeyringWatch) -> None:
        self.conf = conf
        self.watch = watch

    @classmethod
    def for_conf(cls, conf: dict[str, Any]) -> Gate | None:
        if not conf["squall.secure"]:
            return None
        return cls(conf, KeyringWatch(keyring_path(conf)))

    def authenticate(self, header: str | None) -> str:
        if not header:
            raise Unauthorized(401, "authentication required: send 'Authorization: Bearer <token>' "
                                    "(the squall CLI does, from the keyring)")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized(401, "the Authorization header must be 'Bearer <token>'")
        user = self.watch.current().authenticate(token.strip())
        if user is None:
            raise Unauthorized(401, "invalid token")
        return user

    def authorize(self, user: str, action: str, topology: dict[str, Any] | None = None) -> None:
        decision = authz.decide(user, action, self.conf, topology)
        if not decision.allowed:
            raise Unauthorized(403, decision.reason)

    @staticmethod
    def audit(user: str | None, method: str, path: str, status: int, client: str, **extra: Any) -> None:
        audit_log.info("audit", user=user, method=method, path=path, status=status, client=client,
                       outcome="ok" if status < 400 else "refused", **extra)


def server_tls(conf: dict[str, Any]) -> ssl.SSLContext | None:
    """Nimbus's TLS context: the configured certificate, else the keyring's; None when insecure."""
    if not conf["squall.secure"]:
        return None
    cert, key = conf.get("nimbus.tls.cert.path"), conf.get("nimbus.tls.key.path")
    if bool(cert) != bool(key):
        msg = "set both nimbus.tls.cert.path and nimbus.tls.key.path, or neither (then the keyring's)"
        raise ConfigError(msg)
    if cert and key:
        for path in (cert, key):
            if not Path(path).is_file():
                msg = f"no such TLS file: {path}"
                raise ConfigError(msg)
        return tls.server_context_from_files(cert, key)
    return tls.server_context(*KeyringWatch(keyring_path(conf)).current().server_cert())


class GuardedHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: Any, *, max_connections: int,
                 timeout_secs: float, tls_context: ssl.SSLContext | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.max_connections = max_connections
        self.timeout_secs = timeout_secs
        self.tls_context = tls_context
        self.now = now
        self.refused_busy = 0
        self.timed_out = 0
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._reading: dict[socket.socket, float] = {}  # connection -> deadline to finish its request
        self._stopped = threading.Event()
        super().__init__(address, handler)
        self._reaper = threading.Thread(target=self._reap, name="nimbus-http-reaper", daemon=True)
        self._reaper.start()

    @property
    def scheme(self) -> str:
        return "https" if self.tls_context is not None else "http"

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused_busy += 1
            try:
                request.settimeout(0.5)
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        deadline = self.now() + self.timeout_secs
        try:
            self.reading(request, deadline)
            if self.tls_context is not None:
                request.settimeout(self.timeout_secs)
                try:
                    wrapped = self.tls_context.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError) as e:
                    log.debug("tls handshake failed", client=client_address[0], error=str(e))
                    self.shutdown_request(request)
                    return
                finally:
                    self.done_reading(request)
                request = wrapped
                self.reading(request, deadline)
            super().process_request_thread(request, client_address)
        finally:
            self.done_reading(request)
            self._slots.release()

    def reading(self, conn: socket.socket, deadline: float) -> None:
        """``conn`` must finish sending its request by ``deadline``."""
        with self._lock:
            self._reading[conn] = deadline

    def done_reading(self, conn: socket.socket) -> None:
        """The request is in: what follows (a submit's verification) has no deadline here."""
        with self._lock:
            self._reading.pop(conn, None)

    def _reap(self) -> None:
        while not self._stopped.wait(REAP_EVERY_SECS):
            now = self.now()
            with self._lock:
                late = [c for c, deadline in self._reading.items() if deadline <= now]
                for conn in late:
                    del self._reading[conn]
            for conn in late:
                self.timed_out += 1
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # the handler's read returns, and it ends
                except OSError:
                    pass

    def server_close(self) -> None:
        self._stopped.set()
        super().server_close()
