"""Trident's state: map states of the three kinds, in memory, SQLite and other Squall stores.

    from squall.trident.state import MemoryMapState, SqliteMapState, OpaqueMap, StateType

    words.persistent_aggregate(MemoryMapState.factory(), Count(), ["count"])
    words.persistent_aggregate(SqliteMapState.opaque("/var/squall/counts.db"), Count(), ["count"])

Redis map states are :class:`squall.contrib.redis.RedisMapState` (storm-redis's
name), or ``StoreMapState(provider="redis", ...)``.  Which kind to pick: the
spout's (Trident-state.md): opaque state is exactly once under any replay,
transactional state only when a replayed txid carries the same batch.
"""

from squall.lazy import lazy_exports

_EXPORTS = {
    "CombinerValueUpdater": "squall.trident.state.base",
    "ITupleCollection": "squall.trident.state.base",
    "ReadOnlyState": "squall.trident.state.base",
    "ReducerValueUpdater": "squall.trident.state.base",
    "Snapshottable": "squall.trident.state.base",
    "StaleBatchError": "squall.trident.state.base",
    "State": "squall.trident.state.base",
    "StateFactory": "squall.trident.state.base",
    "StateType": "squall.trident.state.base",
    "ValueUpdater": "squall.trident.state.base",
    "CachedMap": "squall.trident.state.map",
    "IBackingMap": "squall.trident.state.map",
    "MapState": "squall.trident.state.map",
    "NonTransactionalMap": "squall.trident.state.map",
    "OpaqueMap": "squall.trident.state.map",
    "SnapshottableMap": "squall.trident.state.map",
    "TransactionalMap": "squall.trident.state.map",
    "build_map_state": "squall.trident.state.map",
    "MemoryBackingMap": "squall.trident.state.memory",
    "MemoryMapState": "squall.trident.state.memory",
    "MemoryMapStateFactory": "squall.trident.state.memory",
    "SqliteMapState": "squall.trident.state.stores",
    "StoreBackingMap": "squall.trident.state.stores",
    "StoreMapState": "squall.trident.state.stores",
    "OpaqueValue": "squall.trident.state.values",
    "TransactionalValue": "squall.trident.state.values",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
