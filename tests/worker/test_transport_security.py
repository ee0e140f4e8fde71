"""CURVE, frame checks and orderly linger on real ZeroMQ sockets (127.0.0.1, free ports).

The receiving side is a Transfer with a fake deliver callback and the
WireValidator a worker process gives it: a unit test of the shell.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack
import pytest
import zmq
from zmq.utils import z85

from squall.acker.ledger import pack_acks
from squall.security import curve
from squall.testing import poll_for
from squall.topology.tuple import Tuple, record_type
from squall.worker.plan import TopologyPlan
from squall.worker.process.contract import SecretsError, read_secrets
from squall.worker.wire.frames import WireValidator
from squall.worker.wire.transfer import WORKER_TASK, Transfer
from squall.worker.wire.zmq_transport import ZmqTransport
from tests.worker.wire_topology import PLAN

SPOUT = PLAN.component_tasks["words"][0]
BOLT = PLAN.component_tasks["count"][0]
ACKER = PLAN.acker_tasks[0]


def free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"zmq+tcp://127.0.0.1:{s.getsockname()[1]}"


def keypair() -> tuple[bytes, bytes]:
    return curve.raw(curve.new_keypair())


def frame(*messages: Any) -> bytes:
    return msgpack.packb(list(messages), use_bin_type=True)


def row(word: str = "hello", src: int = SPOUT, stream: str = "default", values: Any = None) -> list[Any]:
    return [7, src, stream, [word] if values is None else values, {11: 7}]


GOOD = frame(["data", BOLT, [row("good")]])


@dataclass
class Receiving:
    """A worker's receiving side: its transport, Transfer and what reached 'executors'."""

    transport: ZmqTransport
    transfer: Transfer
    address: str
    delivered: list[tuple[str, int, Any]] = field(default_factory=list)
    died: list[BaseException] = field(default_factory=list)

    def words(self) -> list[str]:
        return [t.values[0] for kind, _task, batch in self.delivered if kind == "data" for t in batch]


@pytest.fixture
def keys() -> tuple[bytes, bytes]:
    return keypair()


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """Senders and transports to close after the test, in order."""
    items: list[Any] = []
    yield items
    for item in items:
        item.close()


def receiving(keys: tuple[bytes, bytes] | None, plan: TopologyPlan = PLAN, peers: list[str] | None = None,
              **transport_kw: Any) -> Receiving:
    transport = ZmqTransport(curve=keys, **transport_kw)
    address = free_address()
    routes = {1000 + i: p for i, p in enumerate(peers or [])}
    r = Receiving(transport, None, address)  # type: ignore[arg-type]
    r.transfer = Transfer(transport, address, routes, lambda *m: r.delivered.append(m),
                          WireValidator(plan, plan.task_component), r.died.append)
    r.transfer.start()
    return r


@pytest.fixture
def receiver(keys: tuple[bytes, bytes]) -> Iterator[Receiving]:
    r = receiving(keys)
    yield r
    r.transfer.stop()
    r.transfer.join(5)
    r.transport.close()
    assert not r.died


def sender(keys: tuple[bytes, bytes] | None, address: str, closing: list[Any]) -> Any:
    transport = ZmqTransport(curve=keys)
    out = transport.connect(address)
    closing.extend([out, transport])
    return out


class _Term:
    def __init__(self, ctx: zmq.Context) -> None:
        self.close = ctx.term


def send_until_delivered(out: Any, r: Receiving, word: str = "good") -> None:
    """ZeroMQ drops a connection it refuses; the sender reconnects on its own."""
    good = frame(["data", BOLT, [row(word)]])

    def delivered() -> bool:
        if word in r.words():
            return True
        out.send(good)
        return False

    poll_for(delivered, timeout=10, message=f"{word!r} to be delivered")


# -- CURVE ---------------------------------------------------------------------


def test_workers_holding_the_topology_key_exchange_frames(keys: tuple[bytes, bytes],
                                                          receiver: Receiving, closing: list[Any]) -> None:
    # Given a sending Transfer with the same keypair
    died: list[BaseException] = []
    transport = ZmqTransport(curve=keys)
    closing.append(transport)
    peer = Transfer(transport, free_address(), {BOLT: receiver.address}, lambda *m: None,
                    WireValidator(PLAN, ()), died.append)
    peer.start()
    try:
        # When it sends a batch of tuples
        rec = record_type(("word",))
        peer.put("data", BOLT, [Tuple(5, "words", "default", SPOUT, rec("hi"), {9: 5})])
        # Then the receiver's executor gets it, rebuilt as a Tuple
        poll_for(lambda: receiver.words() == ["hi"], timeout=10, message="the tuple to arrive")
        (kind, task, [tup]), = receiver.delivered
        assert (kind, task, tup.component, tup.task, tup.anchors, tup.values.word) == (
            "data", BOLT, "words", SPOUT, {9: 5}, "hi")
        assert receiver.transfer.stats()["auth_rejected"] == 0
    finally:
        peer.stop()
        peer.join(5)
    assert not died


@pytest.mark.parametrize("who", ["another-keypair", "no-curve", "own-key-knowing-the-server-key"])
def test_a_peer_without_the_topology_key_delivers_nothing_and_is_counted(
        who: str, keys: tuple[bytes, bytes], receiver: Receiving, closing: list[Any]) -> None:
    # Given a stranger connecting to the worker's slot
    forged = [frame(["data", BOLT, [row("forged")]]), frame(["deactivate", SPOUT, None]),
              frame(["bp", WORKER_TASK, [receiver.address, True]])]
    if who == "own-key-knowing-the-server-key":
        # The topology's public key is no secret: the ZAP handler must refuse the client's key.
        ctx = zmq.Context()
        push = ctx.socket(zmq.PUSH)
        public, secret = keypair()
        push.curve_publickey, push.curve_secretkey = z85.encode(public), z85.encode(secret)
        push.curve_serverkey = z85.encode(keys[0])
        push.linger = 0
        push.connect(receiver.address.replace("zmq+tcp", "tcp"))
        for f in forged:
            push.send(f)
        closing.extend([push, _Term(ctx)])
    else:
        out = sender(keypair() if who == "another-keypair" else None, receiver.address, closing)
        for f in forged:
            out.send(f)
    # Then the handshake is refused and counted, and nothing reached an executor
    poll_for(lambda: receiver.transfer.stats()["auth_rejected"] >= 1, timeout=10,
             message="the refused handshake to be counted")
    assert receiver.delivered == []
    assert receiver.transfer.stats()["frames_received"] == 0
    # And the topology's own workers still get through
    send_until_delivered(sender(keys, receiver.address, closing), receiver)


# -- frame checks ----------------------------------------------------------------

BAD_FRAMES = {
    "not-msgpack": (b"\xc1\xc1 not msgpack", "undecodable"),
    "trailing-bytes": (GOOD + b"\x00", "undecodable"),
    "unknown-ext": (msgpack.packb([["data", BOLT, [[msgpack.ExtType(99, b"x"), SPOUT, "default", ["a"],
                                                    None]]]]), "undecodable"),
    "not-a-list": (msgpack.packb({"kind": "data"}), "frame"),
    "message-not-a-triple": (frame(["data", BOLT]), "frame"),
    "activate": (frame(["activate", SPOUT, None]), "kind"),
    "deactivate": (frame(["deactivate", SPOUT, None]), "kind"),
    "tick": (frame(["tick", BOLT, None]), "kind"),
    "call": (frame(["call", BOLT, None]), "kind"),
    "unknown-kind": (frame(["explode", BOLT, []]), "kind"),
    "kind-not-str": (frame([1, BOLT, []]), "kind"),
    "data-to-unknown-task": (frame(["data", 999, [row()]]), "task"),
    "data-to-a-spout": (frame(["data", SPOUT, [row()]]), "task"),
    "task-a-bool": (frame(["ack", True, []]), "task"),
    "task-a-float": (frame(["data", float(BOLT), [row()]]), "task"),
    "acked-to-a-bolt": (frame(["acked", BOLT, [1]]), "task"),
    "ack-to-a-spout": (frame(["ack", SPOUT, [[1, 2]]]), "task"),
    "bp-to-a-task": (frame(["bp", BOLT, ["x", True]]), "task"),
    "init-for-a-bolt-task": (frame(["init", ACKER, [[1, 2, BOLT]]]), "task"),
    "data-wrong-field-count": (frame(["data", BOLT, [row(values=["a", "b"])]]), "shape"),
    "data-values-not-a-list": (frame(["data", BOLT, [row(values="abc")]]), "shape"),
    "data-row-too-short": (frame(["data", BOLT, [[1, SPOUT, "default"]]]), "shape"),
    "data-anchor-a-string": (frame(["data", BOLT, [[1, SPOUT, "default", ["a"], {"r": 1}]]]), "shape"),
    "data-id-negative": (frame(["data", BOLT, [[-1, SPOUT, "default", ["a"], None]]]), "shape"),
    "data-src-a-string": (frame(["data", BOLT, [[1, "words", "default", ["a"], None]]]), "shape"),
    "data-undeclared-stream": (frame(["data", BOLT, [row(stream="secret")]]), "source"),
    "data-src-not-in-topology": (frame(["data", BOLT, [row(src=999)]]), "source"),
    "data-src-not-subscribed": (frame(["data", BOLT, [row(src=BOLT)]]), "source"),
    "ack-string-roots": (frame(["ack", ACKER, [["x", 1]]]), "shape"),
    "ack-pair-a-triple": (frame(["ack", ACKER, [[1, 2, 3]]]), "shape"),
    "ack-packed-not-whole-pairs": (frame(["ack", ACKER, b"\x01" * 17]), "shape"),
    "ack-packed-to-a-spout": (frame(["ack", SPOUT, b"\x01" * 16]), "task"),
    "acked-packed": (frame(["acked", SPOUT, b"\x01" * 16]), "shape"),
    "fail-float-root": (frame(["fail", ACKER, [1.5]]), "shape"),
    "acked-bool-root": (frame(["acked", SPOUT, [True]]), "shape"),
    "payload-none": (frame(["acked", SPOUT, None]), "shape"),
    "bp-one-item": (frame(["bp", WORKER_TASK, ["zmq+tcp://127.0.0.1:1"]]), "shape"),
    "bp-int-flag": (frame(["bp", WORKER_TASK, ["zmq+tcp://127.0.0.1:1", 1]]), "shape"),
    "bp-unknown-peer": (frame(["bp", WORKER_TASK, ["zmq+tcp://10.0.0.1:6700", True]]), "source"),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_a_malformed_frame_from_an_insider_is_dropped_and_counted(
        name: str, keys: tuple[bytes, bytes], receiver: Receiving, closing: list[Any]) -> None:
    bad, reason = BAD_FRAMES[name]
    # Given a peer holding the topology's key
    out = sender(keys, receiver.address, closing)
    # When it sends a malformed frame, then a good one
    out.send(bad)
    out.send(GOOD)
    poll_for(lambda: receiver.words() == ["good"], timeout=10, message="the good frame to arrive")
    # Then only the good one reached an executor, the bad one is counted under its reason
    assert [(k, t) for k, t, _ in receiver.delivered] == [("data", BOLT)]
    rejected = receiver.transfer.stats()["rejected"]
    assert rejected[reason] == 1, rejected
    assert sum(rejected.values()) == 1, rejected
    assert not receiver.died and all(t.is_alive() for t in receiver.transfer._threads)
    assert not receiver.transfer._peers_congested


def test_packed_acks_to_an_acker_pass(keys: tuple[bytes, bytes], receiver: Receiving,
                                      closing: list[Any]) -> None:
    # As a bolt's acks travel (squall.acker.ledger.PACKED_ACK): 16 bytes a (root, value) pair
    acks = pack_acks([(5, 7), ((1 << 64) - 1, 0)])
    sender(keys, receiver.address, closing).send(frame(["ack", ACKER, acks]))
    poll_for(lambda: len(receiver.delivered) == 1, timeout=10, message="the acks")
    assert receiver.delivered == [("ack", ACKER, acks)]
    assert sum(receiver.transfer.stats()["rejected"].values()) == 0


def test_one_bad_message_does_not_take_the_good_ones_of_its_frame(
        keys: tuple[bytes, bytes], receiver: Receiving, closing: list[Any]) -> None:
    out = sender(keys, receiver.address, closing)
    out.send(frame(["deactivate", SPOUT, None], ["data", BOLT, [row("good")]], ["acked", SPOUT, [5]]))
    poll_for(lambda: len(receiver.delivered) == 2, timeout=10, message="the good messages")
    assert [(k, t) for k, t, _ in receiver.delivered] == [("data", BOLT), ("acked", SPOUT)]
    assert receiver.transfer.stats()["rejected"]["kind"] == 1


def test_a_known_peers_backpressure_is_heard(keys: tuple[bytes, bytes], closing: list[Any]) -> None:
    peer = free_address()
    r = receiving(keys, peers=[peer])
    try:
        sender(keys, r.address, closing).send(frame(["bp", WORKER_TASK, [peer, True]]))
        poll_for(lambda: bool(r.transfer._peers_congested), timeout=10, message="the bp to be heard")
        assert sum(r.transfer.stats()["rejected"].values()) == 0
    finally:
        r.transfer.stop()
        r.transfer.join(5)
        r.transport.close()


def test_an_oversize_frame_is_refused_by_zeromq_and_the_worker_carries_on(
        keys: tuple[bytes, bytes], closing: list[Any]) -> None:
    # Given a receiver taking frames of at most 4 KiB
    r = receiving(keys, max_message_bytes=4096)
    try:
        out = sender(keys, r.address, closing)
        send_until_delivered(out, r, "first")
        # When an insider sends a 1 MiB frame
        out.send(frame(["data", BOLT, [row("huge" * (1 << 18))]]))
        # Then ZeroMQ drops its connection before buffering it: nothing delivered, the drop counted
        poll_for(lambda: r.transfer.stats()["connections_dropped"] >= 1, timeout=10,
                 message="the connection to be dropped")
        assert all(len(t.values[0]) < 100 for _k, _t, b in r.delivered for t in b)
        # And the peer reconnects and is heard again
        send_until_delivered(out, r, "after")
        assert not r.died and all(t.is_alive() for t in r.transfer._threads)
    finally:
        r.transfer.stop()
        r.transfer.join(5)
        r.transport.close()


# -- orderly stop ----------------------------------------------------------------------


def test_an_orderly_close_delivers_what_a_connected_sender_queued(keys: tuple[bytes, bytes],
                                                                 receiver: Receiving) -> None:
    transport = ZmqTransport(curve=keys)
    out = transport.connect(receiver.address)
    send_until_delivered(out, receiver, "hello")
    # When a burst is queued and the sender closes at once, with a linger
    for i in range(200):
        out.send(frame(["data", BOLT, [row(f"w{i}")]]))
    transport.close_linger = 2.0
    out.close()
    transport.close()
    # Then all of it arrives and nothing is counted lost
    poll_for(lambda: f"w{199}" in receiver.words(), timeout=10, message="the burst to arrive")
    assert transport.undelivered == 0


def test_frames_for_a_peer_never_connected_are_counted_and_closing_does_not_wait(
        keys: tuple[bytes, bytes]) -> None:
    transport = ZmqTransport(curve=keys)
    out = transport.connect(free_address())  # nobody there
    for _ in range(5):
        out.send(GOOD)
    transport.close_linger = 30.0
    started = time.monotonic()
    out.close()
    transport.close()
    assert time.monotonic() - started < 2
    assert transport.undelivered == 5


# -- secrets.json ------------------------------------------------------------------------


def write_secrets(path: Any, content: Any, mode: int = 0o600) -> Any:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    path.chmod(mode)
    return path


def test_secrets_are_read_and_never_shown(tmp_path: Any) -> None:
    pair = curve.new_keypair()
    path = write_secrets(tmp_path / "secrets.json", {"curve": pair,
                                                     "zookeeper": {"user": "w", "passwords": ["p1", "p2"]},
                                                     "drpc": {"token": "sqd_t-1.abc", "ca": "PEM"}})
    secrets = read_secrets(path)
    assert secrets is not None
    assert secrets.curve == curve.raw(pair)
    assert secrets.zookeeper == [("w", "p1"), ("w", "p2")]
    assert secrets.drpc == {"token": "sqd_t-1.abc", "ca": "PEM"}
    assert pair["secret"] not in repr(secrets) and "p1" not in repr(secrets) and "sqd_" not in repr(secrets)
    assert read_secrets(tmp_path / "absent.json") is None
    none = read_secrets(write_secrets(tmp_path / "none.json", {"curve": None, "zookeeper": None}))
    assert none is not None and none.curve is None and none.zookeeper is None


@pytest.mark.parametrize(("content", "mode"), [
    ({"curve": None, "zookeeper": None}, 0o640),
    ({"curve": None, "zookeeper": None}, 0o604),
    ("not json", 0o600),
    ({"curve": None}, 0o600),
    ({"curve": {"public": "AAAA", "secret": "AAAA"}, "zookeeper": None}, 0o600),
    ({"curve": None, "zookeeper": {"user": "w", "passwords": "p"}}, 0o600),
    ({"curve": None, "zookeeper": None, "drpc": {"token": ""}}, 0o600),
    ({"curve": None, "zookeeper": None, "drpc": "AAAA"}, 0o600),
    ([1, 2], 0o600),
])
def test_bad_secrets_are_refused_without_showing_them(tmp_path: Any, content: Any, mode: int) -> None:
    path = write_secrets(tmp_path / "secrets.json", content, mode)
    with pytest.raises(SecretsError) as info:
        read_secrets(path)
    assert "AAAA" not in str(info.value) and "'p'" not in str(info.value)
