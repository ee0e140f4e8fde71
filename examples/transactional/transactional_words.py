"""storm-starter's TransactionalWords: word counts and a count of counts.

    squall local examples/transactional/transactional_words.py --duration 5
    squall --config squall-dev/squall.yaml submit examples/transactional/transactional_words.py \
        --conf example.db=/tmp/words.sqlite

Three kinds of bolt in one topology, as the seed describes them:

- ``KeyedCountUpdater``, a committer: per batch, counts each word it owns
  (fields grouping) and adds them to the stored counts in the commit phase,
  keeping the previous count next to the new one;
- ``Bucketize``, a plain bolt downstream of it, so in the commit phase too:
  a word whose count crossed into another bucket of ten moves it (-1 from
  the old bucket, +1 to the new);
- ``BucketCountUpdater``, a committer downstream of both: how many words
  sit in each bucket.

Both stores skip a txid they already applied, so a replay counts nothing
twice; a replayed commit re-emits the same (count, previous count) pairs
because they are read back, not recomputed.  It prints the buckets after
every commit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from squall import Bolt, Grouping
from squall.state import TransactionalMap
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

BUCKET_SIZE = 10
_WORDS = ["cat", "dog", "chicken", "apple", "banana", "pear", "plum", "fig"]
PARTITIONS = [[[_WORDS[(i * 7 + p * 3) % len(_WORDS) if i % 3 else p]] for i in range(60)]
              for p in range(3)]


class KeyedCountUpdater(Committer, BatchBolt):
    outputs = ["id", "key", "count", "prev_count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:
        self.attempt = attempt
        self.counts: Counter[str] = Counter()
        self.db = TransactionalMap(open_store(conf, f"{context.topology_name}-words"))

    def process(self, tup: Any) -> None:
        self.counts[tup.values.word] += 1

    def finish_batch(self) -> None:
        # {"count", "prev"} written together, only if this txid did not write them yet.
        def add(n: int) -> Any:
            return lambda old: {"count": (old or {"count": 0})["count"] + n,
                                "prev": (old or {"count": 0})["count"]}

        stored = self.db.update(self.attempt, {w: add(n) for w, n in self.counts.items()})
        for word, value in stored.items():
            self.emit([self.attempt, word, value["count"], value["prev"]])


class Bucketize(Bolt):
    outputs = ["id", "bucket", "delta"]

    def process(self, tup: Any) -> None:
        attempt, _word, count, prev = tup.values
        new, old = count // BUCKET_SIZE, prev // BUCKET_SIZE
        if prev == 0:
            self.emit([attempt, new, 1])
        elif new != old:
            self.emit([attempt, new, 1])
            self.emit([attempt, old, -1])


class BucketCountUpdater(Committer, BatchBolt):
    outputs = ["id", "bucket", "count"]

    def initialize(self, conf: dict[str, Any], context: Any, attempt: TransactionAttempt) -> None:
        self.attempt = attempt
        self.deltas: Counter[str] = Counter()
        self.db = TransactionalMap(open_store(conf, f"{context.topology_name}-buckets"))

    def process(self, tup: Any) -> None:
        self.deltas[str(tup.values.bucket)] += tup.values.delta

    def finish_batch(self) -> None:
        stored = self.db.increment(self.attempt, dict(self.deltas))
        for bucket, count in stored.items():
            self.emit([self.attempt, int(bucket), count])
        if stored:
            everything = dict(zip(range(100), self.db.get_many([str(b) for b in range(100)]), strict=True))
            shown = ", ".join(f"{b * BUCKET_SIZE}-{b * BUCKET_SIZE + BUCKET_SIZE - 1}: {n}"
                              for b, n in everything.items() if n)
            print(f"txid {self.attempt.txid} committed: words per count bucket {{{shown}}}", flush=True)


class TransactionalWords(TransactionalTopology):
    transactional_id = "transactional-words"
    config = {"topology.max.spout.pending": 3}
    spout = MemoryTransactionalSpout.spec(data=PARTITIONS, fields=["word"], take_per_batch=5, par=2)
    count = KeyedCountUpdater.spec(inputs={spout: Grouping.fields("word")}, par=3)
    bucketize = Bucketize.spec(inputs=[count])
    buckets = BucketCountUpdater.spec(inputs={bucketize: Grouping.fields("bucket")})
