"""RedisStore keeps the Store contract (atomic, JSON, clear errors) across processes and restarts,
so the transactional and opaque maps run over it unchanged; RedisMap is a batched plain map."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from squall.contrib.redis.client import Backoff, RedisUnavailable
from squall.contrib.redis.devserver import DevRedis
from squall.contrib.redis.store import RedisMap, RedisStore
from squall.errors import SerializationError
from squall.runtime.ports import free_port
from squall.state import OpaqueMap, OpaqueValue, TransactionalMap, TransactionalValue
from squall.state.store import StoreError
from tests.helpers import run_together


@pytest.fixture
def store(redis_server: DevRedis) -> Any:
    s = RedisStore(redis_server.url, namespace="counts")
    yield s
    s.close()


def test_get_many_and_update_round_trip_json_in_one_hash(store: RedisStore, redis_server: DevRedis) -> None:
    assert store.get_many(["a", "b"]) == [None, None]
    assert store.update(["a", "b"], lambda cur: {"a": 1, "b": {"x": [1, 2.5, "s", None, True]}}) == {
        "a": 1, "b": {"x": [1, 2.5, "s", None, True]}}
    assert store.get_many(["b", "zz", "a", "a"]) == [{"x": [1, 2.5, "s", None, True]}, None, 1, 1]
    assert store.get_many([]) == []
    # What redis-cli HGETALL shows: the JSON text under squall:state:<namespace>.
    import redis

    raw = redis.Redis.from_url(redis_server.url).hgetall("squall:state:counts")
    assert raw == {b"a": b"1", b"b": b'{"x":[1,2.5,"s",null,true]}'}


def test_update_passes_current_values_including_duplicates(store: RedisStore) -> None:
    seen = []

    def fn(current: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(current))
        return {"a": (current["a"] or 0) + 10}

    store.update(["a", "b", "a"], fn)
    store.update(["a", "b"], fn)
    assert seen == [{"a": None, "b": None}, {"a": 10, "b": None}]
    assert store.get_many(["a"]) == [20]


def test_a_raising_fn_or_bad_value_writes_nothing(store: RedisStore) -> None:
    store.update(["a", "b"], lambda cur: {"a": 1, "b": 2})

    def boom(cur: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.update(["a"], boom)
    with pytest.raises(SerializationError, match="'b'"):
        store.update(["a", "b"], lambda cur: {"a": 5, "b": object()})
    with pytest.raises(ValueError, match="not among the keys read"):
        store.update(["a"], lambda cur: {"a": 5, "zz": 1})
    with pytest.raises(TypeError, match="single str"):
        store.get_many("ab")  # type: ignore[arg-type]
    assert store.get_many(["a", "b"]) == [1, 2]


def test_namespaces_are_separate_hashes(redis_server: DevRedis) -> None:
    with RedisStore(redis_server.url, "one") as a, RedisStore(redis_server.url, "two") as b:
        a.update(["k"], lambda cur: {"k": 1})
        assert b.get_many(["k"]) == [None]
    with pytest.raises(TypeError, match="namespace"):
        RedisStore(redis_server.url, "")


def test_a_closed_store_refuses_use(store: RedisStore) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_many(["a"])


def test_a_concurrent_writer_makes_the_update_start_over(store: RedisStore, redis_server: DevRedis) -> None:
    # Given another writer that changes the hash between our read and our write, once
    import redis

    other = redis.Redis.from_url(redis_server.url)
    calls = []

    def fn(current: dict[str, Any]) -> dict[str, Any]:
        calls.append(current["n"])
        if len(calls) == 1:
            other.hset("squall:state:counts", "n", "100")
        return {"n": (current["n"] or 0) + 1}

    # When we update, Then EXEC is refused and fn runs again on the new value
    assert store.update(["n"], fn) == {"n": 101}
    assert calls == [None, 100]
    assert store.get_many(["n"]) == [101]
    other.close()


_CHILD = """
import sys
from squall.contrib.redis.store import RedisStore
from squall.state import OpaqueMap
store = RedisStore(sys.argv[1], "race")
counts = OpaqueMap(store)
print("ready", flush=True)
sys.stdin.readline()
for i in range(200):
    store.update(["n"], lambda cur: {"n": (cur["n"] or 0) + 1})
base = int(sys.argv[2])
for txid in range(1, 101):
    counts.increment(base + txid, {"opaque": 1})
store.close()
"""


def test_two_processes_committing_concurrently_lose_no_update(redis_server: DevRedis) -> None:
    run_together([[sys.executable, "-c", _CHILD, redis_server.url, str(base)] for base in (0, 1000)])
    with RedisStore(redis_server.url, "race") as s:
        assert s.get_many(["n"]) == [400]
        # Process 0000's txids all lose to 1000's if they come later; each increment lands or is
        # stale-skipped atomically, so the count is exact for whichever order happened.
        stored = s.get_many(["opaque"])[0]
        assert stored["txid"] == 1100
        assert 100 <= stored["curr"] <= 200


def test_transactional_map_and_value_are_exact_over_redis(store: RedisStore) -> None:
    counts = TransactionalMap(store)
    assert counts.increment(1, {"the": 3, "cat": 1}) == {"the": 3, "cat": 1}
    assert counts.increment(1, {"the": 3, "cat": 1}) == {"the": 3, "cat": 1}  # replay: skipped
    assert counts.increment(2, {"the": 1}) == {"the": 4}
    assert counts.get_many(["the", "cat", "dog"]) == [4, 1, None]
    assert counts.txid_of("the") == 2
    total = TransactionalValue(store, "total")
    total.increment(5, 10)
    total.increment(5, 10)
    assert total.get() == 10
    assert total.txid == 5


def test_opaque_map_and_value_are_exact_over_redis(store: RedisStore) -> None:
    counts = OpaqueMap(store)
    counts.increment(1, {"a": 5})
    counts.increment(2, {"a": 2})
    # txid 2 replayed with a different batch: counts from prev (5), not curr (7)
    assert counts.increment(2, {"a": 3}) == {"a": 8}
    assert counts.increment(1, {"a": 100}) == {"a": 8}  # stale: skipped
    assert store.get_many(["a"]) == [{"curr": 8, "prev": 5, "txid": 2}]
    value = OpaqueValue(store, "v")
    value.increment(1, 1)
    value.increment(1, 2)
    assert value.get() == 2


def test_an_unreachable_redis_is_a_clear_error_after_bounded_retries() -> None:
    url = f"redis://:pw@127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailable, match=r"RedisStore\('redis://:\*\*\*@127.0.0.1:\d+/0', "
                                               r"namespace='x'\).*after 3 attempts"):
        RedisStore(url, "x", backoff=Backoff(initial=0.01, max_delay=0.02, attempts=3))


def test_the_store_reconnects_after_a_restart_and_keeps_committed_state(redis_server: DevRedis) -> None:
    with RedisStore(redis_server.url, "c", backoff=Backoff(initial=0.01, max_delay=0.05, attempts=3)) as s:
        counts = TransactionalMap(s)
        counts.increment(1, {"k": 1})
        redis_server.kill()
        with pytest.raises(RedisUnavailable):
            counts.increment(2, {"k": 1})  # a committer's batch fails, and replays later
        redis_server.restart()
        assert counts.increment(2, {"k": 1}) == {"k": 2}
        assert counts.get("k") == 2


def test_redis_map_reads_writes_and_increments_in_batches(redis_server: DevRedis) -> None:
    with RedisMap(redis_server.url, "pages") as m:
        assert m.get_many(["a", "b"]) == [None, None]
        m.put_many({"a": {"title": "A"}, "n": 5})
        assert m.increment_many({"n": 2, "new": 1, "f": 0.5}) == {"n": 7, "new": 1, "f": 0.5}
        assert m.get_many(["a", "n", "new", "f"]) == [{"title": "A"}, 7, 1, 0.5]
        assert m.delete_many(["a", "zz"]) == 1
        assert m.get("a") is None
        with pytest.raises(TypeError, match="increment"):
            m.increment_many({"n": "1"})  # type: ignore[dict-item]
    with RedisMap(redis_server.url, key="custom:hash") as m:
        m.put_many({"x": 1})
        import redis

        assert redis.Redis.from_url(redis_server.url).hget("custom:hash", "x") == b"1"
