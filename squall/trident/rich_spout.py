"""A plain ``squall.Spout`` as a Trident stream: Storm's RichSpoutBatchExecutor, the
transactional spout the compiler places for ``new_stream(tx_id, spout)`` when ``spout`` is an
at-least-once spout (squall.trident.sources).

Each emitter task runs an instance of the user's spout of its own, opened (``initialize``,
then ``activate``) at the task's first batch: only the emitters read the spout, never the
coordinator's copy of this adapter.  A new batch calls ``next_tuple`` until the batch holds
``topology.spout.max.batch.size`` tuples (Storm's key, 1000) or a call emits nothing.

What a user can rely on (where it is not Storm's behaviour, it says so):

* **Replays** emit the same tuples: each batch's tuples are kept by txid until the batch
  commits, so a replayed txid sends them again.  (Storm's fails the batch's message ids and
  emits whatever ``next_tuple`` gives next, so a transactional state that had already
  stored that txid misses the new tuples.)  While the emitter task lives, a replay is exact;
  a task that restarts has lost them, and its spout's own redelivery (a Redis consumer
  group's pending entries, a broker's unacked messages) brings them back: at least once.
* **ack**: a batch's message ids are acked once it has committed, in txid order (the emitter
  learns of the commit with the next batch, which the interval below never holds back long).
* **fail** is never called for a batch Trident replays itself: the spout would emit those
  tuples again, in a second batch.  It is called, when the task closes, for the ids of the
  batches it still holds uncommitted, so that a spout whose broker takes a nack redelivers
  at once.
* The coordinator cannot ask a plain spout whether it has tuples before a batch starts, so
  it starts one at most every ``topology.trident.batch.emit.interval.millis`` (Storm's key,
  500 ms), empty or not.
* An emit made outside a batch (from ``ack``, ``fail`` or a ``call_soon`` callback) goes
  into the next batch.  Emits name the spout's one stream or none; a direct emit is an error
  (Trident reads no direct stream).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from squall.config import DEFAULTS
from squall.transactional.spouts import Emit, TransactionalSpout

MAX_BATCH_SIZE_CONF = "topology.spout.max.batch.size"
EMIT_INTERVAL_CONF = "topology.trident.batch.emit.interval.millis"


class _Batch:
    """One txid's tuples as this task emitted them, and their message ids."""

    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.values: list[list[Any]] = []
        self.ids: list[Any] = []


class RichSpoutBatchExecutor(TransactionalSpout):
    """``options``: ``spout`` and ``spout_options`` (the user's spout, as ``build_inner``
    takes it) and ``stream`` (the one of its streams Trident reads)."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.max_batch = int(conf.get(MAX_BATCH_SIZE_CONF) or DEFAULTS[MAX_BATCH_SIZE_CONF])
        interval = conf.get(EMIT_INTERVAL_CONF)
        self.interval = (DEFAULTS[EMIT_INTERVAL_CONF] if interval is None else interval) / 1000.0
        self.stream: str = self.options.get("stream", "default")
        self.last_start: float | None = None  # coordinator side: when the last new batch started
        self.spout: Any = None  # emitter side: the user's spout, opened at the first batch
        self.batches: dict[int, _Batch] = {}  # txid -> its batch, until committed
        self.held: deque[tuple[list[Any], Any]] = deque()  # emitted outside a batch
        self.current: _Batch | None = None
        self.attempt: Any = None
        self.out: Emit | None = None

    # -- the coordinator's side ---------------------------------------------------------------

    def is_ready(self) -> bool:
        now = self.clock.now()
        if self.last_start is not None and now - self.last_start < self.interval:
            return False
        self.last_start = now
        return True

    # -- the emitters' side -------------------------------------------------------------------

    def open_spout(self) -> None:
        spout = self.build_inner(self.options["spout"], self.options.get("spout_options"))
        spout.emit = self.capture
        spout.initialize(self.conf, self.context)
        spout.activate()
        self.spout = spout

    def capture(self, values: Any, tup_id: Any = None, stream: str | None = None,
                direct_task: Any = None) -> Any:
        """The user's spout's ``emit``: into the batch being made (kept for its replays)."""
        if direct_task is not None:
            msg = f"{type(self.spout).__name__} emitted to task {direct_task}: Trident reads no direct stream"
            raise ValueError(msg)
        if stream is not None and stream != self.stream:
            msg = (f"{type(self.spout).__name__} emitted on stream {stream!r}; Trident reads its stream "
                   f"{self.stream!r} only")
            raise ValueError(msg)
        batch, out = self.current, self.out
        if batch is None or out is None:
            self.held.append((list(values), tup_id))
            return []
        tasks = out([self.attempt, *values], stream=self.stream)
        batch.values.append(list(values))
        if tup_id is not None:
            batch.ids.append(tup_id)
        return tasks

    def emit_batch(self, attempt: Any, metadata: Any, emit: Emit) -> None:
        if self.spout is None:
            self.open_spout()
        kept = self.batches.get(attempt.txid)
        if kept is not None:  # a replay: the same tuples again
            for values in kept.values:
                emit([attempt, *values], stream=self.stream)
            return
        # Kept before anything is emitted: if next_tuple raises halfway, the replay sends
        # what this attempt sent, and the ids of those tuples are acked with it.
        batch = self.batches[attempt.txid] = _Batch()
        self.current, self.attempt, self.out = batch, attempt, emit
        try:
            while self.held and len(batch.values) < self.max_batch:
                values, tup_id = self.held.popleft()
                self.capture(values, tup_id)
            while len(batch.values) < self.max_batch:
                before = len(batch.values)
                self.spout.next_tuple()
                if len(batch.values) == before:
                    break
        finally:
            self.current, self.attempt, self.out = None, None, None

    def cleanup_before(self, txid: int) -> None:
        """Batches up to ``txid`` have committed: their message ids are acked, in txid order."""
        for done in sorted(t for t in self.batches if t <= txid):
            for tup_id in self.batches.pop(done).ids:
                self._call(self.spout.ack, tup_id)

    def close(self) -> None:
        if self.spout is None:
            return
        pending = [tup_id for txid in sorted(self.batches) for tup_id in self.batches[txid].ids]
        pending += [tup_id for _values, tup_id in self.held if tup_id is not None]
        self.batches.clear()
        self.held.clear()
        for tup_id in pending:
            self._call(self.spout.fail, tup_id)
        self.spout.close()

    def _call(self, callback: Any, tup_id: Any) -> None:
        try:
            callback(tup_id)
        except Exception as e:  # noqa: BLE001 - the user's ack or fail: reported, the others still go
            self.report_error(e)
