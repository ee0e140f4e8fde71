"""Numbered events counted exactly once, from Redis streams into Redis: the cluster tests' topology.

The events are entries ``{n, key}`` in the streams ``events:0`` and
``events:1`` (``squall.test.partitions``), read by the partitioned Redis
Streams spout, ``squall.test.batch`` entries per stream per batch, new
transactions started at most ``squall.test.batches.per.sec`` a second (so
a test has time to break things while they flow).  Two committers write to
the Redis at ``redis.url``: per key (``squall:state:txcount``, fields
grouping) and the total (``squall:state:txcount-total``, key ``total``).
Each appends ``txid attempt`` to a log per task and process in
``squall.test.dir``, for the order checks.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from squall import Grouping
from squall.contrib.redis.store import RedisStore
from squall.contrib.redis.transactional import RedisStreamPartitionedSpout
from squall.state import TransactionalMap, TransactionalValue
from squall.transactional import BatchBolt, Committer, TransactionalTopology

STREAM = "events:{}"
PARTITIONS = 2
_STORES: dict[tuple[str, str], RedisStore] = {}  # one connection per worker process and namespace


def store(conf: dict[str, Any], namespace: str) -> RedisStore:
    where = (conf["redis.url"], namespace)
    if where not in _STORES:
        _STORES[where] = RedisStore(*where)
    return _STORES[where]


def log_commit(conf: dict[str, Any], name: str, task: int, attempt: Any) -> None:
    path = os.path.join(conf["squall.test.dir"], f"commits-{name}-{task}-{os.getpid()}.log")
    with open(path, "a") as f:
        f.write(f"{attempt.txid} {attempt.attempt_id}\n")


class PacedEvents(RedisStreamPartitionedSpout):
    """At most ``squall.test.batches.per.sec`` new transactions a second."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.options = {**self.options, "batch_size": conf.get("squall.test.batch", 10)}
        super().initialize(conf, context)
        self.rate = conf.get("squall.test.batches.per.sec", 4)
        self.began = self.clock.now()
        self.started = 0

    def num_partitions(self) -> int:
        self.started += 1
        return super().num_partitions()

    def is_ready(self) -> bool:
        return self.started < (self.clock.now() - self.began) * self.rate + 1 and super().is_ready()


class PartialCount(BatchBolt):
    outputs = ["tx", "key", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.attempt = attempt
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.fields["key"]] += 1

    def finish_batch(self) -> None:
        for key, n in self.counts.items():
            self.emit([self.attempt, key, n])


class CommitKeys(Committer, BatchBolt):
    outputs = []

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.conf_, self.attempt, self.task = conf, attempt, context.task_id
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.key] += tup.values.count

    def finish_batch(self) -> None:
        TransactionalMap(store(self.conf_, "txcount")).increment(self.attempt.txid, dict(self.counts))
        log_commit(self.conf_, "keys", self.task, self.attempt)


class CommitTotal(Committer, BatchBolt):
    outputs = []

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.conf_, self.attempt, self.task = conf, attempt, context.task_id
        self.total = 0

    def process(self, tup: Any) -> None:
        self.total += tup.values.count

    def finish_batch(self) -> None:
        total = TransactionalValue(store(self.conf_, "txcount-total"), "total")
        total.increment(self.attempt.txid, self.total)
        log_commit(self.conf_, "total", self.task, self.attempt)


class RedisTransactionalCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3, "topology.message.timeout.secs": 10}
    events = PacedEvents.spec(stream=STREAM, partitions=PARTITIONS, par=2, poll_interval=0.05)
    partial = PartialCount.spec(inputs=[events], par=2)
    keys = CommitKeys.spec(inputs={partial: Grouping.fields("key")}, par=2)
    total = CommitTotal.spec(inputs={partial: Grouping.global_()})
