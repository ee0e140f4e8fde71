"""Which store holds a topology's checkpointed bolt state (``topology.state.provider``).

The stores are the ones transactional committers use: ``memory``
(:class:`~squall.state.store.MemoryStore`, one per worker process: lost when
the worker dies, as Storm's in-memory state), ``sqlite``
(:class:`~squall.state.sqlite.SQLiteStore`, the one-machine default) and
``redis`` (:class:`~squall.contrib.redis.store.RedisStore`).
``topology.state.provider.config`` is a JSON object, or its text as in Storm:
``{"path": FILE}`` for sqlite, ``{"url": "redis://..."}`` for redis.
"""

from __future__ import annotations

import json
import os
from typing import Any

from squall.errors import ConfigError

PROVIDERS = ("memory", "sqlite", "redis")
# Providers whose data stays on one machine: refused when a topology's workers span hosts.
NODE_LOCAL = frozenset({"memory", "sqlite"})


def provider_of(conf: dict[str, Any]) -> str:
    provider = conf.get("topology.state.provider") or "sqlite"
    if provider not in PROVIDERS:
        msg = f"topology.state.provider must be one of {list(PROVIDERS)}, got {provider!r}"
        raise ConfigError(msg)
    return provider


def provider_config(conf: dict[str, Any]) -> dict[str, Any]:
    raw = conf.get("topology.state.provider.config")
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as e:
            msg = f"topology.state.provider.config is not valid JSON: {e}"
            raise ConfigError(msg) from e
    if not isinstance(raw, dict):
        msg = f"topology.state.provider.config must be a JSON object, got {raw!r}"
        raise ConfigError(msg)
    return raw


def check_state_conf(conf: dict[str, Any]) -> None:
    """Refuse, with a message naming the key, a state config that cannot work."""
    provider = provider_of(conf)
    pconf = provider_config(conf)
    interval_ms = conf.get("topology.state.checkpoint.interval.ms", 1000)
    timeout = conf.get("topology.message.timeout.secs", 30)
    if interval_ms / 1000.0 >= timeout:
        msg = (f"topology.state.checkpoint.interval.ms ({interval_ms}) must be below "
               f"topology.message.timeout.secs ({timeout} s): a tuple is acked only when the "
               "checkpoint after it commits, so a longer interval times every tuple out")
        raise ConfigError(msg)
    if provider == "redis" and not (pconf.get("url") or conf.get("redis.url")):
        msg = ('topology.state.provider is redis but no URL is set: put {"url": "redis://HOST:PORT"} '
               "in topology.state.provider.config")
        raise ConfigError(msg)


def sqlite_path(conf: dict[str, Any], topology: str) -> str:
    pconf = provider_config(conf)
    if pconf.get("path"):
        return str(pconf["path"])
    # Not under storm.local.dir: each supervisor has its own, and every worker of the
    # topology on this machine must open the same file.
    base = conf.get("squall.state.dir") or os.path.join(os.path.expanduser("~"), ".squall", "state")
    return os.path.join(base, f"{topology}.sqlite")


def open_store(conf: dict[str, Any], topology: str) -> Any:
    """A new store for ``topology``'s bolt state (namespace: the topology's name)."""
    provider = provider_of(conf)
    namespace = f"checkpointed:{topology}"
    if provider == "memory":
        from squall.state.store import MemoryStore

        return MemoryStore(namespace)
    if provider == "sqlite":
        from squall.state.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(conf, topology), namespace)
    from squall.contrib.redis.store import RedisStore

    url = provider_config(conf).get("url") or conf.get("redis.url")
    return RedisStore(url, namespace)


STORE_RESOURCE = "squall.state.store"


def worker_store(conf: dict[str, Any], context: Any) -> Any:
    """The store the worker's stateful tasks share: one connection per worker process."""
    from squall.lazy import Lazy

    key = f"{STORE_RESOURCE}:{context.topology_name}"
    resources = context.resources
    if key not in resources:
        resources.setdefault(key, Lazy(lambda: open_store(conf, context.topology_name)))
    return resources[key].get()
