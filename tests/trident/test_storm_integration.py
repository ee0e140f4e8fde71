"""Storm's Trident integration scenarios (storm-server's TridentIntegrationTest) with their
exact answers, in local mode with a LocalDRPC: the word count queried by DRPC, a committer
spout emitting empty batches all the time, whole-state reads through broadcast and
TupleCollectionGet, counts of empty and long requests, split and merge, two groupings of
one stream, chained repartitions, and fields checked where the call is made."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from squall import LocalCluster
from squall.drpc import LocalDRPC
from squall.errors import TopologyValidationError
from squall.testing import poll_for
from squall.trident import Count, MapGet, MemoryMapState, Sum, TridentTopology, TupleCollectionGet
from squall.trident.testing import (
    CountAsAggregator,
    FeederBatchSpout,
    FeederCommitterBatchSpout,
    Split,
    StringLength,
    TrueFilter,
)


@pytest.fixture
def drpc() -> Iterator[LocalDRPC]:
    with LocalDRPC() as d:
        yield d


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as c:
        yield c


def execute(drpc: LocalDRPC, function: str, args: str) -> list[list[Any]]:
    return json.loads(drpc.execute(function, args))  # type: ignore[no-any-return]


def multiset(rows: list[list[Any]]) -> Counter[str]:
    return Counter(json.dumps(r) for r in rows)


def word_count(topo: TridentTopology, feeder: Any, spout_parallelism: int | None = None) -> Any:
    stream = topo.new_stream("tester", feeder)
    if spout_parallelism:
        stream = stream.parallelism_hint(spout_parallelism)
    return (stream.each(["sentence"], Split(), ["word"]).group_by(["word"])
            .persistent_aggregate(MemoryMapState.factory(), Count(), ["count"]).parallelism_hint(6))


def words_query(topo: TridentTopology, drpc: LocalDRPC, counts: Any) -> None:
    (topo.new_drpc_stream("words", drpc).each(["args"], Split(), ["word"]).group_by(["word"])
     .state_query(counts, ["word"], MapGet(), ["count"])
     .aggregate(["count"], Sum(), ["sum"]).project(["sum"]))


def test_memory_map_get_tuples(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    topo = TridentTopology()
    feeder = FeederBatchSpout(["sentence"])
    counts = word_count(topo, feeder)
    (topo.new_drpc_stream("all-tuples", drpc).broadcast()
     .state_query(counts, ["args"], TupleCollectionGet(), ["word", "count"]).project(["word", "count"]))
    cluster.submit("testing", topo.build())
    feeder.feed([["hello the man said"], ["the"]])
    assert multiset(execute(drpc, "all-tuples", "man")) == multiset(
        [["hello", 1], ["said", 1], ["the", 2], ["man", 1]])
    feeder.feed([["the foo"]])
    assert multiset(execute(drpc, "all-tuples", "man")) == multiset(
        [["hello", 1], ["said", 1], ["the", 3], ["man", 1], ["foo", 1]])


def test_word_count(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    topo = TridentTopology()
    feeder = FeederBatchSpout(["sentence"])
    words_query(topo, drpc, word_count(topo, feeder))
    cluster.submit("testing", topo.build())
    feeder.feed([["hello the man said"], ["the"]])
    assert execute(drpc, "words", "the") == [[2]]
    assert execute(drpc, "words", "hello") == [[1]]
    feeder.feed([["the man on the moon"], ["where are you"]])
    assert execute(drpc, "words", "the") == [[4]]
    assert execute(drpc, "words", "man") == [[2]]
    assert execute(drpc, "words", "man where you the") == [[8]]


def test_word_count_committer_spout_with_many_empty_batches(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    topo = TridentTopology()
    feeder = FeederCommitterBatchSpout(["sentence"])
    feeder.set_wait_to_emit(False)  # a batch all the time, empty when nothing was fed
    words_query(topo, drpc, word_count(topo, feeder, spout_parallelism=2))
    cluster.submit("testing", topo.build())
    feeder.feed([["hello the man said"], ["the"]])
    assert execute(drpc, "words", "the") == [[2]]
    assert execute(drpc, "words", "hello") == [[1]]
    # Empty batches go round meanwhile: the topology keeps answering (Storm's freeze bug)
    poll_for(lambda: execute(drpc, "words", "the") == [[2]], timeout=10)
    feeder.feed([["the man on the moon"], ["where are you"]])
    assert execute(drpc, "words", "the") == [[4]]
    assert execute(drpc, "words", "man") == [[2]]
    assert execute(drpc, "words", "man where you the") == [[8]]
    feeder.feed([["the the"]])
    assert execute(drpc, "words", "the") == [[6]]
    feeder.feed([["the"]])
    assert execute(drpc, "words", "the") == [[7]]


def test_count_agg_of_empty_and_long_requests(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    topo = TridentTopology()
    (topo.new_drpc_stream("numwords", drpc).each(["args"], Split(), ["word"])
     .aggregate(CountAsAggregator(), ["count"]).parallelism_hint(2).project(["count"]))
    cluster.submit("testing", topo.build())
    for _ in range(100):
        assert execute(drpc, "numwords", "the") == [[1]]
    assert execute(drpc, "numwords", "") == [[0]]
    assert execute(drpc, "numwords", "1 2 3 4 5 6 7 8") == [[8]]


def test_split_merge(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    topo = TridentTopology()
    stream = topo.new_drpc_stream("splitter", drpc)
    s1 = stream.each(["args"], Split(), ["word"]).project(["word"])
    s2 = stream.each(["args"], StringLength(), ["len"]).project(["len"])
    topo.merge(s1, s2)
    cluster.submit("testing", topo.build())
    assert multiset(execute(drpc, "splitter", "the man")) == multiset([[7], ["the"], ["man"]])
    assert multiset(execute(drpc, "splitter", "hello")) == multiset([[5], ["hello"]])


def test_multiple_groupings_of_the_same_stream(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    topo = TridentTopology()
    stream = topo.new_drpc_stream("tester", drpc).each(["args"], TrueFilter())
    s1 = stream.group_by(["args"]).aggregate(CountAsAggregator(), ["count"])
    s2 = stream.group_by(["args"]).aggregate(CountAsAggregator(), ["count"])
    topo.merge(s1, s2)
    cluster.submit("testing", topo.build())
    assert multiset(execute(drpc, "tester", "the")) == multiset([["the", 1], ["the", 1]])
    assert multiset(execute(drpc, "tester", "aaaaa")) == multiset([["aaaaa", 1], ["aaaaa", 1]])


def test_multi_repartition(cluster: LocalCluster, drpc: LocalDRPC) -> None:
    topo = TridentTopology()
    (topo.new_drpc_stream("tester", drpc).each(["args"], Split(), ["word"]).local_or_shuffle().shuffle()
     .aggregate(CountAsAggregator(), ["count"]))
    cluster.submit("testing", topo.build())
    assert execute(drpc, "tester", "the man") == [[2]]
    assert execute(drpc, "tester", "aaa") == [[1]]


def test_stream_projection_validation() -> None:
    feeder = FeederCommitterBatchSpout(["sentence"])
    topo = TridentTopology()
    word_count(topo, feeder)  # valid fields raise nothing
    stream = topo.new_stream("tester", feeder)
    with pytest.raises(TopologyValidationError):
        stream.each(["sentence1"], Split(), ["word"])
    with pytest.raises(TopologyValidationError):
        stream.each(["sentence"], Split(), ["word"]).group_by(["word1"])
    with pytest.raises(TopologyValidationError):
        stream.each(["sentence"], Split(), ["word"]).group_by(["word"]).persistent_aggregate(
            MemoryMapState.factory(), ["word1"], Count(), ["count"])
    with pytest.raises(TopologyValidationError):
        stream.project(["sentence1"])
    with pytest.raises(TopologyValidationError):
        stream.partition_aggregate(["sentence1"], Count(), ["count"])
    with pytest.raises(TopologyValidationError):
        stream.partition_by(["sentence1"])
    # The same transactional id twice builds nothing
    with pytest.raises(TopologyValidationError, match="two streams with the transactional id 'tester'"):
        topo.build()


def test_an_ungrouped_persistent_aggregate_is_one_value_read_by_snapshot_get(cluster: LocalCluster,
                                                                            drpc: LocalDRPC) -> None:
    from squall.trident import SnapshotGet

    topo = TridentTopology()
    feeder = FeederBatchSpout(["sentence"])
    total = (topo.new_stream("s", feeder).each(["sentence"], Split(), ["word"])
             .persistent_aggregate(MemoryMapState.factory(), Count(), ["total"]))
    topo.new_drpc_stream("total", drpc).state_query(total, SnapshotGet(), ["n"]).project(["n"])
    cluster.submit("snapshot", topo.build())
    feeder.feed([["a b c"], ["d"]])
    assert execute(drpc, "total", "x") == [[4]]
    feeder.feed([["e f"]])
    assert execute(drpc, "total", "x") == [[6]]


def test_a_request_whose_batch_fails_fails_at_once_and_later_requests_are_answered(
        cluster: LocalCluster, drpc: LocalDRPC) -> None:
    import time

    from squall.drpc import DRPCExecutionError
    from squall.errors import FailedException
    from squall.trident import Filter

    class Refuse(Filter):
        def is_keep(self, tup: Any) -> bool:
            if tup[0] == "boom":
                raise FailedException("boom is refused")
            return True

    topo = TridentTopology()
    topo.new_drpc_stream("echo", drpc).each(["args"], Refuse()).project(["args"])
    cluster.submit("refusing", topo.build())
    assert execute(drpc, "echo", "hello") == [["hello"]]
    started = time.monotonic()
    with pytest.raises(DRPCExecutionError, match="the Trident batch computing it failed"):
        drpc.execute("echo", "boom")
    assert time.monotonic() - started < 30  # not drpc.request.timeout.secs (600)
    assert execute(drpc, "echo", "again") == [["again"]]
