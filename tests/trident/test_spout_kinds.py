"""Every kind of spout new_stream takes feeds a Trident word count exactly, through a batch
that fails in its commit phase once and is replayed: Squall's partitioned and opaque memory
spouts (given as Cls.spec(...)), the Redis stream opaque spout against a real redis-server
into an opaque RedisMapState, and a plain at-least-once Spout (given as an instance, as
Storm's users write it) batched as Storm's RichSpoutBatchExecutor does: at most
topology.spout.max.batch.size tuples a batch, the same tuples on a replay, its message ids
acked once their batch has committed and never failed meanwhile.  A spout's partitions reach
the operations chained after it unchanged, and batch_global() after it sends a batch to one
task."""

from __future__ import annotations

import json
import threading
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from squall import LocalCluster, Spout
from squall.contrib.redis import RedisMapState, RedisStreamOpaqueSpout
from squall.contrib.redis.devserver import DevRedis
from squall.drpc import LocalDRPC
from squall.errors import FailedException, TopologyValidationError
from squall.testing import poll_for
from squall.topology.component import Bolt
from squall.transactional.memory import MemoryTransactionalSpout, OpaqueMemoryTransactionalSpout
from squall.trident import Count, Filter, MapGet, MemoryMapState, StateType, TridentTopology
from squall.trident.testing import Split

SENTENCES = ["the cow jumped over the moon", "the man went to the store and bought some candy",
             "four score and seven years ago", "how many apples can you eat", "to be or not to be the person"]
EXPECTED = Counter(word for s in SENTENCES for word in s.split())
FAST = {"topology.trident.batch.emit.interval.millis": 10}

EVENTS: dict[str, list[Any]] = {}  # per test: what the operations and spouts saw, in order
LOCK = threading.Lock()


def record(key: str, event: Any) -> None:
    with LOCK:
        EVENTS.setdefault(key, []).append(event)


def events(key: str) -> list[Any]:
    with LOCK:
        return list(EVENTS.get(key, []))


class FailOnce(Filter):
    """Fails its batch (FailedException) the first time it sees ``word``."""

    def __init__(self, key: str, word: str) -> None:
        super().__init__()
        self.key, self.word = key, word

    def is_keep(self, tup: Any) -> bool:
        if tup[0] == self.word and ("failed", self.word) not in events(self.key):
            record(self.key, ("failed", self.word))
            raise FailedException(f"the first {self.word!r} fails its batch")
        return True


class Record(Filter):
    """Records each tuple's values, with this task's index."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.index = context.this_task_index

    def is_keep(self, tup: Any) -> bool:
        record(self.key, (self.index, *tup.values))
        return True


@pytest.fixture
def run() -> Iterator[tuple[LocalCluster, LocalDRPC]]:
    EVENTS.clear()
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        yield cluster, drpc


def counted_words(topo: TridentTopology, stream: Any, factory: Any, key: str, drpc: LocalDRPC | None) -> Any:
    """A word count of ``stream``'s sentences whose commit phase fails once (at "moon")."""
    counts = (stream.each(["sentence"], Split(), ["word"]).group_by(["word"])
              .persistent_aggregate(factory, Count(), ["count"]).parallelism_hint(3))
    counts.new_values_stream().each(["word", "count"], FailOnce(key, "moon"))
    if drpc is not None:
        (topo.new_drpc_stream("counts", drpc).each(["args"], Split(), ["word"]).group_by(["word"])
         .state_query(counts, ["word"], MapGet(), ["count"]).project(["word", "count"]))
    return counts


def query_counts(drpc: LocalDRPC) -> dict[str, int]:
    return {word: count for word, count in json.loads(drpc.execute("counts", " ".join(EXPECTED)))}


class StormStyleOpaqueSpout(OpaqueMemoryTransactionalSpout):
    """A transactional spout made as Storm's users make theirs: ``new_stream(id, Spout(args))``."""

    outputs = ["tx", "sentence"]

    def __init__(self, partitions: list[list[list[str]]], take_per_batch: int) -> None:
        super().__init__()
        self.options = {"data": partitions, "take_per_batch": take_per_batch}


PARTITIONS = [[[s]] for s in SENTENCES[:2]] + [[[s] for s in SENTENCES[2:]]]
TRANSACTIONAL_SPOUTS = {
    "partitioned spec": (MemoryTransactionalSpout.spec(data=PARTITIONS, fields=["sentence"], par=2),
                         StateType.TRANSACTIONAL),
    "opaque spec": (OpaqueMemoryTransactionalSpout.spec(data=PARTITIONS, fields=["sentence"], par=2),
                    StateType.OPAQUE),
    "opaque instance": (StormStyleOpaqueSpout(PARTITIONS, 1), StateType.OPAQUE),
}


@pytest.mark.parametrize("name", list(TRANSACTIONAL_SPOUTS))
def test_transactional_memory_spouts_count_exactly_through_a_replay(
        run: tuple[LocalCluster, LocalDRPC], name: str) -> None:
    cluster, drpc = run
    spout, state_type = TRANSACTIONAL_SPOUTS[name]
    topo = TridentTopology()
    stream = topo.new_stream("sentences", spout).parallelism_hint(2)
    counted_words(topo, stream, MemoryMapState.factory(state_type), "t", drpc)
    cluster.submit("kinds", topo.build())
    poll_for(lambda: query_counts(drpc) == EXPECTED, timeout=60, message=f"the counts {dict(EXPECTED)}",
             interval=0.05)
    assert ("failed", "moon") in events("t")


def sentence_of(fields: dict[str, str]) -> list[Any]:
    return [fields["sentence"]]


def test_redis_stream_opaque_spout_counts_exactly_into_an_opaque_redis_map(
        run: tuple[LocalCluster, LocalDRPC], tmp_path: Path) -> None:
    cluster, _drpc = run
    server = DevRedis(tmp_path / "redis")
    server.start()
    try:
        conn = redis.Redis.from_url(server.url, decode_responses=True)
        for i, sentence in enumerate(SENTENCES):
            conn.xadd(f"sentences:{i % 2}", {"sentence": sentence})
        spout = RedisStreamOpaqueSpout.spec(url=server.url, stream="sentences:{}", partitions=2, batch_size=2,
                                            scheme=sentence_of, fields=["sentence"], poll_interval=0.01)
        topo = TridentTopology()
        counted_words(topo, topo.new_stream("redis-sentences", spout).parallelism_hint(2),
                      RedisMapState.opaque(server.url, namespace="words"), "r", None)
        cluster.submit("redis-kinds", topo.build())

        def stored() -> dict[str, int]:
            hashed = conn.hgetall("squall:trident:words")
            return {json.loads(k)[0]: json.loads(v)["curr"] for k, v in hashed.items()}

        poll_for(lambda: stored() == EXPECTED, timeout=60, message=f"the counts {dict(EXPECTED)} in Redis",
                 interval=0.05)
        assert ("failed", "moon") in events("r")
        conn.close()
    finally:
        server.stop()


class SentenceSpout(Spout):
    """An at-least-once spout of ``sentences`` (message id: the index), dealt to its tasks; a
    failed one is emitted again."""

    outputs = ["sentence"]

    def __init__(self, key: str, sentences: list[str]) -> None:
        super().__init__()
        self.key, self.sentences = key, sentences

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        index, tasks = context.this_task_index, len(context.this_component_tasks)
        self.queue = deque(i for i in range(len(self.sentences)) if i % tasks == index)

    def next_tuple(self) -> None:
        if self.queue:
            i = self.queue.popleft()
            self.emit([self.sentences[i]], tup_id=i)

    def ack(self, tup_id: Any) -> None:
        record(self.key, ("ack", tup_id))

    def fail(self, tup_id: Any) -> None:
        record(self.key, ("fail", tup_id))
        self.queue.append(tup_id)


def test_a_plain_spout_is_batched_replayed_alike_and_acked_once_committed(
        run: tuple[LocalCluster, LocalDRPC]) -> None:
    cluster, drpc = run
    topo = TridentTopology()
    sentences = topo.new_stream("plain", SentenceSpout("p", SENTENCES)).parallelism_hint(2)
    # A transactional map skips a txid it has stored: counts stay exact only if the replay of
    # the batch that failed after its commit carries the same sentences.
    counted_words(topo, sentences, MemoryMapState.factory(StateType.TRANSACTIONAL), "p", drpc)
    sentences.aggregate(Count(), ["n"]).each(["n"], Record("sizes"))
    cluster.submit("plain", topo.build(), conf={**FAST, "topology.spout.max.batch.size": 2})
    poll_for(lambda: query_counts(drpc) == EXPECTED, timeout=60, message=f"the counts {dict(EXPECTED)}",
             interval=0.05)
    everything = list(range(len(SENTENCES)))
    poll_for(lambda: sorted(i for kind, i in events("p") if kind == "ack") == everything, timeout=30,
             message="every sentence acked once")
    seen = events("p")
    assert not [e for e in seen if e[0] == "fail"]
    moon = next(i for i, s in enumerate(SENTENCES) if "moon" in s)
    assert seen.index(("failed", "moon")) < seen.index(("ack", moon))  # acked after its replay committed
    sizes = [n for _task, n in events("sizes")]
    assert max(sizes) <= 2 * 2  # two emitter tasks, at most two tuples each per batch
    assert sum(n for n in sizes if n) >= len(SENTENCES)


def test_a_spouts_partitions_reach_the_operations_after_it_unchanged(
        run: tuple[LocalCluster, LocalDRPC]) -> None:
    cluster, _drpc = run
    topo = TridentTopology()
    spout = MemoryTransactionalSpout.spec(data=[[["a"]] * 3, [["b"]] * 4], fields=["letter"],
                                          take_per_batch=10)
    letters = topo.new_stream("letters", spout).parallelism_hint(2)
    letters.each(["letter"], Record("letters"))
    letters.batch_global().each(["letter"], Record("global")).parallelism_hint(3)
    cluster.submit("identity", topo.build())
    poll_for(lambda: len(events("letters")) >= 7 and len(events("global")) >= 7, timeout=30,
             message="the letters")
    # Partition p is emitted by emitter task p (of 2), which feeds task p of the next bolt.
    assert Counter(events("letters")) == {(0, "a"): 3, (1, "b"): 4}
    # batch_global: the batch, both partitions, in one task
    assert len({task for task, _letter in events("global")}) == 1


class NoOutputs(Spout):
    pass


def test_new_stream_reads_each_kinds_fields_and_refuses_what_is_no_spout() -> None:
    topo = TridentTopology()
    memory = OpaqueMemoryTransactionalSpout.spec(data=[[["x", 1]]], fields=["word", "n"], par=3)
    stream = topo.new_stream("memory", memory).each(["word", "n"], Record("x"))
    assert stream.node.parents[0].fields == ["word", "n"]
    assert stream.node.parents[0].parallelism == 3
    assert topo.new_stream("plain", SentenceSpout("x", [])).node.fields == ["sentence"]
    assert topo.new_stream("class", SentenceSpout).node.fields == ["sentence"]
    components = topo.build()._definition.components.values()
    emitters = {c.name: {(i.component, i.stream) for i in c.inputs} for c in components}
    assert ("memory/coordinator", "$commit") in emitters["memory"]  # opaque: stores metadata on commit
    assert ("plain/coordinator", "$commit") not in emitters["plain"]
    for junk, said in [(object(), "is not a spout"), (NoOutputs(), "declares no output stream"),
                       (Bolt.spec(), "neither a transactional spout nor a Spout")]:
        with pytest.raises(TopologyValidationError, match=said):
            topo.new_stream("junk", junk)
