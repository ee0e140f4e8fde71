"""Who may hold a connection to the HTTP server, and for how long.

Every connection is a *stranger* from its accept until one of its requests presents a valid
token (insecure mode: until it sends a request the app serves; the UI's static files do not
count).  Strangers - in their TLS handshake, sending their first request, or idle - are
bounded three ways, all on the event loop (an idle socket costs no thread):

* a short deadline (``Limits.stranger_secs``) from the accept: past it a stranger is closed,
  however often it sends a byte (the slow-loris attack);
* at most ``Limits.per_address`` strangers per client address, and ``Limits.strangers`` in
  all: past either, the *oldest* stranger is turned away, so a new client (a user about to
  present a token) always gets its turn however many idle sockets someone holds;
* a stranger turned away after its handshake gets a busy answer (503, over TLS) first.

Every request, a user's too, must send its headers within ``Limits.request_secs``
(squall.httpd.answers bounds its body to the same).  The TLS handshake runs on the event loop
(``loop.start_tls``), with the stranger's deadline.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import h11
import structlog
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

log = structlog.get_logger("squall.httpd.connections")

CONNECTION = "squall.connection"  # the ASGI scope's extension naming a request's Door
BUSY_BODY = json.dumps({"error": "nimbus is busy: too many open connections"}).encode()
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(BUSY_BODY), BUSY_BODY))


@dataclass(frozen=True)
class Limits:
    request_secs: float = 30.0  # a request's headers, and its body, must arrive within this
    stranger_secs: float = 5.0  # a connection without a valid token is closed after this
    per_address: int = 128  # strangers at once from one address
    strangers: int = 512  # strangers at once in all

    @classmethod
    def for_conf(cls, conf: dict[str, Any]) -> Limits:
        request = float(conf["nimbus.http.timeout.secs"])
        return cls(request_secs=request,
                   stranger_secs=min(request, float(conf["nimbus.http.handshake.timeout.secs"])),
                   per_address=conf["nimbus.http.max.pending.per.address"],
                   strangers=conf["nimbus.http.max.pending"])


class Doorman:
    """The strangers, oldest first, in all and by address; every open connection.  Touched
    only on the server's event loop."""

    def __init__(self, limits: Limits, tls: ssl.SSLContext | None) -> None:
        self.limits = limits
        self.tls = tls
        self.doors: set[Door] = set()
        self.strangers: OrderedDict[Door, None] = OrderedDict()
        self.by_address: dict[str, OrderedDict[Door, None]] = {}
        self.turned_away = 0
        self.expired = 0

    def arrived(self, door: Door) -> None:
        self.doors.add(door)
        self.strangers[door] = None
        mine = self.by_address.setdefault(door.address, OrderedDict())
        mine[door] = None
        while len(mine) > self.limits.per_address:
            self.turn_away(next(iter(mine)))
        while len(self.strangers) > self.limits.strangers:
            self.turn_away(next(iter(self.strangers)))

    def trusted(self, door: Door) -> None:
        self.strangers.pop(door, None)
        mine = self.by_address.get(door.address)
        if mine is not None:
            mine.pop(door, None)
            if not mine:
                del self.by_address[door.address]

    def left(self, door: Door) -> None:
        self.trusted(door)
        self.doors.discard(door)

    def turn_away(self, door: Door) -> None:
        self.turned_away += 1
        self.trusted(door)  # no longer counted, whatever it does until it is gone
        door.turn_away()

    def close_all(self) -> None:
        for door in list(self.doors):
            door.close()


class Door(asyncio.Protocol):
    """One accepted connection, before and around its HTTP protocol: it counts the stranger,
    runs the TLS handshake, then hands the connection to :class:`GuardedH11`.  Made by
    uvicorn's protocol factory (``Config(http=partial(Door, doorman=...))``)."""

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None, *, doorman: Doorman) -> None:
        self.doorman = doorman
        self.loop = _loop or asyncio.get_event_loop()
        self.http = GuardedH11(config, server_state, app_state, _loop, door=self)
        self.raw: asyncio.BaseTransport | None = None
        self.address = "?"
        self.stranger = True
        self.handshaking = False
        self.gone = False
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport
        no_delay(transport)
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if peer else "?"
        self._deadline = self.loop.call_later(self.doorman.limits.stranger_secs, self._expire)
        self.doorman.arrived(self)
        if self.gone:
            return
        if self.doorman.tls is None:
            transport.set_protocol(self.http)
            self.http.connection_made(transport)  # type: ignore[arg-type]
            return
        transport.pause_reading()  # type: ignore[attr-defined] - nothing is read before start_tls
        self.handshaking = True
        self.loop.create_task(self._handshake(transport))

    async def _handshake(self, raw: Any) -> None:
        try:
            transport = await self.loop.start_tls(raw, self.http, self.doorman.tls, server_side=True,
                                                  ssl_handshake_timeout=self.doorman.limits.stranger_secs)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError, RuntimeError) as e:
            log.debug("tls handshake failed", client=self.address, error=str(e))
            raw.abort()
            self.left()
            return
        finally:
            self.handshaking = False
        if transport is None or self.gone:
            raw.abort()
            self.left()
            return
        self.http.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection died while this was still its protocol (before TLS began)."""
        self.left()

    def trusted(self) -> None:
        """A request on it presented a valid token (or needed none)."""
        if self.stranger:
            self.stranger = False
            if self._deadline is not None:
                self._deadline.cancel()
            self.doorman.trusted(self)

    def left(self) -> None:
        if not self.gone:
            self.gone = True
            if self._deadline is not None:
                self._deadline.cancel()
            self.doorman.left(self)

    def _expire(self) -> None:
        if self.stranger and not self.gone:
            self.doorman.expired += 1
            self.doorman.trusted(self)
            self.close(busy=False)

    def turn_away(self) -> None:
        self.stranger = False
        self.close(busy=True)

    def close(self, busy: bool = False) -> None:
        """Closed at once; a request being served finishes first, then its connection closes.
        ``busy``: one waiting for its request is told so (503) first."""
        http = self.http
        if http.transport is None:  # no TLS yet
            if self.raw is not None:
                self.raw.abort()  # type: ignore[attr-defined]
            self.left()
        elif http.serving():
            http.cycle.keep_alive = False
        elif not http.transport.is_closing():
            if busy and http.conn.their_state is h11.IDLE and not http.received:
                http.transport.write(BUSY)
            http.transport.close()


def no_delay(transport: asyncio.BaseTransport) -> None:
    """TCP_NODELAY on an accepted connection.  asyncio sets it only on sockets made with
    ``proto=IPPROTO_TCP``, which socket.create_server's (and so the ones it accepts) are
    not: a response's body then waits for the client's delayed ACK of its headers, 40 ms
    a request on a kept-alive connection."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # gone already
            pass


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers, its refusals of
    malformed requests in Storm's error shape, and the request's Door in the ASGI scope.

    H11Protocol is not uvicorn's public API, and none of its options (limit_concurrency,
    timeout_keep_alive, h11_max_incomplete_event_size) bounds a request's headers in time or
    an idle stranger: so pyproject.toml pins uvicorn to the releases tested, and
    tests/httpd/test_uvicorn_seam.py names what a release changed of what this relies on."""

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None, *, door: Door) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.door = door
        self.early: list[bytes] = []  # what TLS decrypted before connection_made
        self.received = False  # any byte of the current request
        self._headers_due: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect_request()
        if self.early:
            data = b"".join(self.early)
            self.early.clear()
            self.data_received(data)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            self.early.append(data)
            return
        self.received = True
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.door.left()
        if self._headers_due is not None:
            self._headers_due.cancel()
        if self.transport is not None:
            super().connection_lost(exc)

    def serving(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:  # a request's headers are in
            if self._headers_due is not None:
                self._headers_due.cancel()
            self.cycle.scope["extensions"] = {**(self.cycle.scope.get("extensions") or {}),
                                              CONNECTION: self.door}

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.received = False
        if not self.transport.is_closing() and not self.serving():
            self._expect_request()

    def _expect_request(self) -> None:
        if self._headers_due is not None:
            self._headers_due.cancel()
        self._headers_due = self.loop.call_later(self.door.doorman.limits.request_secs, self._late)

    def _late(self) -> None:
        if not self.transport.is_closing() and not self.serving():
            self.door.doorman.expired += 1
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot parse: ``{"error": ...}`` naming what is wrong, then the close."""
        problem = sys.exc_info()[1]  # called from uvicorn's except clause: h11's own words
        body = json.dumps({"error": f"invalid HTTP request: {problem or msg}"}).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        try:
            for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                          h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # past a point h11 answers nothing more
            pass
        self.transport.close()
