"""The transactional spout kinds users implement: Python shapes of Storm's
ITransactionalSpout, IPartitionedTransactionalSpout and
IOpaquePartitionedTransactionalSpout.

A transactional spout runs as two parts (the seed's "Implementation"): one
instance inside the coordinator, a regular spout of one task that decides
when each transaction starts and what metadata it has, and one instance in
each emitter task, a bolt that emits the task's share of every batch.  Both
get ``initialize(conf, context)`` and ``close()``; each side calls only its
own methods.

The first field of every stream a transactional spout declares carries the
:class:`~squall.transactional.TransactionAttempt`: ``emit([attempt, ...])``.
Metadata must be JSON-able: it is stored in ZooKeeper, and a replay gets it
back as JSON gave it (tuples become lists).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from squall.topology.component import Component, ComponentSpec, spout_spec
from squall.transactional.attempt import TransactionAttempt

Emit = Callable[..., Any]


class _TransactionalSpoutBase(Component):
    # "transactional" | "partitioned" | "opaque": how the emitters use metadata.
    transactional_kind = ""

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, tasks: int | None = None,
             config: Mapping[str, Any] | None = None, **options: Any) -> ComponentSpec:
        """Place the spout; ``par`` is the emitters' parallelism (the coordinator has one task)."""
        return spout_spec(cls, f"transactional spout {cls.__name__}", name, par, tasks, config, options)

    def is_ready(self) -> bool:
        """Coordinator side: may a new transaction start now?  (A replay never asks.)"""
        return True

    def close(self) -> None:
        """The spout is being shut down in an orderly way."""


class TransactionalSpout(_TransactionalSpoutBase):
    """Storm's ITransactionalSpout: the coordinator makes each transaction's
    metadata; every emitter task emits its part of the batch from it, the same
    tuples for the same metadata."""

    transactional_kind = "transactional"

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> Any:
        """Coordinator side: the metadata of new transaction ``txid``, from the
        previous transaction's (None for the first)."""
        return None

    def emit_batch(self, attempt: TransactionAttempt, metadata: Any, emit: Emit) -> None:
        """Emitter side: emit this task's tuples of the batch ``metadata`` describes."""
        raise NotImplementedError

    def cleanup_before(self, txid: int) -> None:
        """Emitter side: transactions before ``txid`` are committed; forget them."""

    def success(self, txid: int) -> None:
        """Coordinator side: transaction ``txid`` has committed (Storm's ITridentSpout
        coordinator's ``success``)."""

    def failed(self, txid: int) -> None:
        """Coordinator side: an attempt of ``txid`` failed; it will be replayed."""


class PartitionedTransactionalSpout(_TransactionalSpoutBase):
    """Storm's IPartitionedTransactionalSpout: batches read from partitions
    (a broker's), each partition's metadata kept by Squall per transaction so
    that a replay is exact.  Partition p belongs to emitter task index
    ``p mod number of emitter tasks``."""

    transactional_kind = "partitioned"

    def num_partitions(self) -> int:
        """Coordinator side: how many partitions the next new transaction reads."""
        raise NotImplementedError

    def emit_new_batch(self, attempt: TransactionAttempt, emit: Emit, partition: int,
                       last_metadata: Any) -> Any:
        """Emit the partition's next batch after ``last_metadata`` (None at the
        start); return the metadata that lets ``emit_batch`` replay it exactly."""
        raise NotImplementedError

    def emit_batch(self, attempt: TransactionAttempt, emit: Emit, partition: int, metadata: Any) -> None:
        """Replay: emit exactly the batch ``metadata`` describes."""
        raise NotImplementedError


class OpaquePartitionedTransactionalSpout(_TransactionalSpoutBase):
    """Storm's IOpaquePartitionedTransactionalSpout: a replayed transaction
    may carry different tuples (a broker node is gone), so committers must
    keep opaque values; every batch starts where the previous transaction's
    batch ended, and no tuple is skipped or emitted in two transactions."""

    transactional_kind = "opaque"

    def num_partitions(self) -> int:
        raise NotImplementedError

    def emit_batch(self, attempt: TransactionAttempt, emit: Emit, partition: int,
                   last_metadata: Any) -> Any:
        """Emit the partition's batch starting after ``last_metadata``; return its metadata."""
        raise NotImplementedError


SPOUT_KINDS = (TransactionalSpout, PartitionedTransactionalSpout, OpaquePartitionedTransactionalSpout)
