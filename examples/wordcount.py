"""Word count, Storm's hello world, with guaranteed processing.

    squall local examples/wordcount.py --duration 10

Sentences are emitted with message ids; a failed or timed-out sentence is
replayed, so every word is counted at least once.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from squall import Bolt, Grouping, Spout, Topology

VOCABULARY = [f"word{i}" for i in range(1000)]


class RandomSentences(Spout):
    outputs = ["sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)
        self.next_id = 0
        self.pending: dict[int, str] = {}
        self.replay: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop()
        else:
            msg_id = self.next_id
            self.next_id += 1
            self.pending[msg_id] = " ".join(self.rng.choices(VOCABULARY, k=8))
        self.emit([self.pending[msg_id]], tup_id=msg_id)

    def ack(self, tup_id: Any) -> None:
        del self.pending[tup_id]

    def fail(self, tup_id: Any) -> None:
        self.replay.append(tup_id)


class SplitSentence(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split():
            self.emit([word])


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
        # Hidden by default; `squall set_log_level -l count=DEBUG WordCount` shows it.
        self.logger.debug("words counted", total=sum(self.counts.values()))


class WordCount(Topology):
    config = {"topology.max.spout.pending": 5000, "topology.tick.tuple.freq.secs": 5}
    sentences = RandomSentences.spec()
    split = SplitSentence.spec(inputs=[sentences], par=2)
    count = CountWords.spec(inputs={split: Grouping.fields("word")}, par=2)
