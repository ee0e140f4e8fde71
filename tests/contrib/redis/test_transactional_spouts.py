"""The Redis Streams transactional spouts in local mode, against a real redis-server:
exact counts through injected failures, byte-exact replays, the opaque spout
over a stream trimmed under it, the partitioned spout's clear error when it
cannot replay, and Redis down at start and in the middle."""

from __future__ import annotations

import itertools
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
import structlog

from squall import FailedException, FakeClock, Grouping, LocalCluster
from squall.contrib.redis.devserver import DevRedis
from squall.contrib.redis.store import RedisStore
from squall.contrib.redis.transactional import (
    RedisStreamOpaqueSpout,
    RedisStreamPartitionedSpout,
    ReplayLost,
    scheme_path,
    stream_names,
)
from squall.errors import TopologyValidationError
from squall.metrics.registry import MetricsRegistry
from squall.state import OpaqueMap, TransactionalMap
from squall.testing import poll_for
from squall.transactional import BatchBolt, Committer, TransactionalTopology
from tests.helpers import stay

STREAMS = ["s0", "s1", "s2"]
KEYS = [f"k{i}" for i in range(7)]
RUNS: dict[str, Run] = {}
_names = itertools.count()


class Run:
    """One test's knobs and record, found by the components through ``test.run``."""

    def __init__(self, url: str, opaque: bool = False, **knobs: Any) -> None:
        self.name = f"redis-tx-{next(_names)}"
        self.url, self.opaque, self.knobs = url, opaque, knobs
        self.lock = threading.Lock()
        self.seen: dict[tuple[int, int], list[tuple[str, str]]] = defaultdict(list)  # (txid, attempt) -> ids
        self.commits: list[tuple[int, int]] = []  # (txid, attempt id) per successful commit
        self.fired: set[tuple[str, int]] = set()
        self.spout_failures = 0
        RUNS[self.name] = self

    def once(self, knob: str, txid: int) -> bool:
        """True the first time ``knob`` is asked about one of its txids."""
        with self.lock:
            if txid in self.knobs.get(knob, ()) and (knob, txid) not in self.fired:
                self.fired.add((knob, txid))
                return True
        return False

    def state(self) -> TransactionalMap | OpaqueMap:
        store = RedisStore(self.url, namespace=self.name)
        return OpaqueMap(store) if self.opaque else TransactionalMap(store)

    def counts(self) -> dict[str, int]:
        try:
            values = self.state().get_many(KEYS)
        except Exception:  # noqa: BLE001 - Redis may be down while the test polls
            return {}
        return {k: n for k, n in zip(KEYS, values, strict=True) if n}

    def committed_ids(self) -> list[tuple[str, str]]:
        """The entries of the last attempt of each committed txid: what the state counts."""
        last = dict(self.commits)
        return [i for (txid, attempt), ids in self.seen.items() if last.get(txid) == attempt for i in ids]


class ProbedPartitioned(RedisStreamPartitionedSpout):
    def call(self, partition: int, fn: Any) -> Any:
        try:
            return super().call(partition, fn)
        except FailedException:
            RUNS[self.conf["test.run"]].spout_failures += 1
            raise


class ProbedOpaque(RedisStreamOpaqueSpout):
    pass


class CountKeys(BatchBolt):
    """Partial counts per key of the batch; records the entries it saw."""

    outputs = ["tx", "key", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.run = RUNS[conf["test.run"]]
        self.attempt = attempt
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        _tx, stream, entry_id, fields = tup.values
        txid = self.attempt.txid
        trim = self.run.knobs.get("trim_in", {}).get(txid)
        if trim and self.run.once("trim_in", txid):
            # The batch was read; trim under it, then fail it: the replay finds the entries gone.
            with redis.Redis.from_url(self.run.url) as r:
                for name in STREAMS:
                    r.xtrim(name, minid=trim, approximate=False)
            msg = f"injected: txid {txid} fails after its entries were trimmed"
            raise FailedException(msg)
        self.run.seen[(txid, self.attempt.attempt_id)].append((stream, entry_id))
        self.counts[fields["k"]] += 1

    def finish_batch(self) -> None:
        if self.run.once("fail_finish", self.attempt.txid):
            msg = "injected batch bolt failure"
            raise FailedException(msg)
        for key, n in self.counts.items():
            self.emit([self.attempt, key, n])


class CommitCounts(Committer, BatchBolt):
    outputs = []
    states: dict[str, Any] = {}

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.run = RUNS[conf["test.run"]]
        self.attempt = attempt
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.key] += tup.values.count

    def finish_batch(self) -> None:
        txid = self.attempt.txid
        if self.run.once("fail_commit_before", txid):
            msg = "injected committer failure before the write"
            raise FailedException(msg)
        if self.run.name not in self.states:
            self.states[self.run.name] = self.run.state()
        self.states[self.run.name].increment(txid, dict(self.counts))
        if self.run.once("fail_commit_after", txid):
            msg = "injected committer failure after the write"
            raise FailedException(msg)
        self.run.commits.append((txid, self.attempt.attempt_id))


class PartitionedCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3, "topology.message.timeout.secs": 10}
    spout = ProbedPartitioned.spec(streams=STREAMS, batch_size=7, par=2, poll_interval=0.02)
    count = CountKeys.spec(inputs=[spout], par=2)
    commit = CommitCounts.spec(inputs={count: Grouping.fields("key")}, par=2)


class OpaqueCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 2, "topology.message.timeout.secs": 10}
    spout = ProbedOpaque.spec(streams=STREAMS, batch_size=5, par=1, poll_interval=0.02)
    count = CountKeys.spec(inputs=[spout], par=2)
    commit = CommitCounts.spec(inputs={count: Grouping.fields("key")})


def fill(url: str, per_stream: int) -> Counter[str]:
    """``per_stream`` entries in each stream, ids ``n-0`` from 1; the expected count per key."""
    expected: Counter[str] = Counter()
    with redis.Redis.from_url(url) as r:
        pipe = r.pipeline(transaction=False)
        for p, name in enumerate(STREAMS):
            for i in range(per_stream):
                key = KEYS[(i * 3 + p) % len(KEYS)]
                pipe.xadd(name, {"k": key, "n": str(i)}, id=f"{i + 1}-0")
                expected[key] += 1
        pipe.execute()
    return expected


@pytest.fixture
def runs() -> Iterator[None]:
    yield
    RUNS.clear()
    for state in CommitCounts.states.values():
        state.store.close()
    CommitCounts.states.clear()


def sigkill(server: DevRedis) -> None:
    server.kill()
    server.stop()  # closes its log file (kill() leaves it open; start() opens another)


def assert_ordered(run: Run) -> None:
    firsts = list(dict.fromkeys(t for t, _a in run.commits))
    assert firsts == list(range(1, len(firsts) + 1)), f"commits out of order or missing: {firsts}"


def test_spec_options_are_checked() -> None:
    assert stream_names(None, "clicks:{}", 3, "w") == ["clicks:0", "clicks:1", "clicks:2"]
    assert stream_names("one", None, None, "w") == ["one"]
    for streams, stream, partitions in [(None, None, None), (["a"], "b:{}", 2), (None, "nopattern", 2),
                                        (None, "c:{}", 0), (["a", "a"], None, None), (["a"], None, 2)]:
        with pytest.raises(TopologyValidationError):
            stream_names(streams, stream, partitions, "w")
    assert scheme_path(fill, "w") == f"{__name__}:fill"
    with pytest.raises(TopologyValidationError, match="lambdas"):
        scheme_path(lambda f: [f], "w")
    with pytest.raises(TopologyValidationError, match="needs fields"):
        RedisStreamOpaqueSpout.spec(streams=["a"], scheme=f"{__name__}:fill")
    with pytest.raises(TopologyValidationError, match="batch_size"):
        RedisStreamOpaqueSpout.spec(streams=["a"], batch_size=0)
    spec = RedisStreamPartitionedSpout.spec(stream="x:{}", partitions=2, scheme=fill, fields=["a", "b"])
    assert spec.options["streams"] == ["x:0", "x:1"]
    assert spec.options["scheme"] == f"{__name__}:fill"


def test_partitioned_spout_counts_exactly_through_injected_failures(redis_server: DevRedis,
                                                                    runs: Any) -> None:
    # Given 3 streams of 60 entries and failures injected in a batch bolt and a committer
    expected = fill(redis_server.url, 60)
    run = Run(redis_server.url, fail_finish=[2], fail_commit_before=[3], fail_commit_after=[4])
    with LocalCluster() as cluster:
        # When the partitioned count runs
        cluster.submit("pc", PartitionedCount, {"test.run": run.name, "redis.url": redis_server.url})
        poll_for(lambda: run.counts() == dict(expected), timeout=60,
                 message=f"exact counts (now {run.counts()}, fired {run.fired})")
        assert not cluster.errors("pc")
    # Then every failure fired, the counts are exact, commits came in txid order
    assert run.fired == {("fail_finish", 2), ("fail_commit_before", 3), ("fail_commit_after", 4)}
    assert_ordered(run)
    # and each replay read the very same entries (ids) as the first attempt
    by_txid: dict[int, list[list[tuple[str, str]]]] = defaultdict(list)
    for (txid, _attempt), ids in run.seen.items():
        by_txid[txid].append(sorted(ids))
    replayed = {t: b for t, b in by_txid.items() if len(b) > 1}
    assert {2, 3, 4} <= set(replayed), replayed.keys()
    for txid, batches in replayed.items():
        assert all(b == batches[0] for b in batches), f"txid {txid} replayed different entries"
    # and the committed entries are every entry once
    committed = run.committed_ids()
    assert len(committed) == len(set(committed)) == 3 * 60


def test_opaque_spout_stays_exact_when_the_stream_is_trimmed_before_a_replay(
        redis_server: DevRedis, runs: Any) -> None:
    # Given 40 entries per stream, read 5 per stream per batch, and txid 3's first
    # attempt failing after it read entries 11-15, once entries before id 18 were trimmed
    expected_all = fill(redis_server.url, 40)
    run = Run(redis_server.url, opaque=True, trim_in={3: "18-0"})
    with LocalCluster() as cluster:
        cluster.submit("oc", OpaqueCount, {"test.run": run.name, "redis.url": redis_server.url})
        poll_for(lambda: run.counts() and sum(run.counts().values()) >= 3 * (40 - 7) and run.fired,
                 timeout=60, message=f"the remaining entries counted (now {run.counts()})")
        assert stay(lambda: sum(run.counts().values()) == 3 * (40 - 7), 0.5)
        assert not cluster.errors("oc")
    # Then the replay resumed at the oldest remaining entry (18): 16 and 17 were
    # never counted, 11-15 only in the failed attempt, and nothing counted twice
    committed = run.committed_ids()
    assert len(committed) == len(set(committed))
    ids = {int(i.split("-")[0]) for _s, i in committed}
    assert ids == set(range(1, 11)) | set(range(18, 41))
    counted = Counter(KEYS[((int(i.split("-")[0]) - 1) * 3 + STREAMS.index(s)) % len(KEYS)]
                      for s, i in committed)
    assert run.counts() == dict(counted)
    assert sum(counted.values()) < sum(expected_all.values())
    assert_ordered(run)


def test_partitioned_spout_refuses_to_replay_a_trimmed_range(redis_server: DevRedis, runs: Any) -> None:
    # Given txid 3's first attempt failing once its entries were trimmed away
    fill(redis_server.url, 60)
    run = Run(redis_server.url, trim_in={3: "20-0"})
    with LocalCluster() as cluster:
        cluster.submit("pc", PartitionedCount, {"test.run": run.name, "redis.url": redis_server.url})
        # Then the replay is a reported error that names the way out, and txid 3 never commits
        poll_for(lambda: any("RedisStreamOpaqueSpout" in e.error for e in cluster.errors("pc")),
                 timeout=60, message="the replay error")
        errors = [e for e in cluster.errors("pc") if "RedisStreamOpaqueSpout" in e.error]
        assert ReplayLost.__name__ in errors[0].error and "cannot be replayed exactly" in errors[0].error
        assert not any(e.fatal for e in cluster.errors("pc"))
        assert 3 not in {t for t, _a in run.commits}


class DeadLetteringCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3, "topology.message.timeout.secs": 10}
    spout = ProbedPartitioned.spec(streams=STREAMS, batch_size=7, par=2, poll_interval=0.02,
                                   dead_letter="dead")
    count = CountKeys.spec(inputs=[spout], par=2)
    commit = CommitCounts.spec(inputs={count: Grouping.fields("key")}, par=2)


def test_an_entry_that_is_not_utf8_is_left_out_exactly_once_through_a_replay(
        redis_server: DevRedis, runs: Any) -> None:
    # Given 3 streams of 30 entries and one more at the end of s0 that is not UTF-8,
    # and every batch failing once (so the one that reads it is replayed)
    expected = fill(redis_server.url, 30)
    with redis.Redis.from_url(redis_server.url) as r:
        r.xadd("s0", NOT_UTF8, id="30-1")
    run = Run(redis_server.url, fail_finish=range(1, 6))  # 5 batches of 7 read s0's 31
    with LocalCluster() as cluster:
        cluster.submit("pc", DeadLetteringCount, {"test.run": run.name, "redis.url": redis_server.url})
        poll_for(lambda: run.counts() == dict(expected), timeout=60,
                 message=f"exact counts (now {run.counts()}, fired {run.fired})")
        errors = cluster.errors("pc")
    # Then the good entries are counted exactly once, the bad one never (in no attempt)
    assert run.fired == {("fail_finish", t) for t in range(1, 6)}
    assert len([key for key, ids in run.seen.items() if ("s0", "30-0") in ids]) >= 2  # its batch replayed
    assert all(("s0", "30-1") not in ids for ids in run.seen.values())
    # and it was reported once, and copied once to the dead-letter stream, replay or not
    assert len(errors) == 1 and "malformed entry 30-1 of stream 's0'" in errors[0].error, errors
    assert not errors[0].fatal
    with redis.Redis.from_url(redis_server.url) as r:
        [(_id, letter)] = r.xrange("dead")
    assert letter[b"squall.id"] == b"30-1" and letter[b"k"] == b"caf\xe9"


def test_redis_down_at_start_and_in_the_middle_loses_nothing(tmp_path: Path, runs: Any) -> None:
    # Given a Redis with data (append-only file on) that is down when the topology starts
    server = DevRedis(tmp_path / "redis", aof=True)
    server.start()
    try:
        expected = fill(server.url, 600)
        sigkill(server)
        run = Run(server.url)
        with LocalCluster() as cluster:
            cluster.submit("pc", PartitionedCount, {"test.run": run.name, "redis.url": server.url})
            assert stay(lambda: not run.commits, 1.0)
            # When it comes back, counting starts
            server.start()
            poll_for(lambda: run.commits, timeout=30, message="first commit once Redis is up")
            # and when it dies again in the middle, batches fail (and are replayed) until it is back
            sigkill(server)
            poll_for(lambda: run.spout_failures > 0, timeout=30, message="batches failing, Redis down")
            server.start()
            # Then the counts end exact
            poll_for(lambda: run.counts() == dict(expected), timeout=90,
                     message=f"exact counts after the outages (now {run.counts()})")
            assert not any(e.fatal for e in cluster.errors("pc"))
        assert_ordered(run)
    finally:
        server.stop()


# -- the spouts alone, driven by hand ----------------------------------------------------


def parse_or_fail(fields: dict[str, str]) -> list[Any] | None:
    """A scheme: [key, n]; raises on a malformed entry, skips one marked skip."""
    if "skip" in fields:
        return None
    return [fields["k"], int(fields["n"])]


def bare(cls: Any, url: str, errors: list[BaseException], **options: Any) -> Any:
    """A spout instance with the runtime a task would lend it."""
    spout = cls()
    spout.options = cls.spec(url=url, **options).options
    spout.conf = {}
    spout.clock = FakeClock()
    spout.logger = structlog.get_logger("test")
    spout.stopping = lambda: False
    spout.report_error = errors.append
    spout.metrics = MetricsRegistry()
    spout.initialize({}, SimpleNamespace(task_id=1))
    return spout


def test_coordinator_starts_transactions_only_for_new_entries(redis_server: DevRedis) -> None:
    spout = bare(RedisStreamOpaqueSpout, redis_server.url, [], streams=["a", "b"], batch_size=10,
                 poll_interval=0.1, idle_batch_secs=5)
    try:
        # Given empty streams: no transaction
        assert not spout.is_ready()
        # When 25 entries arrive in one stream: three transactions' worth (10 each), then none
        with redis.Redis.from_url(redis_server.url) as r:
            for i in range(25):
                r.xadd("a", {"k": "x", "n": str(i)})
        assert not spout.is_ready()  # polled at most every poll_interval
        spout.clock.advance(0.1)
        for _ in range(3):
            assert spout.is_ready()
            assert spout.num_partitions() == 2
        spout.clock.advance(0.1)
        assert not spout.is_ready()
        # and one every idle_batch_secs all the same, in case the estimate fell short
        spout.clock.advance(5)
        assert spout.is_ready()
    finally:
        spout.close()


def test_scheme_values_and_malformed_entries_skipped_alike_on_replay(redis_server: DevRedis) -> None:
    errors: list[BaseException] = []
    spout = bare(RedisStreamPartitionedSpout, redis_server.url, errors, streams=["a"], batch_size=10,
                 scheme=parse_or_fail, fields=["key", "n"])
    with redis.Redis.from_url(redis_server.url) as r:
        r.xadd("a", {"k": "x", "n": "1"}, id="1-0")
        r.xadd("a", {"k": "y", "n": "oops"}, id="2-0")
        r.xadd("a", {"skip": "1"}, id="3-0")
        r.xadd("a", {"k": "z", "n": "4"}, id="4-0")
    try:
        first: list[Any] = []
        meta = spout.emit_new_batch("tx1", first.append, 0, None)
        assert meta == {"first": "1-0", "last": "4-0", "count": 4}
        assert first == [["tx1", "x", 1], ["tx1", "z", 4]]
        assert len(errors) == 1 and "entry 2-0" in str(errors[0]) and "left out of txid tx1" in str(errors[0])
        again: list[Any] = []
        spout.emit_batch("tx1", again.append, 0, meta)
        assert again == first
        assert len(errors) == 1  # reported once, not in every replay
        # an empty batch keeps the position
        empty = spout.emit_new_batch("tx2", first.append, 0, meta)
        assert empty == {"first": None, "last": "4-0", "count": 0}
    finally:
        spout.close()


NOT_UTF8 = {b"k": b"caf\xe9", b"n": b"2"}  # Latin-1, as a producer that forgot to encode might send


@pytest.mark.parametrize("cls", [RedisStreamPartitionedSpout, RedisStreamOpaqueSpout])
def test_an_entry_that_is_not_utf8_is_set_aside_as_the_at_least_once_spout_does(
        redis_server: DevRedis, cls: Any) -> None:
    # Given a stream holding an entry that is not UTF-8 between two good ones
    errors: list[BaseException] = []
    spout = bare(cls, redis_server.url, errors, streams=["a"], batch_size=10, dead_letter="a:dead")
    r = redis.Redis.from_url(redis_server.url)
    r.xadd("a", {"k": "x", "n": "1"}, id="1-0")
    r.xadd("a", NOT_UTF8, id="2-0")
    r.xadd("a", {"k": "z", "n": "3"}, id="3-0")
    try:
        # When a batch reads it, and is replayed
        first: list[Any] = []
        new_batch = spout.emit_new_batch if cls is RedisStreamPartitionedSpout else spout.emit_batch
        meta = new_batch("tx1", first.append, 0, None)
        again: list[Any] = []
        if cls is RedisStreamPartitionedSpout:
            spout.emit_batch("tx1", again.append, 0, meta)
        else:
            spout.emit_batch("tx1", again.append, 0, None)
        # Then it is left out of the batch and of its replay alike (no U+FFFD text), the
        # batch's range still covers it
        assert [t[2] for t in first] == ["1-0", "3-0"] and again == first
        assert "\ufffd" not in repr(first)
        assert meta == {"first": "1-0", "last": "3-0", "count": 3}
        # and it is counted, reported once with its id, and copied to the dead-letter stream once
        assert spout.metrics.counter("redis.malformed").value == 1
        assert len(errors) == 1, errors
        assert type(errors[0]).__name__ == "MalformedEntry"
        said = str(errors[0])
        assert "malformed entry 2-0 of stream 'a'" in said and "UnicodeDecodeError" in said
        assert "copied to dead-letter stream 'a:dead'" in said
        [(_id, letter)] = r.xrange("a:dead")
        assert letter[b"k"] == b"caf\xe9" and letter[b"n"] == b"2"
        assert letter[b"squall.stream"] == b"a" and letter[b"squall.id"] == b"2-0"
        assert b"UnicodeDecodeError" in letter[b"squall.error"]
    finally:
        spout.close()
        r.close()


def test_with_decode_off_the_fields_stay_bytes(redis_server: DevRedis) -> None:
    spout = bare(RedisStreamOpaqueSpout, redis_server.url, [], streams=["a"], batch_size=10, decode=False)
    with redis.Redis.from_url(redis_server.url) as r:
        r.xadd("a", NOT_UTF8, id="2-0")
    try:
        got: list[Any] = []
        spout.emit_batch("t", got.append, 0, None)
        assert got == [["t", "a", "2-0", NOT_UTF8]]
    finally:
        spout.close()


def test_opaque_spout_reads_a_recreated_stream_from_its_start(redis_server: DevRedis) -> None:
    spout = bare(RedisStreamOpaqueSpout, redis_server.url, [], streams=["a"], batch_size=10)
    try:
        with redis.Redis.from_url(redis_server.url) as r:
            r.xadd("a", {"k": "x", "n": "1"}, id="100-0")
            got: list[Any] = []
            meta = spout.emit_batch("t", got.append, 0, None)
            assert meta["last"] == "100-0"
            # When the stream is lost and made anew with lower ids
            r.delete("a")
            r.xadd("a", {"k": "y", "n": "2"}, id="5-0")
            got.clear()
            meta = spout.emit_batch("t", got.append, 0, meta)
        # Then it is read from its start
        assert [g[2] for g in got] == ["5-0"] and meta == {"first": "5-0", "last": "5-0", "count": 1}
    finally:
        spout.close()


def test_redis_unreachable_fails_the_batch_with_a_clear_error(tmp_path: Path) -> None:
    server = DevRedis(tmp_path / "redis")  # never started: nothing listens on its port
    spout = bare(RedisStreamPartitionedSpout, server.url, [], streams=["a"])
    with pytest.raises(FailedException, match=r"did not answer reading stream 'a'.*replayed"):
        spout.emit_new_batch("t", print, 0, None)
    assert not spout.is_ready()
    spout.close()
