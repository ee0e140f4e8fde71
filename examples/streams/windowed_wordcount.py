"""Storm's WindowedWordCount with the Streams API: words counted in 2-second tumbling
windows, one (word, count) per word per window, printed for the words seen at least 5
times in it.

    squall local examples/streams/windowed_wordcount.py --duration 10

The window runs in its own bolt (a windowed bolt over squall.windowing): each sentence
is acked when it leaves its window, after the counts made from it were processed.
"""

from __future__ import annotations

import random
from typing import Any

from squall import Spout
from squall.streams import Duration, StreamBuilder, TumblingWindows, ValueMapper

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


class RandomWords(Spout):
    outputs = ["word"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.due = 0.0
        self.rng = random.Random(context.task_id)
        self.next_id = 0
        self.pending: dict[int, str] = {}

    def next_tuple(self) -> None:
        if self.clock.now() < self.due:  # about 100 words a second: windows you can read
            return  # nothing now: the executor waits a moment before asking again
        self.due = self.clock.now() + 0.01
        msg_id, self.next_id = self.next_id, self.next_id + 1
        self.pending[msg_id] = self.rng.choice(WORDS)
        self.emit([self.pending[msg_id]], tup_id=msg_id)

    def ack(self, tup_id: Any) -> None:
        self.pending.pop(tup_id, None)

    def fail(self, tup_id: Any) -> None:
        self.emit([self.pending[tup_id]], tup_id=tup_id)


builder = StreamBuilder()
(builder.new_stream(RandomWords, ValueMapper(0))
    .window(TumblingWindows.of(Duration.seconds(2)))
    .map_to_pair(lambda word: (word, 1))
    .count_by_key()
    .filter(lambda pair: pair[1] >= 5)
    .print())
