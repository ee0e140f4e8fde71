"""The word count with the Streams API: sentences split into words, each word's running
count, printed each time it reaches a multiple of 100.

    squall local examples/streams/wordcount.py --duration 10
    squall submit examples/streams/wordcount.py         # on a cluster: the workers' logs

One bolt runs the four operations after the spout by plain calls (the UI's Operations
column shows them).  At parallelism 2 the count would start a second bolt, fields-grouped
on the word, as Storm's does.
"""

from __future__ import annotations

import random
from typing import Any

from squall import Spout
from squall.streams import StreamBuilder, ValueMapper

SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


class RandomSentences(Spout):
    """A reliable spout: each sentence with a message id, replayed if its tree fails."""

    outputs = ["sentence"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)
        self.pending: dict[int, str] = {}
        self.replay: list[int] = []
        self.next_id = 0

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop()
        else:
            msg_id, self.next_id = self.next_id, self.next_id + 1
            self.pending[msg_id] = self.rng.choice(SENTENCES)
        self.emit([self.pending[msg_id]], tup_id=msg_id)

    def ack(self, tup_id: Any) -> None:
        self.pending.pop(tup_id, None)

    def fail(self, tup_id: Any) -> None:
        self.replay.append(tup_id)


builder = StreamBuilder()
(builder.new_stream(RandomSentences, ValueMapper(0))
    .flat_map(str.split)
    .map_to_pair(lambda word: (word, 1))
    .count_by_key()
    .filter(lambda pair: pair[1] % 100 == 0)
    .print())
