"""The benchmark word count, as a topology file the cluster can run:
pre-generated 8-word sentences, reliable spout, split and count."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

from sentences import VOCAB, sentence_pool

from squall import Bolt, Grouping, Spout, Topology


class Sentences(Spout):
    outputs = ["sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        rng = random.Random(context.task_id)
        self.pool = [" ".join(rng.choices(VOCAB, k=8)) for _ in range(20_000)]
        self.i = 0

    def next_tuple(self) -> None:
        i = self.i
        self.i = i + 1
        self.emit([self.pool[i % 20_000]], tup_id=i)


def pooled_sentences(size: int = 20_000, acking: bool = True, rate: float | None = None) -> type[Spout]:
    """A spout class emitting :func:`sentence_pool` round and round, so that a benchmark
    measures the engine, not ``random``; at most ``rate`` sentences a second if given."""
    pool = sentence_pool(size)

    class PooledSentences(Spout):
        outputs = ["sentence"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0
            self.start = time.monotonic()

        def next_tuple(self) -> None:
            i = self.i
            if rate is not None and time.monotonic() < self.start + i / rate:
                return
            self.i = i + 1
            self.emit([pool[i % size]], tup_id=i if acking else None)

    return PooledSentences


class Split(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for word in tup.values[0].split():
            self.emit([word])


class Count(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values[0]] += 1


class BenchWordCount(Topology):
    config = {"topology.max.spout.pending": 2000}
    # One spout task per worker of the 2-worker runs: the spout is not the bottleneck, and the
    # scheduler gives each worker a whole slice of the pipeline (squall.worker.plan.spread_ids).
    sentences = Sentences.spec(par=2)
    split = Split.spec(inputs=[sentences], par=2)
    count = Count.spec(inputs={split: Grouping.fields("word")}, par=2)
