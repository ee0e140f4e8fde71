"""Transactional topologies: exactly-once processing on Storm's model.

See squall.transactional.topology for how a TransactionalTopology becomes
an ordinary topology, and docs/transactional.md for users.
"""

from squall.lazy import lazy_exports

_EXPORTS = {
    "BatchBolt": "squall.transactional.bolts",
    "Committer": "squall.transactional.bolts",
    "MemoryTransactionalSpout": "squall.transactional.memory",
    "OpaqueMemoryTransactionalSpout": "squall.transactional.memory",
    "OpaquePartitionedTransactionalSpout": "squall.transactional.spouts",
    "PartitionedTransactionalSpout": "squall.transactional.spouts",
    "TransactionAttempt": "squall.transactional.attempt",
    "TransactionalSpout": "squall.transactional.spouts",
    "TransactionalTopology": "squall.transactional.topology",
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
