"""Trident's spouts: ``BatchSpout`` (Storm's IBatchSpout) and how a Trident spout runs on the
transactional core: :class:`TridentSpout` is the transactional spout (squall.transactional)
the compiler places for each ``new_stream``, carrying the user's spout inside it.

A batch spout may also take part on the coordinator's side (Storm's ITridentSpout
coordinator) by defining ``is_ready()`` (may a new batch start now?) and
``batch_metadata(txid, previous)`` (what the batch is, stored with the txid so that a replay
gets the same); ``emit_batch(batch_id, collector)`` then finds it as ``collector.metadata``.
"""

from __future__ import annotations

from typing import Any

from squall.topology.loading import by_value, from_value
from squall.transactional.spouts import TransactionalSpout

# An operation or spout as options carry it: by value, as text.
encode, decode = by_value, from_value


class BatchSpout:
    """Storm's IBatchSpout: ``emit_batch(batch_id, collector)`` emits a batch (the same
    tuples again when the same batch id comes back: it is replayed), ``ack(batch_id)`` once it
    has committed."""

    output_fields: list[str] = []

    def open(self, conf: dict[str, Any], context: Any) -> None:
        pass

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        raise NotImplementedError

    def ack(self, batch_id: int) -> None:
        pass

    def close(self) -> None:
        pass

    def get_output_fields(self) -> list[str]:
        return list(self.output_fields)


class SpoutCollector:
    """What the user's spout emits with: ``emit(values)``, in its batch."""

    __slots__ = ("attempt", "chunk", "metadata", "out", "rows", "task_index", "tasks")

    def __init__(self, attempt: Any, metadata: Any, out: Any, task_index: int, tasks: int,
                 chunk: int = 0) -> None:
        self.attempt, self.metadata, self.out = attempt, metadata, out
        self.task_index, self.tasks = task_index, tasks
        self.chunk = chunk  # > 0: rows travel that many to a tuple (see TridentSpout)
        self.rows: list[list[Any]] = []

    def emit(self, values: Any) -> None:
        if not self.chunk:
            self.out([self.attempt, *values])
            return
        self.rows.append(list(values))
        if len(self.rows) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            rows, self.rows = self.rows, []
            self.out([self.attempt, rows])

    def emit_to(self, stream: str, values: Any) -> None:
        """On another of the spout's streams (a DRPC stream's return info)."""
        self.out([self.attempt, *values], stream=stream)

    def report_error(self, exc: BaseException) -> None:
        raise exc


class TridentSpout(TransactionalSpout):
    """The transactional spout of a ``new_stream``: the user's spout (``options["spout"]``,
    encoded) on both sides, ``open``ed once per task.

    ``options["chunk"]``: a batch's rows go to the next bolt that many to a tuple (one queue
    hop and one count per chunk, not per row), where no edge from the spout partitions by
    fields; 0: a tuple per row."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.user = decode(self.options["spout"])
        self.index = context.this_task_index
        self.ntasks = len(context.this_component_tasks)
        self.acked = 0  # every batch before this one has been acked
        opener = getattr(self.user, "open", None)
        if callable(opener):
            opener(conf, context)

    def is_ready(self) -> bool:
        ready = getattr(self.user, "is_ready", None)
        return bool(ready()) if callable(ready) else True

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> Any:
        meta = getattr(self.user, "batch_metadata", None)
        return meta(txid, prev_metadata) if callable(meta) else None

    def emit_batch(self, attempt: Any, metadata: Any, emit: Any) -> None:
        collector = SpoutCollector(attempt, metadata, emit, self.index, self.ntasks,
                                   int(self.options.get("chunk") or 0))
        self.user.emit_batch(attempt.txid, collector)
        collector.flush()

    def cleanup_before(self, txid: int) -> None:
        """Batches up to ``txid`` have committed (the emitter learns it with the next batch):
        the user's spout acks each, once."""
        if self.acked == 0:
            self.acked = txid
        while self.acked <= txid:
            self.user.ack(self.acked)
            self.acked += 1

    def success(self, txid: int) -> None:
        success = getattr(self.user, "success", None)
        if callable(success):
            success(txid)

    def failed(self, txid: int) -> None:
        failed = getattr(self.user, "failed", None)
        if callable(failed):
            failed(txid)

    def close(self) -> None:
        closer = getattr(self.user, "close", None)
        if callable(closer):
            closer()
