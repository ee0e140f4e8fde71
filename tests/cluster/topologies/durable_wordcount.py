"""A word count over a durable source, for cluster tests.

The source is a file of sentences plus an append-only log of acked ids (a
queue with committed offsets, as Kafka or Kestrel would be): a spout that
restarts re-emits everything not yet acked, so killing any worker loses
nothing.  The count bolt appends what it counted, with the (sentence,
index) key that lets the test drop replays, one file per task.  Its parts are
the partition tests' at-least-once count's too (queue_wordcount.py).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from squall import Bolt, Grouping, Spout, Topology


class DurableSentences(Spout):
    outputs = ["id", "sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.dir = conf["squall.test.dir"]
        with open(os.path.join(self.dir, "sentences.json")) as f:
            self.sentences = dict(json.load(f))
        acked_path = os.path.join(self.dir, "acked.log")
        done = set()
        if os.path.exists(acked_path):
            with open(acked_path) as f:
                done = {int(line) for line in f if line.strip()}
        self.todo = [i for i in sorted(self.sentences, key=int) if int(i) not in done]
        self.acked = open(acked_path, "a", buffering=1)  # noqa: SIM115 - open for the spout's life
        self.rate = conf.get("squall.test.rate")
        self.started = time.monotonic()
        self.sent = 0

    def next_tuple(self) -> None:
        if not self.todo:
            return
        if self.rate and self.sent >= (time.monotonic() - self.started) * self.rate:
            return
        key = self.todo.pop(0)
        self.sent += 1
        self.emit([int(key), self.sentences[key]], tup_id=int(key))

    def ack(self, tup_id: Any) -> None:
        self.acked.write(f"{tup_id}\n")

    def fail(self, tup_id: Any) -> None:
        self.todo.append(str(tup_id))


class SplitWords(Bolt):
    outputs = ["id", "index", "word"]

    def process(self, tup: Any) -> None:
        for i, word in enumerate(tup.values.sentence.split()):
            self.emit([tup.values.id, i, word])


class CountWords(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        path = os.path.join(conf["squall.test.dir"], f"counted-{context.task_id}-{os.getpid()}.log")
        self.out = open(path, "a", buffering=1)  # noqa: SIM115
        # squall.test.drop.every: N skips every Nth word and acks it anyway: the broken
        # variant the partition tests' checker must catch.
        self.drop_every = conf.get("squall.test.drop.every", 0)
        self.seen = 0

    def process(self, tup: Any) -> None:
        self.seen += 1
        if self.drop_every and self.seen % self.drop_every == 0:
            return  # the broken variant: dropped, and acked as if counted
        self.out.write(f"{tup.values.id} {tup.values.index} {tup.values.word}\n")


class DurableWordCount(Topology):
    config = {"topology.max.spout.pending": 200, "topology.message.timeout.secs": 5}
    sentences = DurableSentences.spec()
    split = SplitWords.spec(inputs=[sentences], par=2)
    count = CountWords.spec(inputs={split: Grouping.fields("word")}, par=2)
