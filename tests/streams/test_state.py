"""State by key and at least once, on real executors: update_state_by_key's updates,
state_query's answers, state surviving a kill and a new submission of the definition,
and a failure in a windowed aggregation replayed with nothing lost."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from operator import add
from pathlib import Path
from typing import Any

import pytest

from squall.local.cluster import LocalCluster
from squall.streams import Duration, StreamBuilder, TumblingWindows, ValueMapper
from squall.testing import poll_for, wait_for_progress
from tests.streams.streams_data import Record, Recorded, ReplayingSpout

pytestmark = pytest.mark.timeout(120)


class ThreeWords(ReplayingSpout):
    items = [["a"], ["b"], ["a"]]


class Queries(ReplayingSpout):
    """Queries ``a`` and ``z``, once the test opens the gate."""

    items = [["a"], ["z"]]
    gate = threading.Event()

    def next_tuple(self) -> None:
        if Queries.gate.is_set():
            super().next_tuple()


def counting(name: str) -> type[Any]:
    """The word count with state and its queries, as the guide writes it."""
    builder = StreamBuilder()
    counts = (builder.new_stream(ThreeWords, ValueMapper(0))
              .map_to_pair(lambda w: (w, 1)).update_state_by_key(0, add))
    counts.to_pair_stream().to(Record.spec(name="updates"))
    builder.new_stream(Queries, ValueMapper(0)).state_query(counts).to(Record.spec(name="answers"))
    return builder.build(name=name)


@pytest.fixture(params=["sqlite", "redis"])
def state_conf(request: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The state in SQLite (the default) or in a real redis-server of the test's own."""
    conf = {"topology.state.checkpoint.interval.ms": 200, "topology.message.timeout.secs": 10}
    if request.param == "sqlite":
        yield {**conf, "squall.state.dir": str(tmp_path)}
        return
    from squall.contrib.redis.devserver import DevRedis

    server = DevRedis(tmp_path / "redis", aof=True)
    server.start()
    try:
        yield {**conf, "topology.state.provider": "redis",
               "topology.state.provider.config": {"url": server.url}}
    finally:
        server.stop()


def test_state_by_key_answers_queries_and_survives_a_new_submission(state_conf: dict[str, Any]) -> None:
    Recorded.clear()
    Queries.gate.clear()
    topology = counting("streams_state")
    assert sorted(topology.definition().components) == [
        "$checkpointspout", "answers", "bolt1", "bolt2", "spout1", "spout2", "state1", "updates"]
    with LocalCluster() as cluster:
        cluster.submit("first", topology, state_conf)
        # A plain reliable spout's tuples are acked once the checkpoint after them commits.
        poll_for(lambda: sorted(set(Recorded.get("ThreeWords.acked"))) == [0, 1, 2], 60, "the words' acks")
        updates = Recorded.get("updates")
        assert sorted(map(tuple, updates)) == [("a", 1), ("a", 2), ("b", 1)]
        assert [v for k, v in updates if k == "a"] == [1, 2]  # a key's updates in order
        Queries.gate.set()
        poll_for(lambda: len(set(Recorded.get("Queries.acked"))) == 2, 60, "the queries' acks")
        assert Recorded.get("answers") == [["a", 2]]  # nothing for z: it has no state
        cluster.kill("first")

    Recorded.clear()
    with LocalCluster() as cluster:
        ThreeWords.items, saved = [], ThreeWords.items  # no new words this time
        try:
            cluster.submit("again", topology, state_conf)
            poll_for(lambda: len(set(Recorded.get("Queries.acked"))) == 2, 60, "the queries' acks")
        finally:
            ThreeWords.items = saved
        assert Recorded.get("answers") == [["a", 2]]
        cluster.kill("again")


class SixNumbers(ReplayingSpout):
    outputs = ["n"]
    items = [[n] for n in range(1, 7)]


FAILED_ONCE: set[int] = set()


def fails_once_on_three(n: int) -> int:
    if n == 3 and 3 not in FAILED_ONCE:
        FAILED_ONCE.add(3)
        raise ValueError("3 fails once")  # noqa: EM101 - the test's own failure
    return n


def test_a_failed_window_replays_through_every_operation_and_nothing_is_lost() -> None:
    Recorded.clear()
    FAILED_ONCE.clear()
    builder = StreamBuilder()
    (builder.new_stream(SixNumbers, ValueMapper(0))
        .window(TumblingWindows.of(Duration.milliseconds(300)))
        .map(fails_once_on_three).reduce(add).to(Record.spec(name="sums")))
    with LocalCluster() as cluster:
        cluster.submit("replay", builder.build(), {"topology.message.timeout.secs": 5})
        wait_for_progress(lambda: len(set(Recorded.get("SixNumbers.acked"))), 6, message="every number acked")
        errors = cluster.errors("replay")
        cluster.kill("replay")
    assert sorted(FAILED_ONCE) == [3]
    assert any("3 fails once" in str(e.error) for e in errors)  # reported, as Bolt.process's are
    failed = set(Recorded.get("SixNumbers.failed"))
    assert 3 in failed  # the window holding 3 failed whole, and was replayed
    # Every number counted once: the failed window emitted nothing, its replay everything.
    assert sum(v for [v] in Recorded.get("sums")) == 21
