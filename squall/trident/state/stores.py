"""Map states in Squall's state stores: SQLite on the node's disk, or the topology's state provider.

    from squall.trident.state import SqliteMapState, StoreMapState

    counts = words.persistent_aggregate(SqliteMapState.opaque("/var/squall/wordcount.db"), Count(), ["count"])
    counts = words.persistent_aggregate(StoreMapState.transactional(namespace="counts"), Count(), ["count"])

Each factory (``opaque``, ``transactional``, ``non_transactional``, as Storm's
``RedisMapState`` and ``MemcachedState`` name them) makes, per partition, a
map state over a :class:`StoreBackingMap` -- behind a :class:`CachedMap` of
``cache_size`` keys (1000, Storm's default; 0 for none) -- wrapped so that a
global aggregate finds its value under ``global_key``.

A :class:`~squall.state.store.Store` keeps JSON under str keys in one
namespace: a key's values are stored as their JSON list (``["the"]``), a
value as the JSON form of its kind (``{"curr", "prev", "txid"}`` for opaque
state, see :mod:`squall.trident.state.values`).  ``multi_get`` is one
``get_many`` and ``multi_put`` one ``update``: one read, one transaction.
Two states on the same store need different namespaces.
"""

from __future__ import annotations

import json
import os
from typing import Any

from squall.errors import ConfigError
from squall.trident.state.base import StateFactory, StateType, check_map_options
from squall.trident.state.map import IBackingMap, Key, MapState, build_map_state
from squall.trident.state.values import OpaqueValue, TransactionalValue

GLOBAL_KEY = "$SQUALL-MAP-STATE-GLOBAL$"
DEFAULT_NAMESPACE = "trident"


def encode_key(key: Key) -> str:
    """The store key of a map state key: the JSON list of its values."""
    try:
        return json.dumps(list(key), separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        msg = f"the map state key {list(key)!r} cannot be stored: its values must be JSON (str, numbers, ...)"
        raise TypeError(msg) from e


def decode_key(text: str) -> Key:
    return tuple(json.loads(text))


def encode_value(state_type: StateType, value: Any) -> Any:
    """The JSON-able form of what a map state of ``state_type`` keeps in its backing map."""
    if state_type is StateType.NON_TRANSACTIONAL:
        return value
    return value.to_json()


def decode_value(state_type: StateType, data: Any, key: Key) -> Any:
    """The value ``encode_value`` stored as ``data`` (None when absent); a ValueError naming the key."""
    if data is None or state_type is StateType.NON_TRANSACTIONAL:
        return data
    kind = OpaqueValue if state_type is StateType.OPAQUE else TransactionalValue
    return kind.from_json(data, list(key))


class StoreBackingMap(IBackingMap):
    """An :class:`IBackingMap` over a :class:`~squall.state.store.Store` (memory, SQLite, Redis, ...).

    ``state_type`` says which values it keeps (how to read them back).  Keys
    are encoded by :func:`encode_key`; ``items()`` needs a store that can list
    its keys (one with an ``items()`` of its own).
    """

    def __init__(self, store: Any, state_type: Any = StateType.OPAQUE) -> None:
        self.store = store
        self.state_type = StateType.of(state_type)

    def __repr__(self) -> str:
        return f"StoreBackingMap({self.store!r}, {self.state_type.name})"

    def multi_get(self, keys: list[Key]) -> list[Any]:
        if not keys:
            return []
        found = self.store.get_many([encode_key(key) for key in keys])
        return [decode_value(self.state_type, data, key) for key, data in zip(keys, found, strict=True)]

    def multi_put(self, keys: list[Key], values: list[Any]) -> None:
        writes = {encode_key(key): encode_value(self.state_type, value)
                  for key, value in zip(keys, values, strict=True)}
        if writes:
            # One transaction; the current values it reads are not needed: this partition owns its keys.
            self.store.update(list(writes), lambda current: writes)

    def items(self) -> list[tuple[Key, Any]]:
        listing = getattr(self.store, "items", None)
        if listing is None:
            return super().items()  # type: ignore[return-value]
        return [(key, decode_value(self.state_type, data, key))
                for key, data in ((decode_key(text), data) for text, data in listing())]

    def close(self) -> None:
        self.store.close()


class StoreMapState(StateFactory):
    """A factory of map states over a store of ``topology.state.provider`` (or ``provider``).

    ``provider``: ``"sqlite"``, ``"memory"``, ``"redis"`` (squall.contrib.redis
    declares it) or any a package declares; None takes the topology's
    ``topology.state.provider`` (sqlite unless set), so the same topology can
    keep its state in SQLite on a laptop and in Redis on a cluster.
    ``config``: the provider's config (``{"path": ...}``, ``{"url": ...}``);
    None takes ``topology.state.provider.config``.  ``namespace``: where in
    the store this state's keys live.
    """

    def __init__(self, state_type: Any = StateType.OPAQUE, provider: str | None = None,
                 config: dict[str, Any] | None = None, namespace: str = DEFAULT_NAMESPACE,
                 cache_size: int = 1000, global_key: Any = GLOBAL_KEY) -> None:
        self.state_type = StateType.of(state_type)
        check_map_options(namespace, cache_size)
        if config is not None and not isinstance(config, dict):
            msg = f"a state provider's config must be a dict, not {config!r}"
            raise ValueError(msg)
        self.provider = provider
        self.config = config
        self.namespace = namespace
        self.cache_size = cache_size
        self.global_key = global_key

    def __repr__(self) -> str:
        where = self.provider or "topology.state.provider"
        return f"{type(self).__name__}({self.state_type.name}, {where}, namespace={self.namespace!r})"

    @classmethod
    def opaque(cls, **options: Any) -> StoreMapState:
        return cls(StateType.OPAQUE, **options)

    @classmethod
    def transactional(cls, **options: Any) -> StoreMapState:
        return cls(StateType.TRANSACTIONAL, **options)

    @classmethod
    def non_transactional(cls, **options: Any) -> StoreMapState:
        return cls(StateType.NON_TRANSACTIONAL, **options)

    def _store_conf(self, conf: dict[str, Any]) -> dict[str, Any]:
        """The topology's conf with this factory's provider and config in place of its own."""
        conf = dict(conf or {})
        if self.provider is not None:
            conf["topology.state.provider"] = self.provider
        if self.config is not None:
            conf["topology.state.provider.config"] = self.config
        return conf

    def open_store(self, conf: dict[str, Any], context: Any) -> Any:
        """A new store for this state, in the task that will use it."""
        from squall.state.providers import provider_config, provider_of

        conf = self._store_conf(conf)
        topology = getattr(context, "topology_name", None)
        if topology is None and provider_of(conf).name == "sqlite" and not provider_config(conf).get("path"):
            msg = (f"{self!r} outside a topology needs a file: give the SQLite path "
                   "(config={'path': ...}), or make the state in a running topology")
            raise ConfigError(msg)
        return provider_of(conf).open(conf, provider_config(conf), topology or "", self.namespace)

    def make_state(self, conf: dict[str, Any], context: Any, partition_index: int,
                   num_partitions: int) -> MapState:
        backing = StoreBackingMap(self.open_store(conf, context), self.state_type)
        return build_map_state(self.state_type, backing, self.cache_size, self.global_key)


class SqliteMapState(StoreMapState):
    """Map states in the SQLite file at ``path`` (every worker on the node shares it).

    Without a path: the topology's ``topology.state.provider.config`` path, or
    ``squall.state.dir``/<topology>.sqlite, the file checkpointed state uses.
    """

    def __init__(self, state_type: Any = StateType.OPAQUE, path: Any = None, *,
                 namespace: str = DEFAULT_NAMESPACE, cache_size: int = 1000,
                 global_key: Any = GLOBAL_KEY) -> None:
        config = None if path is None else {"path": os.fspath(path)}
        super().__init__(state_type, "sqlite", config, namespace, cache_size, global_key)
        self.path = config and config["path"]

    def __repr__(self) -> str:
        return f"SqliteMapState({self.state_type.name}, {self.path!r}, namespace={self.namespace!r})"

    @classmethod
    def opaque(cls, path: Any = None, **options: Any) -> SqliteMapState:  # type: ignore[override]
        return cls(StateType.OPAQUE, path, **options)

    @classmethod
    def transactional(cls, path: Any = None, **options: Any) -> SqliteMapState:  # type: ignore[override]
        return cls(StateType.TRANSACTIONAL, path, **options)

    @classmethod
    def non_transactional(cls, path: Any = None, **options: Any) -> SqliteMapState:  # type: ignore[override]
        return cls(StateType.NON_TRANSACTIONAL, path, **options)
