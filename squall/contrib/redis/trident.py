"""Trident map states in Redis (storm-redis's ``RedisMapState``), one hash per state.

    from squall.contrib.redis import RedisMapState

    state = RedisMapState.opaque("redis://127.0.0.1:6379/0", namespace="wordcount")
    counts = words.persistent_aggregate(state, Count(), ["count"])

A state's keys and values live in the hash ``squall:trident:<namespace>``:
fields are the keys' JSON lists, values the JSON form of the state's kind
(:mod:`squall.trident.state.values`), so

    redis-cli HGETALL squall:trident:wordcount

shows it (``["the"]`` -> ``{"curr":2,"prev":null,"txid":1}``).  ``multi_get``
is one ``HMGET`` and ``multi_put`` one ``HSET``; ``get_tuples()`` scans the
hash.  Each partition of the state writes only its own keys (a ``group_by``
sends each key to one), so no write needs a lock or a ``WATCH``.
"""

from __future__ import annotations

from typing import Any

from squall.contrib.redis.client import Backoff, call_with_retry, connect, redact
from squall.errors import ConfigError
from squall.state.store import StoreError, decode, encode
from squall.trident.state.base import StateFactory, StateType, check_map_options
from squall.trident.state.map import IBackingMap, Key, MapState, build_map_state
from squall.trident.state.stores import DEFAULT_NAMESPACE, decode_key, decode_value, encode_key, encode_value

TRIDENT_PREFIX = "squall:trident:"
GLOBAL_KEY = "$REDIS-MAP-STATE-GLOBAL"


class RedisBackingMap(IBackingMap):
    """An :class:`~squall.trident.state.map.IBackingMap` over the Redis hash ``key``
    (``squall:trident:<namespace>`` unless given), keeping values of ``state_type``.

    Connects at once (a RedisUnavailable naming the hash and the redacted URL
    if Redis does not answer); each call is retried on connection errors with
    ``backoff``, then fails, and so does the batch: it replays.
    """

    def __init__(self, url: str, namespace: str = DEFAULT_NAMESPACE, state_type: Any = StateType.OPAQUE,
                 *, key: str | None = None, backoff: Backoff | None = None,
                 socket_timeout: float = 10.0) -> None:
        if not isinstance(namespace, str) or not namespace:
            msg = f"a map state's namespace must be a non-empty str, not {namespace!r}"
            raise ValueError(msg)
        self.url = url
        self.state_type = StateType.of(state_type)
        self.key = key or TRIDENT_PREFIX + namespace
        self.backoff = backoff or Backoff()
        self._conn: Any = connect(url, what=repr(self), backoff=self.backoff, socket_timeout=socket_timeout)

    def __repr__(self) -> str:
        return f"RedisBackingMap({redact(self.url)!r}, key={self.key!r}, {self.state_type.name})"

    def _retry(self, fn: Any) -> Any:
        conn = self._conn
        if conn is None:
            msg = f"{self!r} is closed"
            raise StoreError(msg)
        return call_with_retry(lambda: fn(conn), what=repr(self), url=self.url, backoff=self.backoff)

    def multi_get(self, keys: list[Key]) -> list[Any]:
        if not keys:
            return []
        fields = [encode_key(key) for key in keys]
        raw = self._retry(lambda conn: conn.hmget(self.key, fields))
        return [decode_value(self.state_type, decode(text), key) for key, text in zip(keys, raw, strict=True)]

    def multi_put(self, keys: list[Key], values: list[Any]) -> None:
        mapping = {}
        for key, value in zip(keys, values, strict=True):
            field = encode_key(key)
            mapping[field] = encode(field, encode_value(self.state_type, value))
        if mapping:
            # HSET is idempotent: a retry after a lost reply writes the same values again.
            self._retry(lambda conn: conn.hset(self.key, mapping=mapping))

    def items(self) -> list[tuple[Key, Any]]:
        # HSCAN rather than HGETALL: a large state does not block Redis for one long reply.
        raw = self._retry(lambda conn: list(conn.hscan_iter(self.key, count=1000)))
        out = []
        for field, text in raw:
            key = decode_key(field.decode() if isinstance(field, bytes) else field)
            out.append((key, decode_value(self.state_type, decode(text), key)))
        return out

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class RedisMapState(StateFactory):
    """Map states in Redis, one :class:`RedisBackingMap` per partition (storm-redis's factory).

    ``url``: the Redis to use; None takes the topology's ``redis.url``.
    ``namespace`` names the hash (``key`` overrides it whole); ``cache_size``
    keys stay in memory in front of it (Storm's ``CachedMap``, 1000 as
    storm-redis's ``localCacheSize``; 0: none); a global aggregate keeps its
    value under ``global_key``.
    """

    def __init__(self, state_type: Any = StateType.OPAQUE, url: str | None = None, *,
                 namespace: str = DEFAULT_NAMESPACE, key: str | None = None, cache_size: int = 1000,
                 global_key: Any = GLOBAL_KEY) -> None:
        self.state_type = StateType.of(state_type)
        check_map_options(namespace, cache_size)
        self.url = url
        self.namespace = namespace
        self.key = key
        self.cache_size = cache_size
        self.global_key = global_key

    def __repr__(self) -> str:
        where = redact(self.url) if self.url else "redis.url"
        key = self.key or TRIDENT_PREFIX + self.namespace
        return f"RedisMapState({self.state_type.name}, {where!r}, key={key!r})"

    @classmethod
    def opaque(cls, url: str | None = None, **options: Any) -> RedisMapState:
        return cls(StateType.OPAQUE, url, **options)

    @classmethod
    def transactional(cls, url: str | None = None, **options: Any) -> RedisMapState:
        return cls(StateType.TRANSACTIONAL, url, **options)

    @classmethod
    def non_transactional(cls, url: str | None = None, **options: Any) -> RedisMapState:
        return cls(StateType.NON_TRANSACTIONAL, url, **options)

    def make_state(self, conf: dict[str, Any], context: Any, partition_index: int,
                   num_partitions: int) -> MapState:
        url = self.url or (conf or {}).get("redis.url")
        if not url:
            msg = f"{self!r} has no Redis to use: give it a URL, or set redis.url in the topology's config"
            raise ConfigError(msg)
        backing = RedisBackingMap(url, self.namespace, self.state_type, key=self.key)
        return build_map_state(self.state_type, backing, self.cache_size, self.global_key)
