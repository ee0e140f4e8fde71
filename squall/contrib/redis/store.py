"""State in Redis: a :class:`~squall.state.store.Store` for committers, and a plain map for bolts.

:class:`RedisStore` keeps one Redis hash per namespace, ``squall:state:<namespace>``:
fields are the keys, values the JSON text every Store keeps, so

    redis-cli HGETALL squall:state:counts

shows a committer's state as it is.  ``get_many`` is one ``HMGET``;
``update`` is optimistic: ``WATCH`` the hash, ``HMGET``, run ``fn`` here (it
is Python, so it cannot run inside Redis as a Lua script would), then
``MULTI``/``HSET``/``EXEC`` in one round trip; if another writer touched the
hash in between, ``EXEC`` does nothing and the update starts over.  So
:class:`~squall.state.values.TransactionalMap` and friends work unchanged
over it, from any number of processes.

:class:`RedisMap` is the non-transactional map of storm-redis's
``RedisLookupBolt``/``RedisStoreBolt``: read, write and increment many
fields of one hash, each a single round trip.
"""

from __future__ import annotations

import json
from typing import Any

from squall.contrib.redis.client import Backoff, call_with_retry, connect, import_redis, redact
from squall.errors import ConfigError
from squall.state.providers import StateProvider
from squall.state.store import StoreError, UpdateFn, check_keys, decode, encode, encode_writes

STATE_PREFIX = "squall:state:"
MAP_PREFIX = "squall:map:"


def _check_namespace(namespace: Any) -> str:
    if not isinstance(namespace, str) or not namespace:
        msg = f"a state namespace must be a non-empty str, not {namespace!r}"
        raise TypeError(msg)
    return namespace


class RedisStore:
    """A :class:`~squall.state.store.Store` in the Redis hash ``squall:state:<namespace>``.

    Connects at once (a :class:`~squall.contrib.redis.client.RedisUnavailable`
    naming the store and the redacted URL if Redis does not answer within
    ``backoff``).  Every operation is retried on connection errors with the
    same ``backoff``, then fails: a committer's batch fails and replays.
    ``max_conflicts`` bounds how many times an update restarts because
    another writer changed the hash meanwhile.

    An update whose ``EXEC`` reply is lost (Redis died after applying it) is
    run again: the txid stamps of the transactional and opaque maps make that
    harmless; a raw ``update`` should be idempotent too.
    """

    def __init__(self, url: str, namespace: str = "default", *, backoff: Backoff | None = None,
                 max_conflicts: int = 1000, socket_timeout: float = 10.0) -> None:
        self.url = url
        self.namespace = _check_namespace(namespace)
        self.key = STATE_PREFIX + namespace
        self.backoff = backoff or Backoff()
        self.max_conflicts = max_conflicts
        self._redis = import_redis()
        self._conn: Any = connect(url, what=repr(self), backoff=self.backoff, socket_timeout=socket_timeout)

    def __repr__(self) -> str:
        return f"RedisStore({redact(self.url)!r}, namespace={self.namespace!r})"

    def _connection(self) -> Any:
        if self._conn is None:
            msg = f"{self!r} is closed"
            raise StoreError(msg)
        return self._conn

    def _retry(self, fn: Any) -> Any:
        return call_with_retry(fn, what=repr(self), url=self.url, backoff=self.backoff)

    def get_many(self, keys: list[str]) -> list[Any | None]:
        keys = check_keys(keys)
        if not keys:
            return []
        conn = self._connection()
        raw = self._retry(lambda: conn.hmget(self.key, keys))
        return [decode(text) for text in raw]

    def update(self, keys: list[str], fn: UpdateFn) -> dict[str, Any]:
        keys = check_keys(keys)
        conn = self._connection()
        return self._retry(lambda: self._update_once(conn, keys, fn))

    def _update_once(self, conn: Any, keys: list[str], fn: UpdateFn) -> dict[str, Any]:
        unique = list(dict.fromkeys(keys))
        with conn.pipeline(transaction=True) as pipe:
            for _ in range(self.max_conflicts):
                try:
                    pipe.watch(self.key)
                    raw = pipe.hmget(self.key, unique) if unique else []
                    current = {key: decode(text) for key, text in zip(unique, raw, strict=True)}
                    written = fn({key: current[key] for key in keys})
                    writes = encode_writes(keys, written)
                    pipe.multi()
                    if writes:
                        pipe.hset(self.key, mapping=writes)
                    # EXEC even with nothing to write: it ends the WATCH in the same round trip.
                    pipe.execute()
                    return written
                except self._redis.WatchError:
                    continue
        msg = (f"{self!r}: update of {len(unique)} keys lost the race to other writers "
               f"{self.max_conflicts} times in a row")
        raise StoreError(msg)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RedisMap:
    """A plain map over one Redis hash: batched reads, writes and increments, no txids.

    For bolts that look values up or store them at least once (storm-redis's
    ``RedisLookupBolt``, ``RedisStoreBolt`` with a HASH data type).  The hash
    is ``squall:map:<namespace>`` unless ``key`` names another.  Values are
    JSON text, as in :class:`RedisStore`; a number's JSON is its decimal
    text, so :meth:`increment_many` (``HINCRBY``/``HINCRBYFLOAT``) and
    ``redis-cli`` agree with :meth:`get_many`.  Each method is one round trip.
    """

    def __init__(self, url: str, namespace: str = "default", *, key: str | None = None,
                 backoff: Backoff | None = None, socket_timeout: float = 10.0) -> None:
        self.url = url
        self.namespace = _check_namespace(namespace)
        self.key = key or MAP_PREFIX + namespace
        self.backoff = backoff or Backoff()
        self._conn: Any = connect(url, what=repr(self), backoff=self.backoff, socket_timeout=socket_timeout)

    def __repr__(self) -> str:
        return f"RedisMap({redact(self.url)!r}, key={self.key!r})"

    def _retry(self, fn: Any) -> Any:
        if self._conn is None:
            msg = f"{self!r} is closed"
            raise StoreError(msg)
        return call_with_retry(fn, what=repr(self), url=self.url, backoff=self.backoff)

    def get(self, key: str) -> Any | None:
        return self.get_many([key])[0]

    def get_many(self, keys: list[str]) -> list[Any | None]:
        """The values of ``keys`` in order, None for absent ones (one ``HMGET``)."""
        keys = check_keys(keys)
        if not keys:
            return []
        return [decode(text) for text in self._retry(lambda: self._conn.hmget(self.key, keys))]

    def put_many(self, values: dict[str, Any]) -> None:
        """Set each key to its value (one ``HSET``)."""
        check_keys(values)
        if values:
            mapping = {key: encode(key, value) for key, value in values.items()}
            self._retry(lambda: self._conn.hset(self.key, mapping=mapping))

    def delete_many(self, keys: list[str]) -> int:
        """Remove ``keys``; returns how many existed (one ``HDEL``)."""
        keys = check_keys(keys)
        return int(self._retry(lambda: self._conn.hdel(self.key, *keys))) if keys else 0

    def increment_many(self, deltas: dict[str, int | float]) -> dict[str, int | float]:
        """Add each delta to its key (absent counts as 0), all in one ``MULTI``; returns the totals.

        Not idempotent: a retried call after a lost reply counts twice.  In a
        transactional topology use :class:`RedisStore` with a TransactionalMap.
        """
        check_keys(deltas)
        for key, delta in deltas.items():
            if isinstance(delta, bool) or not isinstance(delta, (int, float)):
                msg = f"an increment must be an int or float, not {delta!r} (key {key!r})"
                raise TypeError(msg)
        if not deltas:
            return {}

        def run() -> list[Any]:
            pipe = self._conn.pipeline(transaction=True)
            for key, delta in deltas.items():
                if isinstance(delta, int):
                    pipe.hincrby(self.key, key, delta)
                else:
                    pipe.hincrbyfloat(self.key, key, delta)
            return pipe.execute()

        totals = self._retry(run)
        return {key: json.loads(total) if isinstance(total, bytes) else total
                for key, total in zip(deltas, totals, strict=True)}

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> RedisMap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_state_conf(conf: dict[str, Any], pconf: dict[str, Any]) -> None:
    if not (pconf.get("url") or conf.get("redis.url")):
        msg = ('topology.state.provider is redis but no URL is set: put {"url": "redis://HOST:PORT"} '
               "in topology.state.provider.config")
        raise ConfigError(msg)


def _open_state_store(conf: dict[str, Any], pconf: dict[str, Any], topology: str,
                      namespace: str) -> RedisStore:
    return RedisStore(pconf.get("url") or conf.get("redis.url"), namespace)


# topology.state.provider: redis (declared in pyproject.toml's squall.state_providers entry points).
STATE_PROVIDER = StateProvider("redis", _open_state_store, node_local=False, check=_check_state_conf)
