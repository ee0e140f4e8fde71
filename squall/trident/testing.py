"""Storm's Trident testing spouts and operations (``storm.trident.testing``), for tests and
examples in local mode.

``FeederBatchSpout(fields).feed(rows)`` makes ``rows`` the next batch, dealt round-robin to
the spout's tasks, and returns once that batch has committed.  The spout the workers run is
a copy of the one the test holds (operations travel by value); they meet in a registry of
this process, as Storm's feeders meet in its RegisteredGlobalState: local mode only.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from squall.trident.operations import Aggregator, Filter, Function, TridentTuple
from squall.trident.spout import BatchSpout

FEED_TIMEOUT_SECS = 300.0


class _Feeds:
    """One feeder's batches, shared by the test and the spout's copies in this process."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.batches: list[list[list[Any]]] = []
        self.emitted = 0  # batches given to transactions so far
        self.tx_batch: dict[int, int] = {}  # txid -> batch index
        self.committed: set[int] = set()  # batch indexes committed


_REGISTRY: dict[str, _Feeds] = {}
_REGISTRY_LOCK = threading.Lock()


def _feeds(feeder_id: str) -> _Feeds:
    with _REGISTRY_LOCK:
        return _REGISTRY.setdefault(feeder_id, _Feeds())


class FeederBatchSpout(BatchSpout):
    """A spout fed by the test: ``feed(rows)``."""

    def __init__(self, fields: list[str]) -> None:
        self.output_fields = list(fields)
        self.feeder_id = uuid.uuid4().hex
        self.wait_to_emit = True
        _feeds(self.feeder_id)

    def set_wait_to_emit(self, wait: bool) -> None:
        """False: batches start continuously, empty when nothing was fed."""
        self.wait_to_emit = bool(wait)

    def feed(self, rows: list[Any], timeout: float = FEED_TIMEOUT_SECS) -> None:
        """``rows`` as the next batch; returns once it has committed (TimeoutError past ``timeout``)."""
        feeds = _feeds(self.feeder_id)
        with feeds.lock:
            index = len(feeds.batches)
            feeds.batches.append([list(r) for r in rows])
            feeds.lock.notify_all()
            if not feeds.lock.wait_for(lambda: index in feeds.committed, timeout):
                msg = f"the fed batch {index} did not commit within {timeout} s"
                raise TimeoutError(msg)

    # -- the coordinator's side ------------------------------------------------------------------

    def is_ready(self) -> bool:
        if not self.wait_to_emit:
            return True
        feeds = _feeds(self.feeder_id)
        with feeds.lock:
            return len(feeds.batches) > feeds.emitted

    def batch_metadata(self, txid: int, previous: Any) -> Any:
        feeds = _feeds(self.feeder_id)
        with feeds.lock:
            if len(feeds.batches) <= feeds.emitted:
                return {"rows": []}
            index = feeds.emitted
            feeds.emitted += 1
            feeds.tx_batch[txid] = index
            return {"rows": feeds.batches[index], "batch": index}

    def success(self, txid: int) -> None:
        feeds = _feeds(self.feeder_id)
        with feeds.lock:
            index = feeds.tx_batch.pop(txid, None)
            if index is not None:
                feeds.committed.add(index)
                feeds.lock.notify_all()

    # -- the emitters' side -----------------------------------------------------------------------

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        rows = (collector.metadata or {}).get("rows") or []
        for i, row in enumerate(rows):
            if i % collector.tasks == collector.task_index:
                collector.emit(row)


class FeederCommitterBatchSpout(FeederBatchSpout):
    """Storm's committer variant of the feeder (its emitters hear of commits); the same here."""


class FixedBatchSpout(BatchSpout):
    """Batches of at most ``max_batch_size`` of ``rows`` in order (again from the start with
    ``cycle``), the same batch again for a replayed batch id.  One task (Storm's max
    parallelism 1)."""

    def __init__(self, fields: list[str], max_batch_size: int, *rows: Any, cycle: bool = False) -> None:
        self.output_fields = list(fields)
        self.max_batch_size = max_batch_size
        self.rows = [list(r) for r in rows]
        self.cycle = cycle
        self.batches: dict[int, list[list[Any]]] = {}
        self.index = 0

    def set_cycle(self, cycle: bool) -> None:
        self.cycle = cycle

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.index = 0

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        if collector.task_index != 0:
            return
        batch = self.batches.get(batch_id)
        if batch is None:
            if self.index >= len(self.rows) and self.cycle:
                self.index = 0
            batch = self.rows[self.index:self.index + self.max_batch_size]
            self.index += len(batch)
            self.batches[batch_id] = batch
        for row in batch:
            collector.emit(row)

    def ack(self, batch_id: int) -> None:
        self.batches.pop(batch_id, None)


class Split(Function):
    """Each word of the first field (split on spaces), one tuple per word."""

    def execute(self, tup: TridentTuple, collector: Any) -> None:
        for word in str(tup[0]).split(" "):
            if word:
                collector.emit([word])


class StringLength(Function):
    def execute(self, tup: TridentTuple, collector: Any) -> None:
        collector.emit([len(tup[0])])


class TrueFilter(Filter):
    def is_keep(self, tup: TridentTuple) -> bool:
        return True


class CountAsAggregator(Aggregator):
    """The number of tuples, as a general aggregator (init/aggregate/complete)."""

    def init(self, batch_id: Any, collector: Any) -> list[int]:
        return [0]

    def aggregate(self, state: list[int], tup: TridentTuple, collector: Any) -> None:
        state[0] += 1

    def complete(self, state: list[int], collector: Any) -> None:
        collector.emit([state[0]])

