"""benchmarks/autoscale.py's word count: sentences at the rate a file sets while it runs,
a split that waits 4 ms on each (a remote call's time), a count by word.  The spout
writes each acked tree's ack time and complete latency, so the benchmark computes
throughput and p99 per phase from the trees themselves."""

from __future__ import annotations

import os
import random
import time
from typing import Any

from squall import Bolt, Grouping, Spout, Topology

WORDS = [f"w{i}" for i in range(500)]


class RatedSentences(Spout):
    outputs = ["sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        folder = conf["bench.dir"]
        self.rate_path = os.path.join(folder, "rate")
        self.out = open(os.path.join(folder, f"acks-{context.task_id}-{os.getpid()}.log"), "a")  # noqa: SIM115
        self.rng = random.Random(context.task_id)
        self.sent: dict[int, float] = {}
        self.n = 0
        self.rate, self.read_at, self.allowed, self.last = 0.0, 0.0, 0.0, time.monotonic()

    def next_tuple(self) -> None:
        now = time.monotonic()
        if now >= self.read_at:
            self.read_at = now + 0.25
            try:
                with open(self.rate_path) as f:
                    self.rate = float(f.read().strip() or 0)
            except (OSError, ValueError):
                self.rate = 0.0
        self.allowed = min(self.allowed + (now - self.last) * self.rate, max(self.rate / 20, 1.0))
        self.last = now
        if self.allowed < 1:
            return
        self.allowed -= 1
        self.n += 1
        self.sent[self.n] = now
        self.emit([" ".join(self.rng.choices(WORDS, k=6))], tup_id=self.n)

    def ack(self, tup_id: Any) -> None:
        now = time.monotonic()
        began = self.sent.pop(tup_id, None)
        if began is not None:
            self.out.write(f"{time.time():.3f} {(now - began) * 1000:.2f}\n")

    def fail(self, tup_id: Any) -> None:
        self.sent.pop(tup_id, None)
        self.out.write(f"{time.time():.3f} fail\n")

    def close(self) -> None:
        self.out.close()


class WaitingSplit(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        time.sleep(0.004)
        for word in tup.values.sentence.split():
            self.emit([word])


class Count(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}

    def process(self, tup: Any) -> None:
        word = tup.values.word
        self.counts[word] = self.counts.get(word, 0) + 1


class SteppedWordCount(Topology):
    config = {"topology.max.spout.pending": 500, "topology.message.timeout.secs": 30}
    sentences = RatedSentences.spec()
    split = WaitingSplit.spec(inputs=[sentences], par=1, tasks=8)
    count = Count.spec(inputs={split: Grouping.fields("word")}, par=1, tasks=4)
