"""Tuples to and from other workers: a send thread and a receive thread.

Executors hand remote batches to :meth:`Transfer.put`; the send thread
drains them, packs one msgpack frame per peer worker and sends it.  The
receive thread unpacks frames arriving at this worker's address and puts
each message into the target executor's queue.  A frame that cannot be
packed is fatal for the worker (Storm kills a worker on a serialization
error); a peer that is gone only loses tuples, which time out and replay.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from squall.worker import serialization
from squall.worker.transport import Receiver, Sender, Transport

log = structlog.get_logger("squall.worker.transfer")


class Transfer:
    def __init__(self, transport: Transport, address: str, task_address: dict[int, str],
                 deliver: Callable[[str, int, Any], None], component_of: Callable[[int], str],
                 record_of: Callable[[str, str], type], die: Callable[[BaseException], None]) -> None:
        self.address = address
        self._transport = transport
        self._task_address = task_address
        self._deliver = deliver
        self._component_of = component_of
        self._record_of = record_of
        self._die = die
        self._outbox: deque[tuple[str, int, Any]] = deque()
        self._wakeup = threading.Event()
        self._running = False
        self._senders: dict[str, Sender] = {}
        self._receiver: Receiver | None = None
        self._threads: list[threading.Thread] = []

    def bind(self) -> None:
        """Take this worker's address; idempotent.  Done before any worker of the
        topology starts sending, so that no first tuple is sent into the void."""
        if self._receiver is None:
            self._receiver = self._transport.bind(self.address)

    def start(self) -> None:
        self._running = True
        self.bind()
        for target, name in ((self._send_loop, "send"), (self._recv_loop, "recv")):
            thread = threading.Thread(target=target, name=f"worker-{name}-{self.address}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def put(self, kind: str, task: int, payload: Any) -> None:
        self._outbox.append((kind, task, payload))
        self._wakeup.set()

    def empty(self) -> bool:
        return not self._outbox

    def stop(self) -> None:
        self._running = False
        self._wakeup.set()

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)
        if self._receiver is not None:
            self._receiver.close()
        for sender in self._senders.values():
            sender.close()

    def _sender(self, address: str) -> Sender:
        sender = self._senders.get(address)
        if sender is None:
            sender = self._senders[address] = self._transport.connect(address)
        return sender

    def _send_loop(self) -> None:
        outbox = self._outbox
        try:
            while self._running or outbox:
                self._wakeup.clear()
                if not outbox:
                    self._wakeup.wait(0.1)
                    continue
                by_peer: dict[str, list[tuple[str, int, Any]]] = {}
                while outbox:
                    kind, task, payload = outbox.popleft()
                    by_peer.setdefault(self._task_address[task], []).append((kind, task, payload))
                for address, messages in by_peer.items():
                    self._sender(address).send(serialization.encode(messages))
        except BaseException as e:  # noqa: BLE001 - fatal for the worker
            self._die(e)

    def _recv_loop(self) -> None:
        receiver = self._receiver
        assert receiver is not None
        try:
            while self._running:
                frame = receiver.recv(0.1)
                if frame is None:
                    continue
                for kind, task, payload in serialization.decode(frame, self._component_of, self._record_of):
                    self._deliver(kind, task, payload)
        except BaseException as e:  # noqa: BLE001
            self._die(e)
