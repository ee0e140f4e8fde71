"""RedisStreamSpout in local mode against a real redis-server: every entry acked exactly once by
the group through tuple failures, malformed entries, restarts, dead consumers and Redis itself
going down."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
import redis

from squall import Bolt, FailedException, LocalCluster, Topology
from squall.contrib.redis.devserver import DevRedis
from squall.contrib.redis.stream_spout import RedisStreamSpout
from squall.errors import TopologyValidationError
from squall.testing import poll_for


class Journal:
    """What the spouts acked and the bolts processed, across threads (local mode: one process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acks: Counter[tuple[str, str]] = Counter()
        self.processed: list[tuple[str, str]] = []
        self.failed_once: set[tuple[str, str]] = set()
        self.progress: dict[int, float] = {}  # task -> the spout's progress when it closed


JOURNAL = Journal()


@pytest.fixture(autouse=True)
def journal() -> Journal:
    global JOURNAL
    JOURNAL = Journal()
    return JOURNAL


class RecordingSpout(RedisStreamSpout):
    def ack(self, msg_id: Any) -> None:
        with JOURNAL.lock:
            JOURNAL.acks[msg_id] += 1
        super().ack(msg_id)

    def close(self) -> None:
        super().close()
        JOURNAL.progress[self.context.task_id] = self.progress()


class FailSomeOnce(Bolt):
    """Fails every 7th entry (by its number) the first time it sees it."""

    def process(self, tup: Any) -> None:
        key = (tup.values.stream, tup.values.id)
        n = int(tup.values.fields["n"])
        with JOURNAL.lock:
            if n % 7 == 0 and key not in JOURNAL.failed_once:
                JOURNAL.failed_once.add(key)
                raise FailedException("first time: fail")
            JOURNAL.processed.append(key)


def int_scheme(stream: str, entry_id: str, fields: dict[str, str]) -> list[Any]:
    return [stream, entry_id, int(fields["n"])]


class Record(Bolt):
    def process(self, tup: Any) -> None:
        with JOURNAL.lock:
            JOURNAL.processed.append((tup.values.stream, tup.values.id))


def add(r: redis.Redis, stream: str, n: int, start: int = 0) -> list[tuple[str, str]]:
    pipe = r.pipeline(transaction=False)
    for i in range(start, start + n):
        pipe.xadd(stream, {"n": str(i)})
    return [(stream, entry_id.decode()) for entry_id in pipe.execute()]


def group_settled(r: redis.Redis, streams: list[str], group: str) -> bool:
    """No entry pending in the group, and its last-delivered id is each stream's last."""
    for stream in streams:
        groups = {g["name"].decode(): g for g in r.xinfo_groups(stream)} if r.exists(stream) else {}
        info = groups.get(group)
        if info is None:
            return False
        if info["pending"] != 0 or info["last-delivered-id"] != r.xinfo_stream(stream)["last-generated-id"]:
            return False
    return True


def acked_exactly_once(added: list[tuple[str, str]]) -> bool:
    with JOURNAL.lock:
        return set(JOURNAL.acks) == set(added) and set(JOURNAL.acks.values()) == {1}


def topology(url: str, streams: list[str], *, par: int = 2, bolt: type[Bolt] = FailSomeOnce,
             **options: Any) -> type[Topology]:
    class Reader(Topology):
        config = {"topology.max.spout.pending": 500, "topology.message.timeout.secs": 10}
        events = RecordingSpout.spec(url=url, streams=streams, group="g", par=par, **options)
        work = bolt.spec(inputs=[events], par=2)

    return Reader


def test_spec_checks_its_options() -> None:
    with pytest.raises(TopologyValidationError, match="needs group"):
        RedisStreamSpout.spec(streams=["s"], url="redis://x")
    with pytest.raises(TopologyValidationError, match=r"unknown options.*'bogus'"):
        RedisStreamSpout.spec(url="redis://x", streams="s", group="g", bogus=1)
    with pytest.raises(TopologyValidationError, match="cannot load"):
        RedisStreamSpout.spec(url="redis://x", streams="s", group="g", scheme="tests.nowhere:f")
    spec = RedisStreamSpout.spec(url="redis://x", streams="s", group="g")
    assert spec.options["streams"] == ["s"]


def test_every_entry_is_acked_exactly_once_through_failed_tuples(redis_server: DevRedis) -> None:
    # Given 3000 entries in two streams, and a bolt failing every 7th entry once
    r = redis.Redis.from_url(redis_server.url)
    added = add(r, "a", 1500) + add(r, "b", 1500)
    with LocalCluster() as cluster:
        # When two spout tasks read them through one group
        cluster.submit("reader", topology(redis_server.url, ["a", "b"]))
        poll_for(lambda: acked_exactly_once(added) and group_settled(r, ["a", "b"], "g"), timeout=60,
                 message="every entry acked once")
        stats = cluster.stats("reader")
        errors = cluster.errors("reader")
    # Then each entry was acked exactly once, the failed ones after their replay
    assert len(JOURNAL.failed_once) == 2 * len(range(0, 1500, 7))
    assert JOURNAL.failed_once <= set(JOURNAL.processed)
    assert set(JOURNAL.processed) == set(added)
    assert stats["events"]["failed"] >= len(JOURNAL.failed_once)
    # the spouts' progress is the group's acked count
    assert sum(JOURNAL.progress.values()) == 3000 and len(JOURNAL.progress) == 2
    assert not errors
    # and both tasks took part, as consumers events-0 and events-1
    consumers = {c["name"].decode() for c in r.xinfo_consumers("a", "g")}
    assert consumers == {"events-0", "events-1"}
    r.close()


def test_a_malformed_entry_goes_to_the_dead_letter_stream_and_is_acked(redis_server: DevRedis) -> None:
    r = redis.Redis.from_url(redis_server.url)
    added = add(r, "s", 50)
    bad = r.xadd("s", {"n": "not a number", "why": "test"}).decode()
    not_utf8 = r.xadd("s", {"n": b"caf\xe9"}).decode()  # as every Redis spout does: never U+FFFD text
    added += add(r, "s", 50, start=50)

    class Reader(Topology):
        events = RecordingSpout.spec(url=redis_server.url, streams="s", group="g", dead_letter="s:dead",
                                     scheme=f"{__name__}:int_scheme")
        work = Record.spec(inputs=[events])

    with LocalCluster() as cluster:
        runner = cluster.submit("reader", Reader)
        poll_for(lambda: group_settled(r, ["s"], "g") and r.xlen("s:dead") == 2, timeout=30,
                 message="group settled")
        poll_for(lambda: set(JOURNAL.processed) == set(added), timeout=10, message="all good ones processed")
        errors = cluster.errors("reader")
        malformed = cluster.metrics("reader")["events"]
        assert runner.restarts == 0
    [(_dead_id, letter), (_id2, letter2)] = r.xrange("s:dead")
    assert letter[b"squall.stream"] == b"s"
    assert letter[b"squall.id"] == bad.encode()
    assert b"ValueError" in letter[b"squall.error"]
    assert letter[b"n"] == b"not a number" and letter[b"why"] == b"test"
    assert letter2[b"squall.id"] == not_utf8.encode() and letter2[b"n"] == b"caf\xe9"
    assert b"UnicodeDecodeError" in letter2[b"squall.error"]
    assert len(errors) == 2 and not any(e.fatal for e in errors)
    assert "malformed entry" in errors[0].error and bad in errors[0].error
    assert "malformed entry" in errors[1].error and not_utf8 in errors[1].error
    assert sum(task["counters"]["redis.malformed"] for task in malformed.values()) == 2
    r.close()


def test_a_restarted_task_first_takes_back_its_own_pending_entries(redis_server: DevRedis) -> None:
    # Given consumer events-0 of group g that read 40 entries and died before acking them
    r = redis.Redis.from_url(redis_server.url)
    added = add(r, "s", 40)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "events-0", {"s": ">"}, count=40)
    added += add(r, "s", 10, start=40)
    # When a spout task with the same component and index starts (never reclaiming from others)
    with LocalCluster() as cluster:
        cluster.submit("reader", topology(redis_server.url, ["s"], par=1, bolt=Record, claim_idle_secs=3600))
        # Then it re-reads its own pending entries and all are acked once
        poll_for(lambda: acked_exactly_once(added) and group_settled(r, ["s"], "g"), timeout=30,
                 message="own pending entries taken back")
    # The first 40 were delivered twice to events-0 (before and after the restart), the rest once.
    assert {c["name"].decode() for c in r.xinfo_consumers("s", "g")} == {"events-0"}
    r.close()


def test_entries_of_another_consumer_idle_past_the_timeout_are_claimed(redis_server: DevRedis) -> None:
    # Given a consumer "ghost" holding 30 entries, never to come back
    r = redis.Redis.from_url(redis_server.url)
    added = add(r, "s", 30)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "ghost", {"s": ">"}, count=30)
    added += add(r, "s", 20, start=30)
    with LocalCluster() as cluster:
        cluster.submit("reader", topology(redis_server.url, ["s"], par=1, bolt=Record, claim_idle_secs=0.5,
                                          claim_every_secs=0.2))
        # Then once they are idle 0.5 s the spout XAUTOCLAIMs them
        poll_for(lambda: acked_exactly_once(added) and group_settled(r, ["s"], "g"), timeout=30,
                 message="ghost's entries claimed")

        def claimed() -> int:
            [task_metrics] = cluster.metrics("reader")["events"].values()
            return task_metrics["counters"]["redis.claimed"]

        poll_for(lambda: claimed() == 30, timeout=10, message="the claims counted in the spout's metrics")
    ghost = {c["name"].decode(): c for c in r.xinfo_consumers("s", "g")}["ghost"]
    assert ghost["pending"] == 0
    r.close()


def test_redis_down_at_start_is_reported_and_retried_then_everything_is_read(redis_server: DevRedis) -> None:
    # Given entries in a Redis that is down when the topology starts
    r = redis.Redis.from_url(redis_server.url)
    added = add(r, "s", 200)
    r.close()
    redis_server.kill()
    with LocalCluster() as cluster:
        runner = cluster.submit("reader", topology(redis_server.url, ["s"], par=1, bolt=Record,
                                                   backoff_initial=0.02, backoff_max=0.2))
        # Then the spout reports it clearly, naming itself and where
        poll_for(lambda: cluster.errors("reader"), timeout=20, message="an error reported")
        error = cluster.errors("reader")[0]
        assert "cannot reach Redis at redis://127.0.0.1:" in error.error
        assert "spout 'events'" in error.error and not error.fatal
        # and once Redis is back, reads everything, each entry acked once
        redis_server.restart()
        r = redis.Redis.from_url(redis_server.url)
        poll_for(lambda: acked_exactly_once(added) and group_settled(r, ["s"], "g"), timeout=30,
                 message="all read once Redis is up")
        assert runner.restarts == 0
    r.close()


class SlowRecord(Bolt):
    def process(self, tup: Any) -> None:
        import time

        time.sleep(0.0005)  # spread the run out, so that Redis dies with tuples in flight
        with JOURNAL.lock:
            JOURNAL.processed.append((tup.values.stream, tup.values.id))


def test_redis_killed_and_restarted_mid_run_loses_and_duplicates_no_ack(redis_server: DevRedis) -> None:
    # Given 3000 entries, and a Redis with its AOF fsynced on every write
    r = redis.Redis.from_url(redis_server.url)
    added = add(r, "s", 3000)
    with LocalCluster() as cluster:
        cluster.submit("reader", topology(redis_server.url, ["s"], bolt=SlowRecord, backoff_initial=0.02,
                                          backoff_max=0.2))
        # When Redis is SIGKILLed mid-run and comes back a little later
        poll_for(lambda: len(JOURNAL.processed) > 500, timeout=30, message="the run under way")
        redis_server.kill()
        poll_for(lambda: cluster.errors("reader"), timeout=20, message="the outage noticed")
        redis_server.restart()
        r = redis.Redis.from_url(redis_server.url)
        # Then every entry is eventually acked by the group, and exactly once by the spouts
        poll_for(lambda: acked_exactly_once(added) and group_settled(r, ["s"], "g"), timeout=60,
                 message="every entry acked once after the restart")
        assert set(JOURNAL.processed) == set(added)
        assert not any(e.fatal for e in cluster.errors("reader"))
    r.close()


def test_a_dead_letter_stream_redis_refuses_is_reported_and_the_worker_lives(redis_server: DevRedis) -> None:
    # Given a dead-letter key that is not a stream, and a malformed entry
    r = redis.Redis.from_url(redis_server.url)
    r.set("dead", "not a stream")
    added = add(r, "s", 20)
    r.xadd("s", {"n": "bad"})

    class Reader(Topology):
        events = RecordingSpout.spec(url=redis_server.url, streams="s", group="g", dead_letter="dead",
                                     scheme=f"{__name__}:int_scheme")
        work = Record.spec(inputs=[events])

    with LocalCluster() as cluster:
        runner = cluster.submit("reader", Reader)
        # Then the refusal is reported, not fatal, and the rest is processed and acked
        poll_for(lambda: any("WRONGTYPE" in e.error for e in cluster.errors("reader")), timeout=20,
                 message="the refused XADD reported")
        poll_for(lambda: group_settled(r, ["s"], "g") and set(JOURNAL.processed) == set(added), timeout=20,
                 message="the good entries processed")
        assert runner.restarts == 0
        assert not any(e.fatal for e in cluster.errors("reader"))
    r.close()
