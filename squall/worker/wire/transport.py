"""How batches travel between workers: a tiny interface and its backends.

A worker binds one :class:`Receiver` at its address and opens a
:class:`Sender` per peer.  Frames are bytes (msgpack batches).  A send to a
peer that is not there is not an error: like ZeroMQ, the transport does not
block the sender; the tuples are lost, time out at the acker and replay.

An address's scheme names its backend (``transport_schemes.transport_for``):
``inproc://`` here, ``zmq+tcp://`` in :mod:`squall.worker.wire.zmq_transport`
(imported on first use, so local mode never loads ZeroMQ).  Every backend passes the contract suite in
tests/worker/test_transport_contract.py.

Threading: a receiver or sender is used by one thread at a time (ZeroMQ
sockets are not thread-safe); it may be handed to another thread before
use, as the worker does when it binds in the main thread and receives in its
receive thread.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod


class Receiver(ABC):
    #: The address actually bound (a port 0 in the request becomes the real port).
    address: str

    @abstractmethod
    def recv(self, timeout: float) -> bytes | None:
        """The next frame, or None after ``timeout`` seconds."""

    @abstractmethod
    def close(self) -> None: ...


class Sender(ABC):
    @abstractmethod
    def send(self, frame: bytes) -> None:
        """Hand ``frame`` over without blocking; if the peer cannot take it
        (gone, unreachable, full), drop it and count it in ``dropped``."""

    @abstractmethod
    def close(self) -> None: ...


class Transport(ABC):
    #: Frames senders of this transport dropped (peer gone or full).
    dropped: int = 0

    @abstractmethod
    def bind(self, address: str) -> Receiver: ...

    @abstractmethod
    def connect(self, address: str) -> Sender: ...

    def close(self) -> None:  # noqa: B027 - a no-op default: a transport that holds nothing needn't override
        """Release what the transport holds once its receivers and senders are closed."""


class _InprocReceiver(Receiver):
    def __init__(self, hub: InprocTransport, address: str) -> None:
        self.address = address
        self.frames: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._hub = hub

    def recv(self, timeout: float) -> bytes | None:
        try:
            return self.frames.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._hub._unbind(self)


class _InprocSender(Sender):
    def __init__(self, hub: InprocTransport, address: str) -> None:
        self._hub = hub
        self.address = address

    def send(self, frame: bytes) -> None:
        receiver = self._hub._receivers.get(self.address)
        if receiver is None:
            self._hub.dropped += 1
            return
        receiver.frames.put(frame)

    def close(self) -> None:
        pass


class InprocTransport(Transport):
    """Workers of one process (local mode): frames go through in-memory queues.

    Frames are still msgpack bytes, so local mode with several workers runs
    exactly the code paths the ZeroMQ transport will.
    """

    def __init__(self) -> None:
        self._receivers: dict[str, _InprocReceiver] = {}
        self._lock = threading.Lock()
        self.dropped = 0

    def bind(self, address: str) -> Receiver:
        receiver = _InprocReceiver(self, address)
        with self._lock:
            # A restarted worker takes its address over; the old receiver is dead.
            self._receivers[address] = receiver
        return receiver

    def _unbind(self, receiver: _InprocReceiver) -> None:
        with self._lock:
            if self._receivers.get(receiver.address) is receiver:
                del self._receivers[receiver.address]

    def connect(self, address: str) -> Sender:
        return _InprocSender(self, address)
