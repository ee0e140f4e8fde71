"""The seed's TransactionalGlobalCount: count every tuple exactly once.

    squall local examples/transactional/global_count.py --duration 5
    squall --config squall-dev/squall.yaml submit examples/transactional/global_count.py \
        --conf example.db=/tmp/global-count.sqlite

Partial counts per batch run in parallel (BatchCount, three tasks); the
committer adds each batch's sum to the stored total in txid order, and skips
a txid it already applied, so a replayed batch is never counted twice.  It
prints each committed total; the data holds 16 tuples, so the last is 16.
"""

from __future__ import annotations

from typing import Any

from squall import Grouping
from squall.state import TransactionalValue
from squall.transactional import (
    BatchBolt,
    Committer,
    MemoryTransactionalSpout,
    TransactionalTopology,
    TransactionAttempt,
)

try:
    from stores import open_store  # run as a file: its directory is on the path
except ImportError:  # imported as part of the examples package
    from examples.transactional.stores import open_store

PARTITIONS = [
    [["cat"], ["dog"], ["chicken"], ["cat"], ["dog"], ["apple"]],
    [["cat"], ["dog"], ["apple"], ["banana"]],
    [["cat"], ["cat"], ["cat"], ["cat"], ["cat"], ["dog"]],
]


class BatchCount(BatchBolt):
    """How many tuples of the batch reached this task."""

    outputs = ["id", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:
        self.attempt, self.count = attempt, 0

    def process(self, tup: Any) -> None:
        self.count += 1

    def finish_batch(self) -> None:
        self.emit([self.attempt, self.count])


class UpdateGlobalCount(Committer, BatchBolt):
    """Adds the batch's sum to the stored total, once per txid."""

    outputs = ["id", "sum"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:
        self.attempt, self.sum = attempt, 0
        self.total = TransactionalValue(open_store(conf, context.topology_name), "global-count")
        self.commits = self.metrics.counter("commits")  # the task's own metric, shown by `squall info`

    def process(self, tup: Any) -> None:
        self.sum += tup.values.count

    def finish_batch(self) -> None:
        total = self.total.increment(self.attempt, self.sum)
        self.commits.inc()
        print(f"txid {self.attempt.txid} committed: global count = {total}", flush=True)
        self.emit([self.attempt, total])


class TransactionalGlobalCount(TransactionalTopology):
    transactional_id = "global-count"
    config = {"topology.max.spout.pending": 3}
    spout = MemoryTransactionalSpout.spec(data=PARTITIONS, fields=["word"], take_per_batch=3, par=2)
    partial = BatchCount.spec(inputs=[spout], par=3)
    total = UpdateGlobalCount.spec(inputs={partial: Grouping.global_()})
