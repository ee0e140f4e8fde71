"""The partition tests' word counts, fed by a client through a queue file.

The client (tests/partitions/workload.py) appends ``<id> <sentence>`` lines to
``queue.log`` in ``squall.test.dir`` -- a durable queue every node reads, as a
broker would be -- and reads back what the topologies say they did:

* ``AtLeastOnceWordCount``: a reliable spout tails the queue and appends each
  message id to ``acked.log`` when its tuple tree completes, re-emitting it on
  fail (and, after a restart, every message not yet acked).  The count bolt
  appends ``id index word`` to a file of its own for each word it counts.
  ``squall.test.drop.every: N`` makes it skip every Nth word and ack it anyway:
  the broken variant the checker must catch.  The split and count bolts are
  durable_wordcount.py's, imported as a sibling module (shipped with this file).
* ``TransactionalWordCount``: a partitioned transactional spout over the same
  queue (partition = id mod 4, a batch a range of a partition's messages),
  counted exactly once into ``counts.sqlite``.  Each message adds one pseudo-word
  ``#<id>`` to the count as well: the committed ``#<id>`` keys are which
  messages committed, read by the client from the same table its counts live in.
  The counting bolts are transactional_wordcount.py's (which also log each commit).
"""

from __future__ import annotations

import os
from typing import Any

from durable_wordcount import CountWords, SplitWords
from transactional_wordcount import CommitCounts, PartialCount

from squall import Bolt, Grouping, Spout, Topology
from squall.transactional import PartitionedTransactionalSpout, TransactionalTopology

PARTITIONS = 4


class QueueFile:
    """The complete lines of an append-only ``id sentence`` file, read incrementally."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.rest = b""

    def new(self) -> list[tuple[int, str]]:
        # Asked on every idle next_tuple (about a thousand times a second): a stat says
        # whether the file grew, at a fraction of an open and a read.
        try:
            if os.stat(self.path).st_size <= self.offset:
                return []
        except FileNotFoundError:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = self.rest + f.read()
            self.offset = f.tell()
        *lines, self.rest = data.split(b"\n")
        out = []
        for line in lines:
            key, _, sentence = line.decode().partition(" ")
            out.append((int(key), sentence))
        return out


class QueueSentences(Spout):
    outputs = ["id", "sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        folder = conf["squall.test.dir"]
        self.queue = QueueFile(os.path.join(folder, "queue.log"))
        acked_path = os.path.join(folder, "acked.log")
        self.done: set[int] = set()
        if os.path.exists(acked_path):
            with open(acked_path) as f:
                self.done = {int(line) for line in f if line.strip()}
        self.sentences: dict[int, str] = {}
        self.todo: list[int] = []
        self.acked = open(acked_path, "a", buffering=1)  # noqa: SIM115 - open for the spout's life

    def next_tuple(self) -> None:
        if not self.todo:
            for key, sentence in self.queue.new():
                self.sentences[key] = sentence
                if key not in self.done:
                    self.todo.append(key)
        if self.todo:
            key = self.todo.pop(0)
            self.emit([key, self.sentences[key]], tup_id=key)

    def ack(self, tup_id: Any) -> None:
        self.done.add(tup_id)
        self.acked.write(f"{tup_id}\n")

    def fail(self, tup_id: Any) -> None:
        self.todo.append(tup_id)


class AtLeastOnceWordCount(Topology):
    config = {"topology.max.spout.pending": 100, "topology.message.timeout.secs": 8}
    sentences = QueueSentences.spec()
    split = SplitWords.spec(inputs=[sentences], par=2)
    count = CountWords.spec(inputs={split: Grouping.fields("word")}, par=2)


class QueuePartitions(PartitionedTransactionalSpout):
    outputs = ["tx", "id", "sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.queue = QueueFile(os.path.join(conf["squall.test.dir"], "queue.log"))
        self.partitions: list[list[tuple[int, str]]] = [[] for _ in range(PARTITIONS)]
        self.take = conf.get("squall.test.take", 10)

    def num_partitions(self) -> int:
        return PARTITIONS

    def _read(self) -> None:
        for key, sentence in self.queue.new():
            self.partitions[key % PARTITIONS].append((key, sentence))

    def emit_new_batch(self, attempt: Any, emit: Any, partition: int, last_metadata: Any) -> Any:
        self._read()
        start = 0 if last_metadata is None else last_metadata["end"]
        end = min(start + self.take, len(self.partitions[partition]))
        metadata = {"start": start, "end": end}
        self.emit_batch(attempt, emit, partition, metadata)
        return metadata

    def emit_batch(self, attempt: Any, emit: Any, partition: int, metadata: Any) -> None:
        while len(self.partitions[partition]) < metadata["end"]:  # a replay in a fresh process
            before = sum(map(len, self.partitions))
            self._read()
            if sum(map(len, self.partitions)) == before:
                have = len(self.partitions[partition])
                msg = f"partition {partition} has {have} messages, the batch needs {metadata}"
                raise RuntimeError(msg)
        for key, sentence in self.partitions[partition][metadata["start"]:metadata["end"]]:
            emit([attempt, key, sentence])


class SplitWithMarker(Bolt):
    outputs = ["tx", "word"]

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split():
            self.emit([tup.values.tx, word])
        self.emit([tup.values.tx, f"#{tup.values.id}"])


class TransactionalWordCount(TransactionalTopology):
    config = {"topology.max.spout.pending": 3, "topology.message.timeout.secs": 8}
    sentences = QueuePartitions.spec(par=2)
    split = SplitWithMarker.spec(inputs=[sentences], par=2)
    partial = PartialCount.spec(inputs={split: Grouping.fields("word")}, par=2)
    commit = CommitCounts.spec(inputs={partial: Grouping.fields("word")}, par=2)

