"""The ZeroMQ transport between worker processes: ``zmq+tcp://host:port``.

A worker binds one PULL socket on its slot address (listening on the host
given, so ``127.0.0.1`` stays on loopback and ``0.0.0.0`` takes every
interface) and opens one PUSH socket per peer worker.  Frames are msgpack
batches; ZeroMQ keeps their order per peer.

Sends never block the send thread: each PUSH socket queues at most
``send_hwm`` frames for its peer (ZeroMQ holds them while it connects and
reconnects on its own), and a frame that finds the queue full is dropped and
counted.  Tuples lost that way time out at the acker and their spouts replay
them, which is DESIGN.md's answer to a peer that is gone.

A socket belongs to the thread that uses it: the worker's receive thread
owns the receiver and its send thread owns the senders, and each closes its
own (linger 0, so nothing keeps a dead peer's frames past shutdown).  The
context is terminated by :meth:`ZmqTransport.close` once every socket is
closed.  A port still held by a socket closed an instant ago (ZeroMQ
releases it from its I/O thread) is retried for ``bind_timeout`` seconds,
so a restarted worker takes its port back.

Security (``curve=(public, secret)``, the topology's raw 32-byte keypair):
the receiver is a CURVE server and every sender a CURVE client holding the
same keypair, so a process without the topology's secret can neither connect
nor read a frame.  pyzmq's :class:`~zmq.auth.thread.ThreadAuthenticator`
answers ZeroMQ's ZAP requests on this transport's context and admits only a
client whose public key is the topology's.  Refused handshakes (a wrong key,
no CURVE at all, garbage) are seen on the receiver's monitor socket and
counted in :attr:`ZmqTransport.auth_rejected`.

``max_message_bytes`` is the receiver's ZMQ_MAXMSGSIZE: ZeroMQ drops the
connection of a peer that announces a bigger frame before buffering it.
libzmq reports that only as a plain disconnect, so it is counted with the
other lost connections in :attr:`ZmqTransport.connections_dropped`.

Stopping: senders close with linger 0 unless the owner set
:attr:`ZmqTransport.close_linger` (an orderly stop does, bounded): then a
sender whose peer is connected gets that long to deliver what it queued,
while frames queued for a peer that is not connected (never was, or went
away) are counted in :attr:`ZmqTransport.undelivered` and dropped at once, so
a dead peer never holds shutdown up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import structlog
import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

from squall.errors import TransportError
from squall.worker.wire.transport import Receiver, Sender, Transport

log = structlog.get_logger("squall.worker.ZmqTransport")

SCHEME = "zmq+tcp"
SEND_HWM = 1000  # frames queued per peer before new ones are dropped
RECV_HWM = 1000
BIND_TIMEOUT_SECS = 5.0
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # conf zmq.max.message.bytes
ZAP_DOMAIN = "squall"

_HANDSHAKE_REFUSED = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
_RECEIVER_EVENTS = _HANDSHAKE_REFUSED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
_SENDER_EVENTS = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED


def endpoint(address: str) -> tuple[str, bool]:
    """``zmq+tcp://host:port`` -> (``tcp://host:port``, is IPv6); port 0 -> any free port."""
    scheme, sep, rest = address.partition("://")
    host, colon, port = rest.rpartition(":")
    if scheme != SCHEME or not sep or not colon or not host or not port.isdigit():
        msg = f"not a ZeroMQ address: {address!r} (expected '{SCHEME}://host:port')"
        raise TransportError(msg)
    return f"tcp://{host}:{'*' if int(port) == 0 else port}", host.startswith("[")


def _events(monitor: zmq.Socket) -> list[int]:
    """The monitor events waiting on ``monitor``, without blocking."""
    out = []
    while monitor.getsockopt(zmq.EVENTS) & zmq.POLLIN:
        out.append(parse_monitor_message(monitor.recv_multipart(zmq.NOBLOCK))["event"])
    return out


class _TopologyKey:
    """The ZAP credentials provider: only the topology's own public key gets in."""

    def __init__(self, transport: ZmqTransport, public_z85: bytes) -> None:
        self._transport = transport
        self._public = public_z85

    def callback(self, domain: str, key: bytes) -> bool:
        # Runs in the authenticator's thread; the count is only read for stats.
        return key == self._public


class _ZmqReceiver(Receiver):
    def __init__(self, transport: ZmqTransport, socket: zmq.Socket, address: str) -> None:
        self.address = address
        self._transport = transport
        self._socket = socket
        self._monitor = socket.get_monitor_socket(_RECEIVER_EVENTS)
        self._poller = zmq.Poller()
        self._poller.register(socket, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)

    def recv(self, timeout: float) -> bytes | None:
        ready = dict(self._poller.poll(timeout * 1000))
        if self._monitor in ready:
            self._on_events()
        if self._socket not in ready:
            return None
        return self._socket.recv(zmq.NOBLOCK)

    def _on_events(self) -> None:
        transport = self._transport
        for event in _events(self._monitor):
            if event & _HANDSHAKE_REFUSED:
                transport.auth_rejected += 1
                if transport.auth_rejected == 1 or transport.auth_rejected % 100 == 0:
                    log.warning("refused a connection that failed the CURVE handshake",
                                address=self.address, auth_rejected=transport.auth_rejected)
            elif event == zmq.EVENT_DISCONNECTED:
                # A peer went away, or ZeroMQ cut one that sent a frame over max_message_bytes.
                transport.connections_dropped += 1

    def close(self) -> None:
        if self._socket.closed:
            return
        try:
            self._socket.disable_monitor()
        except zmq.ZMQError:
            pass
        self._monitor.close(linger=0)
        self._transport._closed(self._socket)


class _ZmqSender(Sender):
    def __init__(self, transport: ZmqTransport, socket: zmq.Socket, address: str) -> None:
        self.address = address
        self.dropped = 0
        self._transport = transport
        self._socket = socket
        self._monitor = socket.get_monitor_socket(_SENDER_EVENTS)
        self._blocked = False  # dropping since the last frame that went through
        self._connected = False  # a handshake with the peer succeeded and it has not gone since
        self._unconfirmed = 0  # frames queued while not connected

    def send(self, frame: bytes) -> None:
        if self._monitor.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            self._on_events()
        try:
            self._socket.send(frame, zmq.NOBLOCK, copy=False)
        except zmq.Again:
            self.dropped += 1
            self._transport.dropped += 1
            if not self._blocked:
                self._blocked = True
                log.warning("peer unreachable or full, dropping frames", peer=self.address)
            return
        except zmq.ZMQError as e:
            msg = f"cannot send to {self.address}: {e}"
            raise TransportError(msg) from e
        if not self._connected:
            self._unconfirmed += 1
        if self._blocked:
            self._blocked = False
            log.info("peer reachable again", peer=self.address, dropped=self.dropped)

    def _on_events(self) -> None:
        for event in _events(self._monitor):
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                # What waited in the queue goes out on this connection.
                self._connected = True
                self._unconfirmed = 0
            elif event == zmq.EVENT_DISCONNECTED:
                self._connected = False

    def close(self) -> None:
        if self._socket.closed:
            return
        self._on_events()
        linger = self._transport.linger_left() if self._connected else 0.0
        if not self._connected and self._unconfirmed:
            self._transport.undelivered += self._unconfirmed
            log.warning("peer not connected at close, frames for it are lost", peer=self.address,
                        frames=self._unconfirmed)
        try:
            self._socket.disable_monitor()
        except zmq.ZMQError:
            pass
        self._monitor.close(linger=0)
        self._transport._closed(self._socket, linger)


class ZmqTransport(Transport):
    def __init__(self, *, send_hwm: int = SEND_HWM, recv_hwm: int = RECV_HWM,
                 bind_timeout: float = BIND_TIMEOUT_SECS, curve: tuple[bytes, bytes] | None = None,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, now: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.send_hwm = send_hwm
        self.recv_hwm = recv_hwm
        self.bind_timeout = bind_timeout
        self.max_message_bytes = max_message_bytes
        self.dropped = 0  # incremented by senders; a transport's senders share one thread
        self.auth_rejected = 0  # incremented by the receiver's thread
        self.connections_dropped = 0
        self.undelivered = 0  # frames a closing sender held for a peer not connected
        #: Seconds a closing sender may take to deliver what it queued to a connected peer,
        #: and the monotonic time by which every one must be done (None: no bound but that).
        self.close_linger = 0.0
        self.linger_deadline: float | None = None
        self._now = now
        self._sleep = sleep
        self._context = zmq.Context()
        self._lock = threading.Lock()
        self._open: set[zmq.Socket] = set()
        self._curve: tuple[bytes, bytes] | None = None
        self._authenticator: ThreadAuthenticator | None = None
        if curve is not None:
            public, secret = curve
            if len(public) != 32 or len(secret) != 32:
                msg = "a CURVE key must be 32 raw bytes"
                raise TransportError(msg)
            if not zmq.has("curve"):
                msg = "this libzmq has no CURVE support"
                raise TransportError(msg)
            self._curve = (z85.encode(public), z85.encode(secret))

    def linger_left(self) -> float:
        if self.linger_deadline is None:
            return self.close_linger
        return max(0.0, min(self.close_linger, self.linger_deadline - self._now()))

    @property
    def secure(self) -> bool:
        return self._curve is not None

    def _start_authenticator(self) -> None:
        """ZAP must answer before the first handshake: without a handler a CURVE
        server admits any client that knows its public key."""
        if self._authenticator is not None or self._curve is None:
            return
        auth = ThreadAuthenticator(self._context, log=logging.getLogger("squall.worker.zap"))
        auth.start()
        auth.configure_curve_callback(ZAP_DOMAIN, credentials_provider=_TopologyKey(self, self._curve[0]))
        self._authenticator = auth

    def bind(self, address: str) -> Receiver:
        where, ipv6 = endpoint(address)
        self._start_authenticator()
        socket = self._socket(zmq.PULL, ipv6)
        socket.rcvhwm = self.recv_hwm
        socket.maxmsgsize = self.max_message_bytes
        if self._curve is not None:
            socket.zap_domain = ZAP_DOMAIN.encode()
            socket.curve_secretkey = self._curve[1]
            socket.curve_publickey = self._curve[0]
            socket.curve_server = True
        deadline = self._now() + self.bind_timeout
        delay = 0.01
        while True:
            try:
                socket.bind(where)
                break
            except zmq.ZMQError as e:
                # A port released an instant ago by a closed socket or a dead
                # worker comes back shortly; anything else is final.
                if e.errno != zmq.EADDRINUSE or self._now() >= deadline:
                    self._closed(socket)
                    msg = f"cannot bind {address}: {e}"
                    raise TransportError(msg) from e
                self._sleep(delay)
                delay = min(delay * 2, 0.2)
        bound = socket.getsockopt_string(zmq.LAST_ENDPOINT)
        return _ZmqReceiver(self, socket, f"{SCHEME}://{bound.partition('://')[2]}")

    def connect(self, address: str) -> Sender:
        where, ipv6 = endpoint(address)
        socket = self._socket(zmq.PUSH, ipv6)
        socket.sndhwm = self.send_hwm
        if self._curve is not None:
            socket.curve_publickey = self._curve[0]
            socket.curve_secretkey = self._curve[1]
            socket.curve_serverkey = self._curve[0]  # one keypair per topology
        sender = _ZmqSender(self, socket, address)  # monitoring before the first connection
        try:
            socket.connect(where)
        except zmq.ZMQError as e:
            sender.close()
            msg = f"cannot connect to {address}: {e}"
            raise TransportError(msg) from e
        return sender

    def _socket(self, kind: int, ipv6: bool) -> zmq.Socket:
        socket = self._context.socket(kind)
        socket.linger = 0
        if ipv6:
            socket.ipv6 = True
        with self._lock:
            self._open.add(socket)
        return socket

    def _closed(self, socket: zmq.Socket, linger: float = 0.0) -> None:
        with self._lock:
            self._open.discard(socket)
        socket.close(linger=int(linger * 1000))

    def close(self) -> None:
        """Stop the authenticator and terminate the context (which waits out
        the senders' linger); sockets still open belong to threads that did
        not stop, and closing them from here would race with those threads, so
        then the context (and the authenticator guarding its receiver) is
        left to the process's exit."""
        with self._lock:
            still_open = len(self._open)
        if still_open:
            log.warning("sockets still open, leaving the ZeroMQ context to process exit", sockets=still_open)
            return
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None
        if self.undelivered:
            log.warning("frames lost at close: their peers were not connected", frames=self.undelivered)
        if not self._context.closed:
            self._context.term()
