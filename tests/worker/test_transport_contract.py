"""One contract, every transport backend (inproc and ZeroMQ).

Each ``check_*`` states one property a worker relies on; the parametrized
``backend`` fixture runs them all against every backend.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from squall.errors import TransportError
from squall.runtime.ports import free_port
from squall.testing import poll_for
from squall.worker.wire.schemes import transport_for
from squall.worker.wire.transport import InprocTransport, Receiver, Sender, Transport
from squall.worker.wire.zmq_transport import ZmqTransport, endpoint


@dataclass
class Backend:
    name: str
    transport: Transport
    closables: list[Any]

    def address(self) -> str:
        if self.name == "inproc":
            return f"inproc://contract/{uuid.uuid4().hex}"
        return f"zmq+tcp://127.0.0.1:{free_port()}"

    def bind(self, address: str) -> Receiver:
        receiver = self.transport.bind(address)
        self.closables.append(receiver)
        return receiver

    def connect(self, address: str) -> Sender:
        sender = self.transport.connect(address)
        self.closables.append(sender)
        return sender


@pytest.fixture(params=["inproc", "zmq"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    transport: Transport = InprocTransport() if request.param == "inproc" else ZmqTransport(send_hwm=50)
    b = Backend(request.param, transport, [])
    yield b
    for item in b.closables:
        item.close()
    transport.close()


def recv_all(receiver: Receiver, n: int, timeout: float = 5.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        frame = receiver.recv(0.1)
        if frame is not None:
            got.append(frame)
    return got


def test_a_frame_sent_is_received(backend: Backend) -> None:
    address = backend.address()
    receiver = backend.bind(address)
    backend.connect(address).send(b"hello")
    assert recv_all(receiver, 1) == [b"hello"]


def test_frames_from_one_sender_arrive_in_order(backend: Backend) -> None:
    address = backend.address()
    receiver = backend.bind(address)
    sender = backend.connect(address)
    frames = [f"frame-{i}".encode() for i in range(40)]  # within the send high-water mark
    for frame in frames:
        sender.send(frame)
    assert recv_all(receiver, len(frames)) == frames


def test_frames_of_several_senders_all_arrive_each_in_order(backend: Backend) -> None:
    address = backend.address()
    receiver = backend.bind(address)
    senders = [backend.connect(address) for _ in range(3)]
    for i in range(20):
        for k, sender in enumerate(senders):
            sender.send(f"{k}:{i}".encode())
    got = [f.decode() for f in recv_all(receiver, 60)]
    assert len(got) == 60
    for k in range(3):
        assert [g for g in got if g.startswith(f"{k}:")] == [f"{k}:{i}" for i in range(20)]


def test_recv_returns_none_after_its_timeout(backend: Backend) -> None:
    receiver = backend.bind(backend.address())
    started = time.monotonic()
    assert receiver.recv(0.05) is None
    assert 0.03 <= time.monotonic() - started < 1.0


def test_sending_to_an_address_nobody_binds_neither_raises_nor_blocks(backend: Backend) -> None:
    sender = backend.connect(backend.address())
    started = time.monotonic()
    for _ in range(500):  # well past the high-water mark
        sender.send(b"x" * 100)
    assert time.monotonic() - started < 1.0
    assert backend.transport.dropped > 0


def test_an_address_can_be_bound_again_after_close(backend: Backend) -> None:
    # Given a receiver and a sender talking
    address = backend.address()
    first = backend.bind(address)
    sender = backend.connect(address)
    sender.send(b"one")
    assert recv_all(first, 1) == [b"one"]
    # When the receiver closes and the address is bound again (a restarted worker)
    first.close()
    second = backend.bind(address)
    # Then the same sender reaches the new receiver
    poll_for(lambda: sender.send(b"two") or second.recv(0.05) == b"two", timeout=5,
             message="the sender to reach the rebound address")


def test_close_is_idempotent(backend: Backend) -> None:
    address = backend.address()
    receiver = backend.bind(address)
    sender = backend.connect(address)
    for _ in range(2):
        sender.close()
        receiver.close()


def test_transport_for_chooses_the_backend_by_scheme(backend: Backend) -> None:
    transport = transport_for(backend.address())
    try:
        assert type(transport) is type(backend.transport)
    finally:
        transport.close()


# -- ZeroMQ specifics ------------------------------------------------------------


def test_zmq_binding_port_zero_reports_the_port_taken() -> None:
    transport = ZmqTransport()
    receiver = transport.bind("zmq+tcp://127.0.0.1:0")
    try:
        host, _, port = receiver.address.removeprefix("zmq+tcp://").rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
        sender = transport.connect(receiver.address)
        sender.send(b"ping")
        assert recv_all(receiver, 1) == [b"ping"]
        sender.close()
    finally:
        receiver.close()
        transport.close()


def test_zmq_binding_a_port_in_use_fails_with_a_clear_error() -> None:
    transport = ZmqTransport(bind_timeout=0.1)
    receiver = transport.bind("zmq+tcp://127.0.0.1:0")
    try:
        with pytest.raises(TransportError, match="cannot bind"):
            transport.bind(receiver.address)
    finally:
        receiver.close()
        transport.close()


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:1", "zmq+tcp://127.0.0.1", "zmq+tcp://:80",
                                     "zmq+tcp://h:port"])
def test_zmq_refuses_malformed_addresses(address: str) -> None:
    with pytest.raises(TransportError, match="not a ZeroMQ address"):
        endpoint(address)


def test_unknown_schemes_are_refused_naming_the_known_ones() -> None:
    with pytest.raises(TransportError, match="zmq\\+tcp"):
        transport_for("carrier-pigeon://coop:1")
