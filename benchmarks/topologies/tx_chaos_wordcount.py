"""The transactional word count benchmarks/tx_chaos.py breaks while it runs.

The source is a file of sentences released over time, as a broker would
receive them: ``sentences.json`` in the run directory (conf key
``squall.test.dir``), cut into four fixed partitions (``sentences[p::4]``).
Sentence i is released ``i / squall.test.release.per.sec`` seconds after
the wall-clock time the driver wrote in ``start.json`` (``time.time()``:
every process must agree on it, so no monotonic clock here).  A batch takes,
per partition, what was released after the previous batch's end, at most
``MAX_PER_BATCH`` sentences, and may be empty.

The committer adds each batch's counts to ``counts.sqlite`` by hand with
sqlite3, following Storm's documented rule as a user would write it: every
word's row keeps the txid that last changed it, and a batch whose txid is
the one stored is skipped for that word.  It also appends one line per
commit, ``txid attempt_id epoch pid task``, to ``commits-<task>-<pid>.log``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import Counter
from typing import Any, ClassVar

from squall import Grouping
from squall.transactional import BatchBolt, Committer, PartitionedTransactionalSpout, TransactionalTopology

PARTITIONS = 4
MAX_PER_BATCH = 40  # sentences per partition per batch
DEFAULT_RELEASE_PER_SEC = 300.0  # sentences a second, all partitions together
BUSY_TIMEOUT_SECS = 30.0  # several worker processes write the same SQLite file

SCHEMA = "CREATE TABLE IF NOT EXISTS counts (word TEXT PRIMARY KEY, n INTEGER, txid INTEGER)"


class ReleasedSentences(PartitionedTransactionalSpout):
    outputs = ["tx", "sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        run_dir = conf["squall.test.dir"]
        with open(os.path.join(run_dir, "sentences.json")) as f:
            sentences = json.load(f)
        with open(os.path.join(run_dir, "start.json")) as f:
            self.start = float(json.load(f)["start"])
        self.partitions = [sentences[p::PARTITIONS] for p in range(PARTITIONS)]
        self.rate = float(conf.get("squall.test.release.per.sec", DEFAULT_RELEASE_PER_SEC))

    def num_partitions(self) -> int:
        return PARTITIONS

    def released(self, partition: int) -> int:
        """How many of the partition's sentences are released by now."""
        total = int((time.time() - self.start) * self.rate)  # sentences 0 .. total-1, all partitions
        mine = -(-(total - partition) // PARTITIONS)  # those i < total with i % PARTITIONS == partition
        return max(0, min(mine, len(self.partitions[partition])))

    def emit_new_batch(self, attempt: Any, emit: Any, partition: int, last_metadata: Any) -> Any:
        lo = 0 if last_metadata is None else last_metadata["hi"]
        hi = max(lo, min(lo + MAX_PER_BATCH, self.released(partition)))
        metadata = {"lo": lo, "hi": hi}
        self.emit_batch(attempt, emit, partition, metadata)
        return metadata

    def emit_batch(self, attempt: Any, emit: Any, partition: int, metadata: Any) -> None:
        for sentence in self.partitions[partition][metadata["lo"]:metadata["hi"]]:
            emit([attempt, sentence])


class CountWords(BatchBolt):
    """The words of this task's share of the batch's sentences, counted."""

    outputs = ["tx", "word", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.attempt = attempt
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts.update(tup.values.sentence.split())

    def finish_batch(self) -> None:
        for word, n in self.counts.items():
            self.emit([self.attempt, word, n])


class CommitCounts(Committer, BatchBolt):
    """Adds the batch's counts to SQLite in one transaction, Storm's txid rule by hand."""

    outputs = []
    # One connection per (database, executor thread): a fresh instance is made for
    # every batch, and a sqlite3 connection must not cross threads.
    connections: ClassVar[dict[tuple[str, int], sqlite3.Connection]] = {}

    def initialize(self, conf: dict[str, Any], context: Any, attempt: Any) -> None:
        self.attempt = attempt
        self.dir = conf["squall.test.dir"]
        self.task = context.task_id
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values.word] += tup.values.count

    def connection(self) -> sqlite3.Connection:
        key = (os.path.join(self.dir, "counts.sqlite"), threading.get_ident())
        conn = self.connections.get(key)
        if conn is None:
            # isolation_level=None: no implicit transactions, the BEGIN below is ours.
            conn = sqlite3.connect(key[0], timeout=BUSY_TIMEOUT_SECS, isolation_level=None)
            conn.execute(SCHEMA)
            self.connections[key] = conn
        return conn

    def finish_batch(self) -> None:
        txid = self.attempt.txid
        if self.counts:
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for word, n in sorted(self.counts.items()):
                    row = conn.execute("SELECT n, txid FROM counts WHERE word = ?", (word,)).fetchone()
                    if row is None:
                        conn.execute("INSERT INTO counts (word, n, txid) VALUES (?, ?, ?)", (word, n, txid))
                    elif row[1] != txid:  # Storm's rule: a txid already there was applied
                        conn.execute("UPDATE counts SET n = ?, txid = ? WHERE word = ?",
                                     (row[0] + n, txid, word))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a failed statement may have rolled it back already
                    conn.execute("ROLLBACK")
                raise
        # Whether or not TransactionAttempt has an epoch (a fix in progress adds one).
        epoch = getattr(self.attempt, "epoch", "")
        line = f"{txid} {self.attempt.attempt_id} {epoch} {os.getpid()} {self.task}\n"
        with open(os.path.join(self.dir, f"commits-{self.task}-{os.getpid()}.log"), "a") as f:
            f.write(line)


class TxChaosWordCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3, "topology.message.timeout.secs": 10, "topology.workers": 4}
    sentences = ReleasedSentences.spec(par=2)
    count = CountWords.spec(inputs={sentences: Grouping.shuffle()}, par=3)
    commit = CommitCounts.spec(inputs={count: Grouping.fields("word")}, par=2)
