"""Backpressure across workers: a congested worker pauses the spouts of its peers."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from squall import Bolt, LocalCluster, Spout, Topology
from squall.testing import poll_for
from squall.worker.backpressure import Backpressure
from squall.worker.wire import codec as serialization
from squall.worker.wire.frames import WireValidator
from squall.worker.wire.transfer import TURN_MESSAGES, WORKER_TASK, Transfer
from squall.worker.wire.transport import InprocTransport, Sender
from tests.helpers import stay
from tests.worker.wire_topology import PLAN

ACKER = PLAN.acker_tasks[0]


class GatedTransport(InprocTransport):
    """In-memory frames whose sends wait for ``gate``: a send thread held up (a slow
    network, a starved thread) while its executors keep producing."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.sending = threading.Event()

    def connect(self, address: str) -> Sender:
        inner, transport = super().connect(address), self

        class Gated(Sender):
            def send(self, frame: bytes) -> None:
                transport.sending.set()
                transport.gate.wait(10)
                inner.send(frame)

            def close(self) -> None:
                inner.close()

        return Gated()


class Peer:
    """A Transfer as a worker holds one, with what it was handed and its backpressure."""

    def __init__(self, transport: InprocTransport, address: str, peers: list[str], resend: float,
                 capacity: int = 1024) -> None:
        self.backpressure = Backpressure()
        self.died: list[BaseException] = []
        # Each peer is the one address of ACKER, which every peer runs (a plan's acker takes acks).
        self.transfer = Transfer(transport, address, dict.fromkeys([ACKER], *peers),
                                 lambda *m: None, WireValidator(PLAN, PLAN.task_component), self.died.append,
                                 backpressure=self.backpressure, bp_resend=resend, capacity=capacity)
        self.backpressure.on_change = self.transfer.local_congestion

    def congest(self, on: bool) -> None:
        (self.backpressure.raise_ if on else self.backpressure.lower)()


@pytest.fixture
def net() -> Iterator[tuple[InprocTransport, list[Peer], str]]:
    transport = InprocTransport()
    peers: list[Peer] = []
    yield transport, peers, f"inproc://bp-{uuid.uuid4().hex}"
    for p in peers:
        p.transfer.stop()
    for p in peers:
        p.transfer.join(2)
        assert not p.died


def start(peers: list[Peer], peer: Peer) -> Peer:
    peers.append(peer)
    peer.transfer.start()
    return peer


def test_a_congested_worker_pauses_its_peers_until_it_drains(net: Any) -> None:
    transport, peers, base = net
    a = start(peers, Peer(transport, f"{base}/a", [f"{base}/b"], resend=10.0))
    b = start(peers, Peer(transport, f"{base}/b", [f"{base}/a"], resend=10.0))
    # When a's queues congest, b hears of it
    a.congest(True)
    poll_for(lambda: b.backpressure.active, timeout=2, message="b to hear a is congested")
    assert not a.backpressure.remote
    # And when a drains, b hears that too, long before any expiry
    a.congest(False)
    poll_for(lambda: not b.backpressure.active, timeout=2, message="b to hear a drained")


def test_a_peer_started_during_a_congestion_learns_of_it(net: Any) -> None:
    transport, peers, base = net
    a = start(peers, Peer(transport, f"{base}/a", [f"{base}/b"], resend=0.05))
    a.congest(True)
    # Given b (re)started after a turned congested: the first message went nowhere
    poll_for(lambda: transport.dropped > 0, timeout=2, message="a to tell nobody")
    b = start(peers, Peer(transport, f"{base}/b", [f"{base}/a"], resend=0.05))
    # Then the resent state reaches it
    poll_for(lambda: b.backpressure.remote, timeout=2, message="b to learn of the congestion")


def test_a_congestion_not_refreshed_is_forgotten(net: Any) -> None:
    transport, peers, base = net
    b = start(peers, Peer(transport, f"{base}/b", [f"{base}/dead"], resend=0.05))
    # Given a peer that said it was congested, then died without a word
    transport.connect(f"{base}/b").send(serialization.encode([("bp", WORKER_TASK, [f"{base}/dead", True])]))
    poll_for(lambda: b.backpressure.remote, timeout=2, message="b to hear the congestion")
    # Then after three resend periods without news b forgets it
    started = time.monotonic()
    poll_for(lambda: not b.backpressure.remote, timeout=2, message="the congestion to be forgotten")
    assert time.monotonic() - started >= 0.1


def test_an_orderly_stop_releases_the_peers(net: Any) -> None:
    transport, peers, base = net
    a = Peer(transport, f"{base}/a", [f"{base}/b"], resend=10.0)
    a.transfer.start()
    b = start(peers, Peer(transport, f"{base}/b", [f"{base}/a"], resend=10.0))
    a.congest(True)
    poll_for(lambda: b.backpressure.remote, timeout=2, message="b to hear a is congested")
    a.transfer.stop()
    a.transfer.join(2)
    poll_for(lambda: not b.backpressure.remote, timeout=2, message="b to be released by a's stop")


def test_a_transfer_queue_over_capacity_congests_the_worker_until_half_is_sent(net: Any) -> None:
    _, peers, base = net
    transport = GatedTransport()
    a = start(peers, Peer(transport, f"{base}/a", [f"{base}/b"], resend=10.0, capacity=100))
    b = start(peers, Peer(transport, f"{base}/b", [f"{base}/a"], resend=10.0))
    # Given a send thread held up in a send
    a.transfer.put("ack", ACKER, [[1, 2]])
    assert transport.sending.wait(2)
    # When its executors queue more than the capacity, the worker is congested at once
    for _ in range(100):
        a.transfer.put("ack", ACKER, [[1, 2]])
    assert not a.backpressure.active
    a.transfer.put("ack", ACKER, [[1, 2]])
    assert a.backpressure.congested == 1 and a.transfer.stats()["outbox_congested"]
    a.transfer.put("ack", ACKER, [[1, 2]])
    assert a.backpressure.congested == 1, "raised once however full it gets"
    # And once the send thread catches up it is not, and the peer heard both
    transport.gate.set()
    poll_for(lambda: not a.backpressure.active, timeout=2, message="a to drain")
    poll_for(lambda: b.transfer.stats()["frames_received"] >= 2, timeout=2, message="b to receive")
    assert a.transfer.stats()["queued"] == 0


def test_a_backlog_goes_out_in_frames_of_bounded_size(net: Any) -> None:
    _, peers, base = net
    transport = GatedTransport()
    received: list[int] = []
    a = start(peers, Peer(transport, f"{base}/a", [f"{base}/b"], resend=10.0, capacity=10_000))
    b = Peer(transport, f"{base}/b", [f"{base}/a"], resend=10.0)
    b.transfer._deliver = lambda kind, task, payload: received.append(task)
    start(peers, b)
    # Given a backlog three turns long behind a held-up send
    a.transfer.put("ack", ACKER, [[1, 2]])
    assert transport.sending.wait(2)
    backlog = 2 * TURN_MESSAGES + 10
    for _ in range(backlog):
        a.transfer.put("ack", ACKER, [[1, 2]])
    transport.gate.set()
    # Then every message arrives, in frames of at most TURN_MESSAGES messages
    poll_for(lambda: len(received) == backlog + 1, timeout=5, message="the backlog to arrive")
    assert b.transfer.stats()["frames_received"] >= 4


# -- in a topology ----------------------------------------------------------------


def test_a_slow_bolt_in_another_worker_pauses_the_spout_until_it_catches_up() -> None:
    # Given an unreliable spout flooding a slow bolt whose 100-tuple buffer is
    # in another worker (executors are spread: the spout in one, the bolt in the other)
    counts = {"emitted": 0, "processed": 0}
    bolt_ready, fast = threading.Event(), threading.Event()

    class Flood(Spout):
        outputs = ["n"]

        def next_tuple(self) -> None:
            if bolt_ready.is_set():  # no burst into a worker still starting
                counts["emitted"] += 1
                self.emit([counts["emitted"]])

    class Slow(Bolt):
        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            bolt_ready.set()

        def process(self, tup: Any) -> None:
            if not fast.is_set():
                time.sleep(0.001)
            counts["processed"] += 1

    class T(Topology):
        config = {"topology.acker.executors": 0, "topology.workers": 2,
                  "topology.executor.receive.buffer.size": 100}
        flood = Flood.spec()
        slow = Slow.spec(inputs=[flood])

    def emitted() -> int:
        return counts["emitted"]

    with LocalCluster() as cluster:
        runner = cluster.submit("flood2", T)
        try:
            spout_worker = next(w for w in runner.workers if w is not None and 1 in w.local_tasks)
            assert 2 not in spout_worker.local_tasks, "the bolt must be in the other worker"
            # Then the spout's worker hears the bolt's worker is congested
            bolt_worker = next(w for w in runner.workers if w is not None and 2 in w.local_tasks)

            def state() -> str:  # what a failure message needs to say where the tuples were
                return (f"emitted={counts['emitted']} processed={counts['processed']} spout worker "
                        f"{spout_worker.transfer.stats()} bolt worker {bolt_worker.transfer.stats()}")

            try:
                poll_for(lambda: spout_worker.backpressure.remote, timeout=15, message="remote backpressure")
            except AssertionError as e:
                raise AssertionError(f"{e}: {state()}") from None
            heard_at = emitted()
            # And the spout stops while the bolt works through its backlog.  (How far
            # it got first is the spout's rate times a round trip between the
            # workers' threads, a few thousand tuples; without remote backpressure it
            # runs ahead by some 200,000 tuples a second.)
            def settled() -> int | None:
                count = emitted()
                return count if stay(lambda: emitted() == count, seconds=0.1) else None

            paused_at = poll_for(settled, timeout=2, message="the spout to pause")
            assert stay(lambda: emitted() == paused_at, seconds=0.5), "the spout resumed while backlogged"
            # Once the spout's worker has heard, the spout stops within a turn or two.  (How
            # far it ran before the signal came is the spout's rate times a round trip
            # through both workers' transfer threads: a few thousand tuples on a quiet
            # machine, hundreds of thousands when a busy process starves those threads.)
            assert paused_at - heard_at < 150_000, (heard_at, paused_at, counts["processed"])
            # When the bolt speeds up, it drains and the spout resumes
            fast.set()
            poll_for(lambda: emitted() > paused_at + 1000, timeout=5, message="the spout to resume")
        finally:
            fast.set()
