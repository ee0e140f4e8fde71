"""durable_wordcount.py's word count at an input rate the test sets while it runs, with
a split that waits on every sentence (a remote call's time) at one executor of eight
tasks: at a high rate the split is the bottleneck self-regulation must scale up, at a
low one it is over-provisioned (issue 50).

``rate`` in ``squall.test.dir`` holds the sentences a second (0: paused, and the spout
then writes ``paused``), read every quarter second; ``emitted.log`` gets each id the
first time it is emitted, so a test can check that every sentence the spout took was
acked (replays included), killed workers or not."""

from __future__ import annotations

import os
import time
from typing import Any

from durable_wordcount import CountWords, DurableSentences, SplitWords

from squall import Grouping, Topology


class SteppedSentences(DurableSentences):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        super().initialize(conf, context)
        self.rate_path = os.path.join(self.dir, "rate")
        self.emitted = open(os.path.join(self.dir, "emitted.log"), "a", buffering=1)  # noqa: SIM115
        self.first = set(self.todo)  # not acked before this start: emitted at most once more
        self.rate, self.read_at, self.allowed, self.last = 0.0, 0.0, 0.0, time.monotonic()
        self.context_task = context.task_id

    def next_tuple(self) -> None:
        now = time.monotonic()
        if now >= self.read_at:
            self.read_at = now + 0.25
            try:
                with open(self.rate_path) as f:
                    self.rate = float(f.read().strip() or 0)
            except (OSError, ValueError):
                self.rate = 0.0
            if not self.rate:  # paused: nothing more leaves, replays included, and the test is told
                self.allowed = 0.0
                with open(os.path.join(self.dir, "paused"), "w") as f:
                    f.write(str(self.context_task))
                return
        elif not self.rate:
            return
        self.allowed = min(self.allowed + (now - self.last) * self.rate, max(self.rate / 10, 1.0))
        self.last = now
        if not self.todo or self.allowed < 1:
            return
        self.allowed -= 1
        key = self.todo.pop(0)
        if key in self.first:
            self.first.discard(key)
            self.emitted.write(f"{key}\n")
        self.emit([int(key), self.sentences[key]], tup_id=int(key))


class SlowSplit(SplitWords):
    def process(self, tup: Any) -> None:
        time.sleep(0.01)
        super().process(tup)


class SteppedWordCount(Topology):
    config = {"topology.max.spout.pending": 200, "topology.message.timeout.secs": 10}
    sentences = SteppedSentences.spec()
    split = SlowSplit.spec(inputs=[sentences], par=1, tasks=8)
    count = CountWords.spec(inputs={split: Grouping.fields("word")}, par=2)
