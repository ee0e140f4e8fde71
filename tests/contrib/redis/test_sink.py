"""Sink bolts: tuples land in a stream or in keys (at least once), and as committers of a
transactional topology exactly once: a replayed commit writes nothing twice."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from squall import FailedException, LocalCluster, Spout, Topology
from squall.contrib.redis.devserver import DevRedis
from squall.contrib.redis.sink import (
    RedisKeysCommitter,
    RedisKeysSink,
    RedisStreamCommitter,
    RedisStreamSink,
    redis_value,
)
from squall.errors import TopologyValidationError
from squall.testing import poll_for
from squall.topology.tuple import record_type
from squall.transactional import (
    MemoryTransactionalSpout,
    OpaqueMemoryTransactionalSpout,
    TransactionalTopology,
)
from squall.transactional.attempt import TransactionAttempt

N = 300


class Numbers(Spout):
    """Emits N (n, name, extra) tuples, reliably; records acks."""

    outputs = ["n", "name", "extra"]
    acked: set[int] = set()

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.todo = list(range(N))

    def next_tuple(self) -> None:
        if self.todo:
            n = self.todo.pop()
            self.emit([n, f"item{n}", {"even": n % 2 == 0}], n)

    def ack(self, msg_id: Any) -> None:
        Numbers.acked.add(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.todo.append(msg_id)


@pytest.fixture
def r(redis_server: DevRedis) -> Any:
    Numbers.acked = set()
    conn = redis.Redis.from_url(redis_server.url)
    yield conn
    conn.close()


def test_redis_value_passes_scalars_and_writes_the_rest_as_json() -> None:
    assert [redis_value(v) for v in ("s", b"b", 3, 1.5)] == ["s", b"b", 3, 1.5]
    assert [redis_value(v) for v in (None, True, [1, "a"], {"k": 1})] == [
        "null", "true", '[1,"a"]', '{"k":1}']


def test_specs_check_their_options() -> None:
    with pytest.raises(TopologyValidationError, match="needs stream"):
        RedisStreamSink.spec(inputs=[], url="redis://x")
    with pytest.raises(TopologyValidationError, match="needs value_field"):
        RedisKeysSink.spec(inputs=[], url="redis://x", key_field="k")
    with pytest.raises(TopologyValidationError, match=r"unknown options \['maxlen'\]"):
        RedisKeysSink.spec(inputs=[], url="redis://x", key_field="k", value_field="v", maxlen=3)
    spec = RedisStreamSink.spec(inputs=[], url="redis://x", stream="s", committer=True)
    assert spec.cls is RedisStreamCommitter and spec.committer


def test_the_stream_sink_xadds_every_tuple(redis_server: DevRedis, r: redis.Redis) -> None:
    class Out(Topology):
        numbers = Numbers.spec()
        sink = RedisStreamSink.spec(inputs=[numbers], url=redis_server.url, stream="out", par=2)

    with LocalCluster() as cluster:
        cluster.submit("out", Out)
        poll_for(lambda: len(Numbers.acked) == N, timeout=30, message="every tuple acked")
        assert not cluster.errors("out")
    entries = r.xrange("out")
    assert len(entries) == N  # no failures: each tuple written once
    fields = {int(f[b"n"]): f for _, f in entries}
    assert sorted(fields) == list(range(N))
    assert fields[4] == {b"n": b"4", b"name": b"item4", b"extra": b'{"even":true}'}


def test_the_stream_sink_trims_to_maxlen_and_writes_chosen_fields(redis_server: DevRedis,
                                                                   r: redis.Redis) -> None:
    class Out(Topology):
        numbers = Numbers.spec()
        sink = RedisStreamSink.spec(inputs=[numbers], url=redis_server.url, stream="out", maxlen=50,
                                    approximate=False, fields=["n"])

    with LocalCluster() as cluster:
        cluster.submit("out", Out)
        poll_for(lambda: len(Numbers.acked) == N, timeout=30, message="every tuple acked")
    assert r.xlen("out") == 50
    assert all(set(f) == {b"n"} for _, f in r.xrange("out"))


def test_the_keys_sink_sets_keys_or_hash_fields(redis_server: DevRedis, r: redis.Redis) -> None:
    class Out(Topology):
        numbers = Numbers.spec()
        keys = RedisKeysSink.spec(inputs=[numbers], url=redis_server.url, key_field="name",
                                  value_field="n", key_prefix="num:", ttl=600)
        fields = RedisKeysSink.spec(inputs=[numbers], url=redis_server.url, key_field="n",
                                    value_field="extra", hash="extras")

    with LocalCluster() as cluster:
        cluster.submit("out", Out)
        poll_for(lambda: len(Numbers.acked) == N and r.hlen("extras") == N, timeout=30,
                 message="every tuple written")
    assert r.get("num:item7") == b"7"
    assert 0 < r.ttl("num:item7") <= 600
    assert r.hget("extras", "8") == b'{"even":true}'


def test_a_refused_write_fails_the_tuple_and_is_reported(redis_server: DevRedis, r: redis.Redis) -> None:
    # Given the target key is not a stream, so every XADD is refused
    r.set("out", "not a stream")

    class Out(Topology):
        config = {"topology.max.spout.pending": 10}
        numbers = Numbers.spec()
        sink = RedisStreamSink.spec(inputs=[numbers], url=redis_server.url, stream="out")

    with LocalCluster() as cluster:
        cluster.submit("out", Out)
        poll_for(lambda: cluster.errors("out"), timeout=30, message="the refusal reported")
        assert "WRONGTYPE" in cluster.errors("out")[0].error
        assert not any(e.fatal for e in cluster.errors("out"))
        assert cluster.stats("out")["numbers"]["acked"] == 0  # failed, to replay
        poll_for(lambda: cluster.stats("out")["numbers"]["failed"] > 0, timeout=10, message="tuples failed")


@pytest.fixture
def resources() -> Iterator[dict[str, Any]]:
    """A worker's resources, closed at the end as the worker closes them when it stops."""
    made: dict[str, Any] = {}
    yield made
    for resource in made.values():
        resource.close()


def _committer(cls: type, url: str, txid: int, task_index: int = 0, *, resources: dict[str, Any],
               **options: Any) -> Any:
    """A committer as a transactional topology runs it: a fresh instance for one attempt."""
    bolt = cls()
    bolt.options = {"url": url, **options}
    context = SimpleNamespace(topology_name="topo", component_id="sink", task_id=7 + task_index,
                              this_task_index=task_index, resources=resources)
    bolt.initialize({}, context, TransactionAttempt(txid, txid * 100 + task_index))
    return bolt


def _batch(bolt: Any, rows: list[tuple[int, str]]) -> None:
    record = record_type(("tx", "n", "word"))
    for n, word in rows:
        bolt.process(SimpleNamespace(values=record(bolt.attempt, n, word)))
    bolt.finish_batch()


def test_a_replayed_stream_commit_writes_nothing_twice(redis_server: DevRedis, r: redis.Redis,
                                                       resources: dict[str, Any]) -> None:
    # Given txid 1 committed by two tasks
    for task in (0, 1):
        bolt = _committer(RedisStreamCommitter, redis_server.url, 1, task, resources=resources, stream="out")
        _batch(bolt, [(task, "a"), (task + 10, "b")])
        assert bolt.written
    # When txid 1 is committed again (a replay: the coordinator never heard of the first), or a stale 0
    replay = _committer(RedisStreamCommitter, redis_server.url, 1, 0, resources=resources, stream="out")
    _batch(replay, [(0, "a"), (10, "b")])
    # Then nothing more is written
    assert replay.written is False
    assert r.xlen("out") == 4
    assert r.xrange("out")[0][1] == {b"n": b"0", b"word": b"a"}  # no attempt field
    # and txid 2 is
    later = _committer(RedisStreamCommitter, redis_server.url, 2, 0, resources=resources, stream="out")
    _batch(later, [(5, "c")])
    assert later.written and r.xlen("out") == 5
    assert r.hgetall("squall:sink:out") == {b"topo:sink:0": b"2", b"topo:sink:1": b"1"}


def test_a_replayed_keys_commit_writes_nothing_twice(redis_server: DevRedis, r: redis.Redis,
                                                     resources: dict[str, Any]) -> None:
    keys = {"key_field": "word", "value_field": "n", "hash": "h"}
    bolt = _committer(RedisKeysCommitter, redis_server.url, 3, resources=resources, **keys)
    _batch(bolt, [(1, "a"), (2, "b")])
    r.hset("h", "a", "changed by someone else")
    replay = _committer(RedisKeysCommitter, redis_server.url, 3, resources=resources, **keys)
    _batch(replay, [(1, "a"), (2, "b")])
    assert replay.written is False
    assert r.hgetall("h") == {b"a": b"changed by someone else", b"b": b"2"}


class Numbered(MemoryTransactionalSpout):
    pass


FAILED: set[int] = set()
LOCK = threading.Lock()


class FailAfterWrite(RedisStreamCommitter):
    """Fails the first attempt of txids 2 and 3 *after* its write: the commit replays."""

    def finish_batch(self) -> None:
        super().finish_batch()
        with LOCK:
            if self.attempt.txid in (2, 3) and self.attempt.txid not in FAILED:
                FAILED.add(self.attempt.txid)
                msg = "injected after the write"
                raise FailedException(msg)


def test_a_transactional_topology_writes_each_number_once_through_replayed_commits(
        redis_server: DevRedis, r: redis.Redis) -> None:
    FAILED.clear()
    data = [[[n] for n in range(p * 40, p * 40 + 40)] for p in range(2)]

    class Copy(TransactionalTopology):
        spout = Numbered.spec(data=data, fields=["n"], take_per_batch=5, par=2)
        sink = FailAfterWrite.spec(inputs=[spout], url=redis_server.url, stream="out", par=2)

    with LocalCluster() as cluster:
        cluster.submit("copy", Copy)

        def all_committed() -> bool:
            # 8 txids carry data (2 partitions x 40 numbers, 5 a batch), committed by both tasks.
            marker = r.hgetall("squall:sink:out")
            return len(marker) == 2 and min(int(t) for t in marker.values()) >= 8 and len(FAILED) == 2

        poll_for(all_committed, timeout=60, message="every batch committed")
    assert {2, 3} == FAILED
    numbers = sorted(int(f[b"n"]) for _, f in r.xrange("out"))
    assert numbers == list(range(80))


@pytest.mark.parametrize("committer", [RedisStreamCommitter, RedisKeysCommitter])
def test_a_sink_committer_under_an_opaque_spout_is_refused_at_definition(committer: Any) -> None:
    # The marker skips a replayed txid whole; an opaque spout's replay may carry other tuples,
    # and the ones only the replay read would never be written
    keys = {"key_field": "n", "value_field": "n"}
    options = {"stream": "out"} if committer is RedisStreamCommitter else keys

    with pytest.raises(TopologyValidationError, match=r"skips a replayed txid whole.*opaque spout 'spout'"):
        class Copy(TransactionalTopology):
            spout = OpaqueMemoryTransactionalSpout.spec(data=[[[1]]], fields=["n"])
            sink = committer.spec(inputs=[spout], url="redis://127.0.0.1:1", **options)

    # while a partitioned spout, whose replays are exact, is fine
    class Exact(TransactionalTopology):
        spout = MemoryTransactionalSpout.spec(data=[[[1]]], fields=["n"])
        sink = committer.spec(inputs=[spout], url="redis://127.0.0.1:1", **options)

    assert Exact.definition().components["sink"].options["committer"]
