"""A stateful bolt reading two spouts, or a spout and a bolt, in local mode (real
executors, SQLite state).

Every spout's barriers come from the one checkpoint spout, and each bolt forwards
them: such a bolt gets one barrier per upstream task per checkpoint, from the
checkpoint spout once however many spouts it reads."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import Bolt, Grouping, Topology
from squall.local.cluster import LocalCluster
from squall.state import StatefulBolt
from squall.testing import poll_for
from tests.helpers import Broker, BrokerSpout
from tests.state.test_local_stateful import committed

pytestmark = pytest.mark.timeout(90)

N = 150  # messages per spout and run


class Restored:
    """What each init_state saw (one process: class state is shared)."""

    lock = threading.Lock()
    states: list[dict[str, int]] = []


class Left(BrokerSpout):
    broker = Broker([])


class Right(BrokerSpout):
    broker = Broker([])


class Relay(Bolt):
    outputs = ["id", "body"]

    def process(self, tup: Any) -> None:
        self.emit(list(tup.values))


class CountSides(StatefulBolt):
    """Counts the messages of each side (their body)."""

    def init_state(self, state: Any) -> None:
        self.state = state
        with Restored.lock:
            Restored.states.append({side: state.get(side) for side in ("left", "right")
                                    if state.get(side) is not None})

    def process(self, tup: Any) -> None:
        side = tup.values.body
        self.state.put(side, self.state.get(side, 0) + 1)


def two_spouts(db: Path) -> type[Topology]:
    class TwoSpouts(Topology):
        config = {"topology.state.checkpoint.interval.ms": 100,
                  "topology.state.provider.config": {"path": str(db)}}
        left = Left.spec()
        right = Right.spec()
        count = CountSides.spec(inputs={left: Grouping.fields("body"), right: Grouping.fields("body")}, par=2)

    return TwoSpouts


def spout_and_bolt(db: Path) -> type[Topology]:
    class SpoutAndBolt(Topology):
        config = {"topology.state.checkpoint.interval.ms": 100,
                  "topology.state.provider.config": {"path": str(db)}}
        left = Left.spec()
        right = Right.spec()
        relay = Relay.spec(inputs=[right], par=2)
        count = CountSides.spec(inputs={left: Grouping.fields("body"), relay: Grouping.fields("body")}, par=2)

    return SpoutAndBolt


def feed(start: int, stop: int) -> None:
    """New brokers holding messages start..stop-1 of each side (the spouts read them at start)."""
    Left.broker = Broker([(f"left-{i}", "left") for i in range(start, stop)])
    Right.broker = Broker([(f"right-{i}", "right") for i in range(start, stop)])


def acked_once() -> bool:
    """Every message of both brokers acked, each once."""
    brokers = (Left.broker, Right.broker)
    return all(b.done for b in brokers) and all(set(b.acks.values()) == {1} for b in brokers)


@pytest.fixture(autouse=True)
def _restored() -> None:
    Restored.states.clear()


@pytest.mark.parametrize("build", [two_spouts, spout_and_bolt])
def test_the_state_counts_both_inputs_and_survives_a_kill_and_resubmit(tmp_path: Path, build: Any) -> None:
    # Given a stateful bolt reading two spouts (or a spout and a bolt fed by the other),
    # two tasks of it, and N messages waiting on each spout
    db = tmp_path / "state.sqlite"
    topology = build(db)
    feed(0, N)
    with LocalCluster() as cluster:
        cluster.submit("sides", topology)
        # Then every message is acked, which a stateful bolt does once the checkpoint after
        # it committed, and the committed state counts both inputs' messages
        poll_for(acked_once, timeout=40, message="every message acked once")
        poll_for(lambda: committed(db) == {"left": N, "right": N}, timeout=20,
                 message="both sides committed")
        assert not cluster.errors("sides")
        # When it is killed and the same definition submitted again, N more messages waiting
        cluster.kill("sides")
        feed(N, 2 * N)
        cluster.submit("sides", topology)
        # Then the second run goes on from the committed counts
        poll_for(acked_once, timeout=40, message="every new message acked once")
        poll_for(lambda: committed(db) == {"left": 2 * N, "right": 2 * N}, timeout=20,
                 message="both sides committed again")
        assert not cluster.errors("sides")
    with Restored.lock:
        first, second = Restored.states[:2], Restored.states[2:]
    assert len(first) == len(second) == 2  # each run's two tasks, once
    assert sum(map(Counter, first), Counter()) == Counter()  # nothing committed yet
    assert sum(map(Counter, second), Counter()) == {"left": N, "right": N}
