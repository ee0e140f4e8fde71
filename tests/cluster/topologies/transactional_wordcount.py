"""A transactional word count for the cluster tests: exactly once into SQLite.

The source is a file of sentences cut into partitions (a broker's, in
spirit): a partitioned transactional spout whose batch is an index range per
partition, replayed exactly from the metadata Squall keeps in ZooKeeper.
Transactions start at most ``squall.test.batches.per.sec`` a second, so a
test has time to break things while they flow.  The committer adds each
batch's word counts to ``counts.sqlite`` in the test directory, skipping a
txid it already applied, and appends ``txid attempt`` to a log per process.
Its counting bolts are the partition tests' transactional count's too
(queue_wordcount.py).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from squall import Bolt, Grouping
from squall.state import SQLiteStore, TransactionalMap
from squall.transactional import BatchBolt, Committer, PartitionedTransactionalSpout, TransactionalTopology

PARTITIONS = 4


class FileSentences(PartitionedTransactionalSpout):
    outputs = ["tx", "sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        with open(os.path.join(conf["squall.test.dir"], "sentences.json")) as f:
            sentences = [s for _key, s in json.load(f)]
        self.partitions = [sentences[p::PARTITIONS] for p in range(PARTITIONS)]
        self.take = conf.get("squall.test.take", 5)
        self.rate = conf.get("squall.test.batches.per.sec", 4)
        self.started = self.clock.now()
        self.begun = 0  # new transactions this coordinator started

    def num_partitions(self) -> int:
        self.begun += 1
        return PARTITIONS

    def is_ready(self) -> bool:
        return self.begun < (self.clock.now() - self.started) * self.rate + 1

    def emit_new_batch(self, attempt: Any, emit: Any, partition: int, last_metadata: Any) -> Any:
        start = 0 if last_metadata is None else last_metadata["end"]
        end = min(start + self.take, len(self.partitions[partition]))
        self.emit_batch(attempt, emit, partition, {"start": start, "end": end})
        return {"start": start, "end": end}

    def emit_batch(self, attempt: Any, emit: Any, partition: int, metadata: Any) -> None:
        for sentence in self.partitions[partition][metadata["start"]:metadata["end"]]:
            emit([attempt, sentence])


class Split(Bolt):
    outputs = ["tx", "word"]

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split():
            self.emit([tup.values.tx, word])


class PartialCount(BatchBolt):
    outputs = ["tx", "word", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.attempt = attempt
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.word] += 1

    def finish_batch(self) -> None:
        for word, n in self.counts.items():
            self.emit([self.attempt, word, n])


class CommitCounts(Committer, BatchBolt):
    outputs = []
    stores: dict[str, TransactionalMap] = {}  # one SQLite connection per worker process

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.attempt = attempt
        self.counts: Counter[str] = Counter()
        self.dir = conf["squall.test.dir"]
        if self.dir not in self.stores:
            self.stores[self.dir] = TransactionalMap(SQLiteStore(os.path.join(self.dir, "counts.sqlite")))
        self.db = self.stores[self.dir]
        self.task = context.task_id

    def process(self, tup: Any) -> None:
        self.counts[tup.values.word] += tup.values.count

    def finish_batch(self) -> None:
        self.db.increment(self.attempt.txid, dict(self.counts))
        with open(os.path.join(self.dir, f"commits-{self.task}-{os.getpid()}.log"), "a") as f:
            f.write(f"{self.attempt.txid} {self.attempt.attempt_id}\n")


class TransactionalWordCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3, "topology.message.timeout.secs": 5}
    sentences = FileSentences.spec(par=2)
    split = Split.spec(inputs=[sentences], par=2)
    partial = PartialCount.spec(inputs={split: Grouping.fields("word")}, par=2)
    commit = CommitCounts.spec(inputs={partial: Grouping.fields("word")}, par=2)
