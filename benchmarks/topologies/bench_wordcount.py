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


class Pace:
    """A rate a benchmark changes while its spout runs: ``None`` is as fast as it can.
    Each change starts the schedule anew, so the new rate owes nothing for the time before."""

    def __init__(self) -> None:
        self.rate: float | None = None
        self.epoch = 0

    def set(self, rate: float | None) -> None:
        self.rate = rate
        self.epoch += 1


def pooled_sentences(size: int = 20_000, acking: bool = True, rate: float | None = None,
                     pace: Pace | None = None) -> type[Spout]:
    """A spout class emitting :func:`sentence_pool` round and round, so that a benchmark
    measures the engine, not ``random``; at most ``rate`` sentences a second if given, or
    at ``pace``'s rate of the moment (one spout task: a pace is a process's object)."""
    pool = sentence_pool(size)
    if pace is None and rate is not None:
        pace = Pace()
        pace.set(rate)

    class PooledSentences(Spout):
        outputs = ["sentence"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0
            self.start = time.monotonic()
            self.base = 0
            self.epoch = 0

        def next_tuple(self) -> None:
            i = self.i
            if pace is not None:
                if pace.epoch != self.epoch:
                    self.epoch, self.start, self.base = pace.epoch, time.monotonic(), i
                paced = pace.rate
                if paced is not None and time.monotonic() < self.start + (i - self.base) / paced:
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
    # scheduler gives each worker a whole slice of the pipeline (squall.nimbus.placement.spread_ids).
    sentences = Sentences.spec(par=2)
    split = Split.spec(inputs=[sentences], par=2)
    count = Count.spec(inputs={split: Grouping.fields("word")}, par=2)
