"""Trident: Storm's high-level API of streams of batches, on Squall's transactional core.

The API is pinned in the project's trident.md (Storm's names in snake_case); what each name
is lives in the module its entry below names.
"""

from squall.lazy import lazy_exports
from squall.trident.state import _EXPORTS as STATE_EXPORTS

_EXPORTS: dict[str, str] = {
    # The stream algebra (squall.trident.stream) and the operations (squall.trident.operations)
    "ChainedAggregatorDeclarer": "squall.trident.stream",
    "GroupedStream": "squall.trident.stream",
    "Stream": "squall.trident.stream",
    "TridentState": "squall.trident.stream",
    "TridentTopology": "squall.trident.stream",
    "Aggregator": "squall.trident.operations",
    "Assembly": "squall.trident.operations",
    "CombinerAggregator": "squall.trident.operations",
    "Count": "squall.trident.operations",
    "Debug": "squall.trident.operations",
    "Equals": "squall.trident.operations",
    "Filter": "squall.trident.operations",
    "FilterNull": "squall.trident.operations",
    "FirstN": "squall.trident.operations",
    "Function": "squall.trident.operations",
    "MapGet": "squall.trident.operations",
    "Negate": "squall.trident.operations",
    "Operation": "squall.trident.operations",
    "QueryFunction": "squall.trident.operations",
    "ReducerAggregator": "squall.trident.operations",
    "SnapshotGet": "squall.trident.operations",
    "StateUpdater": "squall.trident.operations",
    "Sum": "squall.trident.operations",
    "TridentTuple": "squall.trident.operations",
    "TupleCollectionGet": "squall.trident.operations",
    "BatchSpout": "squall.trident.spout",
    # State: every name squall.trident.state exports, from its one table
    **STATE_EXPORTS,
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
