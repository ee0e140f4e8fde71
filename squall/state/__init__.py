"""State that transactional topologies' committer bolts update exactly once.

    from squall.state import SQLiteStore, OpaqueMap

    counts = OpaqueMap(SQLiteStore("/var/squall/state/wordcount.db", namespace="counts"))
    counts.increment(attempt, {"the": 3, "cat": 1})   # in the committer's finish_batch

Stateful bolts (:class:`StatefulBolt`) keep a :class:`KeyValueState` that the
framework checkpoints into the same stores (docs/state.md).

Stores (:class:`Store`: in memory, SQLite) keep JSON values under string keys
and update a set of keys atomically; the maps and values stamp each value
with the txid that wrote it, under Storm's "transactional" or "opaque" rule.
"""

from squall.lazy import lazy_exports

_EXPORTS = {
    "CheckpointedSpout": "squall.state.bolts",
    "KeyValueState": "squall.state.kv",
    "StatefulBolt": "squall.state.bolts",
    "StatefulWindowedBolt": "squall.windowing.stateful",
    "MemoryStore": "squall.state.store",
    "Store": "squall.state.store",
    "SQLiteStore": "squall.state.sqlite",
    "OpaqueMap": "squall.state.values",
    "OpaqueValue": "squall.state.values",
    "TransactionalMap": "squall.state.values",
    "TransactionalValue": "squall.state.values",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
