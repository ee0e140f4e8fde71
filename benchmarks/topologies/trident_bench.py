"""The Trident benchmark's spout (benchmarks/trident.py): batches of the sentence pool by
txid, each batch's start and commit recorded in this process."""

from __future__ import annotations

import threading
import time
from typing import Any

from sentences import sentence_pool

from squall.trident import BatchSpout

POOL_SIZE = 20_000


class Committed:
    """What the pool spout's coordinator saw, in this process: each txid's start and commit."""

    lock = threading.Lock()
    started: dict[int, float] = {}
    batches: list[tuple[float, float, int]] = []  # (started, committed, sentences)


class PoolBatches(BatchSpout):
    """``batch`` sentences of the pool per batch, by txid: a replay emits the same ones."""

    output_fields = ["sentence"]

    def __init__(self, batch: int) -> None:
        self.batch = batch

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.pool = sentence_pool(POOL_SIZE)

    def batch_metadata(self, txid: int, previous: Any) -> Any:
        with Committed.lock:
            Committed.started.setdefault(txid, time.perf_counter())
        return {"first": (txid * self.batch) % POOL_SIZE}

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        first, pool = collector.metadata["first"], self.pool
        for i in range(collector.task_index, self.batch, collector.tasks):
            collector.emit([pool[(first + i) % POOL_SIZE]])

    def success(self, txid: int) -> None:
        with Committed.lock:
            started = Committed.started.pop(txid, None)
            if started is not None:
                Committed.batches.append((started, time.perf_counter(), self.batch))
