"""Trident map states in a real redis-server: RedisMapState of each kind through a task that
dies mid-batch and its successor's replay, with and without the key cache; one HMGET per
multi_get and one HSET per multi_put; the hash as redis-cli shows it; get_tuples; a Redis
restart between batches; StoreMapState on the redis state provider."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from squall.contrib.redis import RedisMapState
from squall.contrib.redis.devserver import DevRedis
from squall.errors import ConfigError
from squall.trident.state import MapState, StateType, StoreMapState
from tests.trident.state import scenarios


@pytest.fixture
def opened() -> Iterator[list[MapState]]:
    states: list[MapState] = []
    yield states
    for state in states:
        state.close()


@pytest.fixture
def raw(redis_server: DevRedis) -> Iterator[redis.Redis]:
    conn = redis.Redis.from_url(redis_server.url)
    yield conn
    conn.close()


def make_with(factory: Any, states: list[MapState], conf: dict[str, Any] | None = None) -> Any:
    def make() -> MapState:
        state = factory.make_state(conf or {}, None, 0, 1)
        states.append(state)
        return state

    return make


@pytest.mark.parametrize("cache_size", [0, 1000])
@pytest.mark.parametrize("state_type", list(StateType))
def test_redis_map_state_through_a_task_that_dies_mid_batch(redis_server: DevRedis, opened: list[MapState],
                                                            state_type: StateType, cache_size: int) -> None:
    factory = RedisMapState(state_type, redis_server.url, namespace="words", cache_size=cache_size)
    opened.extend(scenarios.crash_and_replay(state_type, make_with(factory, opened)))
    total = RedisMapState(state_type, redis_server.url, namespace="total", cache_size=cache_size)
    opened.extend(scenarios.global_value(make_with(total, opened)))


def test_the_hash_holds_json_keys_and_squall_state_values(redis_server: DevRedis, opened: list[MapState],
                                                          raw: redis.Redis) -> None:
    make = make_with(RedisMapState.opaque(redis_server.url, namespace="words"), opened)
    opened.extend(scenarios.crash_and_replay(StateType.OPAQUE, make))
    stored = {key.decode(): json.loads(value) for key, value in raw.hgetall("squall:trident:words").items()}
    assert stored == {
        '["the"]': {"curr": 7, "prev": 2, "txid": 2},
        '["cat"]': {"curr": 11, "prev": 1, "txid": 3},
        '["dog"]': {"curr": 1, "prev": None, "txid": 2},
    }
    transactional = make_with(RedisMapState.transactional(redis_server.url, key="my:counts"), opened)()
    transactional.begin_commit(4)
    transactional.multi_put([["a", 1]], [5])
    transactional.commit(4)
    assert raw.hgetall("my:counts") == {b'["a",1]': b'{"value":5,"txid":4}'}


def test_a_batch_is_one_hmget_and_one_hset(redis_server: DevRedis, opened: list[MapState],
                                           raw: redis.Redis) -> None:
    state = make_with(RedisMapState.opaque(redis_server.url, cache_size=0), opened)()
    keys = [[f"word{i}"] for i in range(500)]
    raw.config_resetstat()
    state.begin_commit(1)
    state.multi_update(keys, [scenarios.add(1)] * len(keys))
    state.commit(1)
    stats = raw.info("commandstats")
    assert stats["cmdstat_hmget"]["calls"] == 1
    assert stats["cmdstat_hset"]["calls"] == 1
    assert raw.hlen("squall:trident:trident") == 500


@pytest.mark.parametrize("state_type", list(StateType))
def test_get_tuples_lists_every_key_with_its_value(redis_server: DevRedis, opened: list[MapState],
                                                   state_type: StateType) -> None:
    make = make_with(RedisMapState(state_type, redis_server.url, namespace=state_type.value), opened)
    state = make()
    for txid, batch in ((1, {("the", 1): 2, ("cat", 2): 1}), (2, {("the", 1): 3})):
        state.begin_commit(txid)
        state.multi_update([list(k) for k in batch], [scenarios.add(n) for n in batch.values()])
        state.commit(txid)
    assert sorted(make().get_tuples()) == [["cat", 2, 1], ["the", 1, 5]]


def test_state_survives_a_redis_restart_between_batches(redis_server: DevRedis,
                                                       opened: list[MapState]) -> None:
    make = make_with(RedisMapState.opaque(redis_server.url, cache_size=0), opened)
    state = make()
    state.begin_commit(1)
    state.multi_update([["a"]], [scenarios.add(1)])
    state.commit(1)
    redis_server.restart()
    state.begin_commit(2)
    assert state.multi_update([["a"]], [scenarios.add(1)]) == [2]  # the client reconnects by itself
    state.commit(2)
    assert make().multi_get([["a"]]) == [2]


def test_the_url_comes_from_the_factory_or_the_topologys_redis_url(redis_server: DevRedis,
                                                                   opened: list[MapState]) -> None:
    state = make_with(RedisMapState.non_transactional(), opened, {"redis.url": redis_server.url})()
    state.multi_put([["k"]], [1])
    assert state.multi_get([["k"]]) == [1]
    with pytest.raises(ConfigError, match=r"has no Redis to use: give it a URL, or set redis\.url"):
        RedisMapState.opaque().make_state({}, None, 0, 1)


def test_store_map_state_on_the_redis_state_provider(redis_server: DevRedis, opened: list[MapState],
                                                     raw: redis.Redis) -> None:
    conf = {"topology.state.provider": "redis",
            "topology.state.provider.config": {"url": redis_server.url}}
    make = make_with(StoreMapState.transactional(namespace="counts"), opened, conf)
    opened.extend(scenarios.crash_and_replay(StateType.TRANSACTIONAL, make))
    assert json.loads(raw.hget("squall:state:counts", '["the"]')) == {"value": 3, "txid": 2}


def test_the_factory_travels_pickled_and_connects_in_make_state() -> None:
    factory = RedisMapState.opaque("redis://:secret@127.0.0.1:1/0", namespace="n")
    assert vars(pickle.loads(pickle.dumps(factory))) == vars(factory)
    assert "secret" not in repr(factory)
