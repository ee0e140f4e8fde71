"""Trident in local mode, the operations' semantics (Storm's): each appends, map replaces,
filters keep, project picks, aggregations per partition, per group and globally (an empty
batch answers zero()), chained aggregators, min_by/max_by, merge and join, and a batch's
results fed by FeederBatchSpout, committed before feed() returns.  The states here are a
plain dict: squall.trident.state's have their own tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from squall import LocalCluster
from squall.errors import TopologyValidationError
from squall.trident.operations import (
    Aggregator,
    CombinerAggregator,
    Count,
    Filter,
    Function,
    ReducerAggregator,
    StateUpdater,
    Sum,
)
from squall.trident.stream import TridentTopology
from squall.trident.testing import CountAsAggregator, FeederBatchSpout, Split

# -- a state that keeps what each batch gave it, in this process ---------------------------------

STORES: dict[str, dict[Any, Any]] = {}
BATCHES: dict[str, list[list[list[Any]]]] = {}
LOCK = threading.Lock()


class DictMap:
    def __init__(self, name: str) -> None:
        self.store = STORES.setdefault(name, {})

    def begin_commit(self, txid: int) -> None:
        pass

    def commit(self, txid: int) -> None:
        pass

    def multi_get(self, keys: list[list[Any]]) -> list[Any]:
        with LOCK:
            return [self.store.get(tuple(k)) for k in keys]

    def multi_update(self, keys: list[list[Any]], updaters: list[Any]) -> list[Any]:
        with LOCK:
            out = []
            for key, update in zip(keys, updaters, strict=True):
                self.store[tuple(key)] = value = update(self.store.get(tuple(key)))
                out.append(value)
            return out

    def get(self) -> Any:
        return self.store.get(())

    def set(self, value: Any) -> None:  # noqa: A003 - Storm's Snapshottable
        self.store[()] = value


class DictFactory:
    def __init__(self, name: str) -> None:
        self.name = name

    def make_state(self, conf: dict[str, Any], context: Any, index: int, n: int) -> DictMap:
        return DictMap(self.name)


class Collect(StateUpdater):
    """Keeps each batch's tuples (of every partition) under ``name``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def update_state(self, state: Any, tuples: list[Any], collector: Any) -> None:
        with LOCK:
            BATCHES.setdefault(self.name, []).append([list(t.values) for t in tuples])


def collected(name: str) -> list[list[Any]]:
    """Every tuple the collector kept, over every batch, sorted."""
    with LOCK:
        return sorted((row for batch in BATCHES.get(name, []) for row in batch), key=repr)


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    STORES.clear()
    BATCHES.clear()
    with LocalCluster() as c:
        yield c


def sink(stream: Any, name: str) -> None:
    stream.partition_persist(DictFactory(name), stream.get_output_fields(), Collect(name))


# -- operations ------------------------------------------------------------------------------


class AddOne(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0] + 1])


class Twice(Function):
    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup["n"] * 2])
        collector.emit([tup["n"] * 2 + 1])


class Odd(Filter):
    def is_keep(self, tup: Any) -> bool:
        return tup[0] % 2 == 1


class Concat(ReducerAggregator):
    def init(self) -> str:
        return ""

    def reduce(self, curr: str, tup: Any) -> str:
        return curr + str(tup[0])


class Max(CombinerAggregator):
    def init(self, tup: Any) -> int:
        return tup[0]

    def combine(self, a: int, b: int) -> int:
        return max(a, b)

    def zero(self) -> int:
        return -1


class Pairs(Aggregator):
    def init(self, batch_id: Any, collector: Any) -> list[Any]:
        return []

    def aggregate(self, state: list[Any], tup: Any, collector: Any) -> None:
        state.append(tup[0])

    def complete(self, state: list[Any], collector: Any) -> None:
        for n in sorted(state):
            collector.emit([n, -n])


def test_each_appends_filters_keep_map_replaces_project_picks(cluster: LocalCluster) -> None:
    t = TridentTopology()
    feeder = FeederBatchSpout(["n", "name"])
    s = t.new_stream("numbers", feeder).parallelism_hint(2)
    sink(s.each(["n"], AddOne(), ["m"]), "each")
    sink(s.each(["n"], Twice(), ["k"]).project(["k"]), "two-emits")
    sink(s.each(["n"], Odd()), "odd")
    sink(s.map(lambda tup: [tup["name"].upper()], ["shout"]), "map")
    sink(s.flat_map(lambda tup: [[c] for c in tup["name"]], ["letter"]), "flat_map")
    cluster.submit("ops", t.build())
    feeder.feed([[1, "a"], [2, "bc"], [3, "d"]])
    assert collected("each") == [[1, "a", 2], [2, "bc", 3], [3, "d", 4]]
    assert collected("two-emits") == [[2], [3], [4], [5], [6], [7]]
    assert collected("odd") == [[1, "a"], [3, "d"]]
    assert collected("map") == [["A"], ["BC"], ["D"]]
    assert collected("flat_map") == [["a"], ["b"], ["c"], ["d"]]


def test_min_by_and_max_by_answer_once_per_partition_as_storms(cluster: LocalCluster) -> None:
    # Storm's Stream.minBy is a partitionAggregate: with the batch in two partitions (by
    # word: "a" and "d" hash to different ones) each partition gives its own least tuple.
    t = TridentTopology()
    feeder = FeederBatchSpout(["word", "n"])
    parts = t.new_stream("words", feeder).partition_by(["word"]).peek(lambda tup: None).parallelism_hint(2)
    sink(parts.min_by("n"), "min")
    sink(parts.max_by("n"), "max")
    cluster.submit("by", t.build())
    feeder.feed([["a", 3], ["d", 5], ["a", 1], ["d", 4]])
    assert sorted(collected("min")) == [["a", 1], ["d", 4]]
    assert sorted(collected("max")) == [["a", 3], ["d", 5]]


def test_aggregations_by_partition_by_group_and_over_the_batch(cluster: LocalCluster) -> None:
    t = TridentTopology()
    feeder = FeederBatchSpout(["word", "n"])
    s = t.new_stream("words", feeder)
    sink(s.aggregate(["n"], Sum(), ["sum"]), "sum")
    sink(s.aggregate(Count(), ["count"]), "count")  # Storm's two-argument form
    sink(s.group_by(["word"]).aggregate(["n"], Max(), ["max"]), "max-by-word")
    sink(s.group_by(["word"]).aggregate(["n"], Concat(), ["all"]), "reduce-by-word")
    sink(s.aggregate(["n"], CountAsAggregator(), ["c"]), "count-as")
    chain = s.chained_agg().aggregate(["n"], Sum(), ["sum"]).aggregate(["n"], Max(), ["max"]).chain_end()
    sink(chain, "chain")
    mixed = (s.chained_agg().aggregate(["n"], Sum(), ["sum"])
             .aggregate(["n"], CountAsAggregator(), ["c"]).chain_end())
    sink(mixed, "mixed-chain")
    sink(s.min_by("n"), "min")
    sink(s.max_by("n"), "max")
    sink(s.aggregate(["n"], Pairs(), ["n2", "neg"]), "pairs")
    cluster.submit("aggs", t.build())
    feeder.feed([["a", 1], ["b", 5], ["a", 3]])
    assert collected("sum") == [[9]]
    assert collected("count") == [[3]]
    assert collected("max-by-word") == [["a", 3], ["b", 5]]
    assert sorted(collected("reduce-by-word")) in ([["a", "13"], ["b", "5"]], [["a", "31"], ["b", "5"]])
    assert collected("count-as") == [[3]]
    assert collected("chain") == [[9, 5]]
    assert collected("mixed-chain") == [[9, 3]]  # a combiner beside a general aggregator
    assert collected("min") == [["a", 1]] and collected("max") == [["b", 5]]
    assert collected("pairs") == [[1, -1], [3, -3], [5, -5]]
    # An empty batch: every global aggregation still answers (zero(), init()), groups none
    for name in BATCHES:
        BATCHES[name].clear()
    feeder.feed([])
    assert collected("sum") == [[0]] and collected("count") == [[0]] and collected("count-as") == [[0]]
    assert collected("max-by-word") == [] and collected("chain") == [[0, -1]]


def test_persistent_word_count_commits_before_feed_returns(cluster: LocalCluster) -> None:
    t = TridentTopology()
    feeder = FeederBatchSpout(["sentence"])
    (t.new_stream("tester", feeder).each(["sentence"], Split(), ["word"])
     .group_by(["word"]).persistent_aggregate(DictFactory("counts"), Count(), ["count"]).parallelism_hint(3))
    total = t.new_stream("totals", FeederBatchSpout(["x"]))  # a second batch group, fed nothing
    total.persistent_aggregate(DictFactory("unused"), Count(), ["n"])
    cluster.submit("wordcount", t.build())
    feeder.feed([["hello the man said"], ["the"]])
    assert STORES["counts"] == {("hello",): 1, ("the",): 2, ("man",): 1, ("said",): 1}
    feeder.feed([["the man"]])
    assert STORES["counts"][("the",)] == 3 and STORES["counts"][("man",)] == 2


def test_merge_and_join_within_a_batch(cluster: LocalCluster) -> None:
    t = TridentTopology()
    feeder = FeederBatchSpout(["id", "v"])
    s = t.new_stream("rows", feeder)
    odd = s.each(["id"], Odd())
    sink(t.merge(odd, s.each(["id"], Odd()).project(["id", "v"])), "merge")
    lengths = s.map(lambda tup: [tup["id"], len(tup["v"])], ["key", "len"])
    sink(t.join(s, ["id"], lengths, ["key"], ["id", "v", "len"]), "join")
    cluster.submit("merge-join", t.build())
    feeder.feed([[1, "x"], [2, "yy"], [3, "zzz"]])
    assert collected("merge") == [[1, "x"], [1, "x"], [3, "zzz"], [3, "zzz"]]
    assert collected("join") == [[1, "x", 1], [2, "yy", 2], [3, "zzz", 3]]


def test_fields_are_checked_where_the_call_is_made() -> None:
    t = TridentTopology()
    s = t.new_stream("s", FeederBatchSpout(["sentence"]))
    with pytest.raises(TopologyValidationError, match="no field 'sentense'"):
        s.each(["sentense"], Split(), ["word"])
    words = s.each(["sentence"], Split(), ["word"])
    with pytest.raises(TopologyValidationError, match="output field 'word' is already in the stream"):
        words.each(["sentence"], Split(), ["word"])
    with pytest.raises(TopologyValidationError, match="no field 'w'"):
        words.group_by(["w"])
    with pytest.raises(TopologyValidationError, match="no field 'count'"):
        words.project(["word", "count"])
    with pytest.raises(TopologyValidationError, match="expected a Function"):
        words.each(["word"], Count(), ["n"])
    with pytest.raises(TopologyValidationError, match="merged streams have as many"):
        t.merge(s, words)
    t.new_stream("s", FeederBatchSpout(["x"]))  # Storm lets it be written; nothing builds with it
    with pytest.raises(TopologyValidationError, match="two streams with the transactional id 's'"):
        t.build()


def test_the_rest_api_shows_batch_groups_and_each_bolts_operations(cluster: LocalCluster) -> None:
    import httpx

    from squall.local.ui import LocalUiServer

    t = TridentTopology()
    feeder = FeederBatchSpout(["sentence"])
    (t.new_stream("tester", feeder).each(["sentence"], Split(), ["word"])
     .group_by(["word"]).persistent_aggregate(DictFactory("counts"), Count(), ["count"]))
    cluster.submit("wc", t.build("WordCountTrident"))
    server = LocalUiServer(cluster, "127.0.0.1", 0).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30, trust_env=False,
                          headers={"Authorization": f"Bearer {server.gate.token}"}) as ui:
            page = ui.get("/api/v1/topology/wc").json()
            assert page["batchGroups"] == {"tester": ["b-0", "b-1", "tester", "tester/coordinator"]}
            bolts = {b["boltId"]: b for b in page["bolts"]}
            assert bolts["b-0"]["tridentOperations"] == [
                "each(Split: sentence -> sentence, word)",
                "aggregate(Count partial: sentence, word -> word, trident_partial0)"]
            assert bolts["b-1"]["tridentRole"] == "committer"
            assert bolts["b-1"]["tridentOperations"] == [
                "partition_persist(MapAggUpdater: word, trident_partial0 -> word, count)"]
            component = ui.get("/api/v1/topology/wc/component/b-0").json()
            assert component["batchGroup"] == "tester" and component["tridentRole"] == "operations"
    finally:
        server.stop()


def test_a_query_reads_the_partition_of_the_state_its_key_is_in(cluster: LocalCluster) -> None:
    # (a state kept in 3 partitions, queried from another stream: each key's count, and the
    # whole state through broadcast and TupleCollectionGet)
    from squall.trident import MapGet, MemoryMapState, TupleCollectionGet

    t = TridentTopology()
    sentences = FeederBatchSpout(["sentence"])
    counts = (t.new_stream("sentences", sentences).each(["sentence"], Split(), ["word"])
              .group_by(["word"]).persistent_aggregate(MemoryMapState.factory(), Count(), ["count"])
              .parallelism_hint(3))
    queries = FeederBatchSpout(["q"])
    asked = t.new_stream("queries", queries)
    sink(asked.each(["q"], Split(), ["word"]).group_by(["word"])
         .state_query(counts, ["word"], MapGet(), ["count"]).project(["word", "count"]), "counts")
    sink(asked.broadcast().state_query(counts, TupleCollectionGet(), ["word", "n"]).project(["word", "n"]),
         "whole")
    cluster.submit("queried", t.build())
    sentences.feed([["the cow the moon"], ["the end"], ["a cow"]])
    queries.feed([["the cow nothing"]])
    assert collected("counts") == [["cow", 2], ["nothing", None], ["the", 3]]
    assert collected("whole") == [["a", 1], ["cow", 2], ["end", 1], ["moon", 1], ["the", 3]]
