"""Word count whose counts survive restarts: a stateful bolt, checkpointed.

    squall local examples/state/wordcount.py --duration 10
    squall local examples/state/wordcount.py --duration 10     # again: the counts go on

The counts live in a KeyValueState that Squall checkpoints every second
into SQLite (``~/.squall/state/StatefulWordCount.sqlite`` unless
``squall.state.dir`` or ``topology.state.provider.config`` say otherwise).
The spout is a CheckpointedSpout: its position (here, how many sentences of
a fixed text it has read) is committed with the counts, so after a crash the
text resumes exactly where the committed counts stop: each sentence is
counted exactly once.
"""

from __future__ import annotations

import random
from typing import Any

from squall import Bolt, Grouping, Topology
from squall.state import CheckpointedSpout, StatefulBolt

VOCABULARY = [f"word{i}" for i in range(1000)]
TEXT_LENGTH = 1_000_000


class Text(CheckpointedSpout):
    """Sentences of a fixed (seeded) text; the position is the sentence number."""

    outputs = ["sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.position = 0

    def snapshot(self) -> int:
        return self.position

    def restore(self, position: Any) -> None:
        self.position = position or 0
        self.logger.info("text resumes", sentence=self.position)

    def next_tuple(self) -> None:
        if self.position < TEXT_LENGTH:
            rng = random.Random(self.position)  # sentence n is the same in every run
            self.emit([" ".join(rng.choices(VOCABULARY, k=8))])
            self.position += 1


class SplitSentence(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for word in tup.values.sentence.split():
            self.emit([word])


class CountWords(StatefulBolt):
    outputs = ["word", "count"]

    def init_state(self, state: Any) -> None:
        self.counts = state  # as of the last committed checkpoint
        self.logger.info("counts restored", distinct=len(state), total=sum(state.get(k) for k in state))

    def process(self, tup: Any) -> None:
        word = tup.values.word
        n = self.counts.get(word, 0) + 1
        self.counts.put(word, n)
        self.emit([word, n])

    def pre_commit(self, txid: int) -> None:
        self.logger.info("checkpoint", txid=txid, total=sum(self.counts.get(k) for k in self.counts))


class StatefulWordCount(Topology):
    config = {"topology.state.provider": "sqlite", "topology.state.checkpoint.interval.ms": 1000}
    text = Text.spec()
    split = SplitSentence.spec(inputs=[text], par=2)
    count = CountWords.spec(inputs={split: Grouping.fields("word")}, par=2)
