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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import structlog
import zmq

from squall.errors import TransportError
from squall.worker.transport import Receiver, Sender, Transport

log = structlog.get_logger("squall.worker.ZmqTransport")

SCHEME = "zmq+tcp"
SEND_HWM = 1000  # frames queued per peer before new ones are dropped
RECV_HWM = 1000
BIND_TIMEOUT_SECS = 5.0


def endpoint(address: str) -> tuple[str, bool]:
    """``zmq+tcp://host:port`` -> (``tcp://host:port``, is IPv6); port 0 -> any free port."""
    scheme, sep, rest = address.partition("://")
    host, colon, port = rest.rpartition(":")
    if scheme != SCHEME or not sep or not colon or not host or not port.isdigit():
        msg = f"not a ZeroMQ address: {address!r} (expected '{SCHEME}://host:port')"
        raise TransportError(msg)
    return f"tcp://{host}:{'*' if int(port) == 0 else port}", host.startswith("[")


class _ZmqReceiver(Receiver):
    def __init__(self, transport: ZmqTransport, socket: zmq.Socket, address: str) -> None:
        self.address = address
        self._transport = transport
        self._socket = socket
        self._poller = zmq.Poller()
        self._poller.register(socket, zmq.POLLIN)

    def recv(self, timeout: float) -> bytes | None:
        if not self._poller.poll(timeout * 1000):
            return None
        return self._socket.recv(zmq.NOBLOCK)

    def close(self) -> None:
        self._transport._closed(self._socket)


class _ZmqSender(Sender):
    def __init__(self, transport: ZmqTransport, socket: zmq.Socket, address: str) -> None:
        self.address = address
        self.dropped = 0
        self._transport = transport
        self._socket = socket
        self._blocked = False  # dropping since the last frame that went through

    def send(self, frame: bytes) -> None:
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
        if self._blocked:
            self._blocked = False
            log.info("peer reachable again", peer=self.address, dropped=self.dropped)

    def close(self) -> None:
        self._transport._closed(self._socket)


class ZmqTransport(Transport):
    def __init__(self, *, send_hwm: int = SEND_HWM, recv_hwm: int = RECV_HWM,
                 bind_timeout: float = BIND_TIMEOUT_SECS, now: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.send_hwm = send_hwm
        self.recv_hwm = recv_hwm
        self.bind_timeout = bind_timeout
        self.dropped = 0  # incremented by senders; a transport's senders share one thread
        self._now = now
        self._sleep = sleep
        self._context = zmq.Context()
        self._lock = threading.Lock()
        self._open: set[zmq.Socket] = set()

    def bind(self, address: str) -> Receiver:
        where, ipv6 = endpoint(address)
        socket = self._socket(zmq.PULL, ipv6)
        socket.rcvhwm = self.recv_hwm
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
        try:
            socket.connect(where)
        except zmq.ZMQError as e:
            self._closed(socket)
            msg = f"cannot connect to {address}: {e}"
            raise TransportError(msg) from e
        return _ZmqSender(self, socket, address)

    def _socket(self, kind: int, ipv6: bool) -> zmq.Socket:
        socket = self._context.socket(kind)
        socket.linger = 0
        if ipv6:
            socket.ipv6 = True
        with self._lock:
            self._open.add(socket)
        return socket

    def _closed(self, socket: zmq.Socket) -> None:
        with self._lock:
            self._open.discard(socket)
        socket.close(linger=0)

    def close(self) -> None:
        """Terminate the context; sockets still open belong to threads that
        did not stop, and closing them from here would race with those threads,
        so then the context is left to the process's exit."""
        with self._lock:
            still_open = len(self._open)
        if still_open:
            log.warning("sockets still open, leaving the ZeroMQ context to process exit", sockets=still_open)
            return
        if not self._context.closed:
            self._context.term()
