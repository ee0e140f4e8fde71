"""The Python parts of the Flux word count (wordcount.yaml beside this file):
examples/wordcount.py's spout and counting bolt, the spout with an optional
limit (``sentences.limit`` in the topology config: stop after that many
sentences per task; unlimited by default)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from squall import Bolt, Spout

VOCABULARY = [f"word{i}" for i in range(1000)]


class RandomSentences(Spout):
    outputs = ["sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)
        self.limit = conf.get("sentences.limit")
        self.next_id = 0
        self.pending: dict[int, str] = {}
        self.replay: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop()
        elif self.limit is None or self.next_id < self.limit:
            msg_id = self.next_id
            self.next_id += 1
            self.pending[msg_id] = " ".join(self.rng.choices(VOCABULARY, k=8))
        else:
            return
        self.emit([self.pending[msg_id]], tup_id=msg_id)

    def ack(self, tup_id: Any) -> None:
        del self.pending[tup_id]

    def fail(self, tup_id: Any) -> None:
        self.replay.append(tup_id)


class CountWords(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        word = tup.values.word
        self.counts[word] += 1
        self.emit([word, self.counts[word]])

    def process_tick(self, tup: Any) -> None:
        top = ", ".join(f"{w}={n}" for w, n in self.counts.most_common(3))
        self.logger.info("top words", top=top, distinct=len(self.counts))
