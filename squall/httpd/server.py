"""The HTTP server: uvicorn serving an app (nimbus's and local mode's squall.ui.app, a DRPC
server's, a logviewer's) on an event loop in a thread of its own, so that a threaded daemon
(nimbus) or local mode runs it beside its other work.
TLS and the connection limits are squall.httpd.connections'."""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import structlog
import uvicorn
from starlette.types import ASGIApp

from squall.errors import ConfigError
from squall.httpd.connections import Door, Doorman, Limits
from squall.security import tls
from squall.security.keyring import KeyringWatch, keyring_path

log = structlog.get_logger("squall.httpd.server")

STOP_GRACE_SECS = 5.0  # requests being served when the server stops may finish within this
BACKLOG = 128


def tls_for_conf(conf: dict[str, Any]) -> ssl.SSLContext | None:
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


class HttpServer:
    """``app`` on ``host:port`` (0: one the OS picks), bound at construction."""

    def __init__(self, app: ASGIApp, host: str, port: int, *, tls_context: ssl.SSLContext | None = None,
                 limits: Limits | None = None, name: str = "squall-http") -> None:
        self.limits = limits or Limits()
        self.tls = tls_context
        self.doorman = Doorman(self.limits, tls_context)
        self.sock = socket.create_server((host, port), backlog=BACKLOG)
        self.sock.setblocking(False)
        # uvicorn's own log lines (a refused malformed request, startup) are ours to keep quiet.
        logging.getLogger("uvicorn.error").setLevel(logging.ERROR)
        config = uvicorn.Config(
            app, http=functools.partial(Door, doorman=self.doorman), lifespan="off", log_config=None,
            access_log=False, server_header=False, backlog=BACKLOG, ws="none",
            timeout_keep_alive=max(1, round(self.limits.stranger_secs)),
            timeout_graceful_shutdown=int(STOP_GRACE_SECS))
        self.server = uvicorn.Server(config)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def host(self) -> str:
        return str(self.sock.getsockname()[0])

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # noqa: BLE001 - reported by start(), logged for a later one
            self._failed = e
            log.exception("http server failed")

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve(sockets=[self.sock])

    def start(self, timeout: float = 30.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started and self._failed is None and self.thread.is_alive():
            if time.monotonic() > deadline:
                msg = "the HTTP server did not start"
                raise RuntimeError(msg)
            time.sleep(0.01)
        if not self.server.started:
            msg = f"the HTTP server did not start: {self._failed!r}"
            raise RuntimeError(msg)

    def stop(self) -> None:
        """Stops accepting, closes idle connections and strangers, lets requests being served
        finish (within STOP_GRACE_SECS), and ends the thread."""
        self.server.should_exit = True
        if self.loop is not None and self.thread.is_alive():
            try:
                self.loop.call_soon_threadsafe(self.doorman.close_all)
            except RuntimeError:  # the loop closed meanwhile
                pass
        if self.thread.is_alive():
            self.thread.join(STOP_GRACE_SECS + 5)
        self.sock.close()
