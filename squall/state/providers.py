"""Which store holds a topology's checkpointed bolt state (``topology.state.provider``).

The stores are the ones transactional committers use: ``memory``
(:class:`~squall.state.store.MemoryStore`, one per worker process: lost when
the worker dies, as Storm's in-memory state), ``sqlite``
(:class:`~squall.state.sqlite.SQLiteStore`, the one-machine default) and
``redis`` (:class:`~squall.contrib.redis.store.RedisStore`, which squall.contrib.redis
declares as an entry point: see squall.plugins; another package may add its own).
``topology.state.provider.config`` is a JSON object, or its text as in Storm:
``{"path": FILE}`` for sqlite, ``{"url": "redis://..."}`` for redis.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from squall import plugins
from squall.errors import ConfigError
from squall.lazy import shared_resource


@dataclass(frozen=True)
class StateProvider:
    """A kind of store for checkpointed state: ``open(conf, provider_config, topology,
    namespace)`` makes one; ``check(conf, provider_config)`` refuses a config that cannot
    work (ConfigError naming the key); ``node_local``: its data stays on one machine."""

    name: str
    open: Callable[[dict[str, Any], dict[str, Any], str, str], Any]
    node_local: bool = False
    check: Callable[[dict[str, Any], dict[str, Any]], None] | None = None


def _open_memory(conf: dict[str, Any], pconf: dict[str, Any], topology: str, namespace: str) -> Any:
    from squall.state.store import MemoryStore

    return MemoryStore(namespace)


def _open_sqlite(conf: dict[str, Any], pconf: dict[str, Any], topology: str, namespace: str) -> Any:
    from squall.state.sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(conf, topology), namespace)


BUILT_IN = {
    "memory": StateProvider("memory", _open_memory, node_local=True),
    "sqlite": StateProvider("sqlite", _open_sqlite, node_local=True),
}


def provider_of(conf: dict[str, Any]) -> StateProvider:
    """``topology.state.provider``: a built-in, or a provider a package declares
    (entry point group ``squall.state_providers``: squall.contrib.redis's ``redis``)."""
    name = conf.get("topology.state.provider") or "sqlite"
    if name in BUILT_IN:
        return BUILT_IN[name]
    if isinstance(name, str) and name in plugins.declared(plugins.STATE_PROVIDERS):
        provider = plugins.load(plugins.STATE_PROVIDERS, name)
        if isinstance(provider, StateProvider):
            return provider
        msg = f"the state provider {name!r} is not a squall.state.providers.StateProvider: {provider!r}"
        raise ConfigError(msg)
    known = [*BUILT_IN, *sorted(plugins.declared(plugins.STATE_PROVIDERS))]
    msg = f"topology.state.provider must be one of {known}, got {name!r}"
    raise ConfigError(msg)


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
    if provider.check is not None:
        provider.check(conf, pconf)


def sqlite_path(conf: dict[str, Any], topology: str) -> str:
    pconf = provider_config(conf)
    if pconf.get("path"):
        return str(pconf["path"])
    # Not under storm.local.dir: each supervisor has its own, and every worker of the
    # topology on this machine must open the same file.
    base = conf.get("squall.state.dir") or os.path.join(os.path.expanduser("~"), ".squall", "state")
    return os.path.join(base, f"{topology}.sqlite")


def state_key(context: Any) -> str:
    """The name a topology's checkpointed state is kept under: its definition's name
    (the Topology class's, a Flux file's ``name:``), never the name it was submitted
    under, in local mode and on a cluster alike, so that a resubmission under another
    name resumes from the same state.  It names the SQLite file, the store's namespace
    and, on a cluster, the checkpoint record's ZooKeeper node (which nimbus grants the
    topology: squall.nimbus.submission.transactional_paths)."""
    return str(context.definition_name)


def open_store(conf: dict[str, Any], key: str) -> Any:
    """A new store for the bolt state kept under ``key`` (:func:`state_key`)."""
    return provider_of(conf).open(conf, provider_config(conf), key, f"checkpointed:{key}")


STORE_RESOURCE = "squall.state.store"


def worker_store(conf: dict[str, Any], context: Any) -> Any:
    """The store the worker's stateful tasks share: one connection per worker process."""
    key = state_key(context)
    return shared_resource(context.resources, f"{STORE_RESOURCE}:{key}", lambda: open_store(conf, key))
