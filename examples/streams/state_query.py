"""Storm's StateQueryExample with the Streams API: a running count per word kept in
checkpointed state, and a stream of queries answered from it.

    squall local examples/streams/state_query.py --duration 10

``update_state_by_key`` keeps each word's count in a ``squall.state`` KeyValueState
(``topology.state.provider``: SQLite by default), saved under the topology's name: kill it
and submit it again and the counts go on from the last checkpoint.  Each query word is
answered with ``(word, count)`` from the state as the task holds it now, and nothing
for a word never counted.
"""

from __future__ import annotations

import random
from operator import add
from typing import Any

from squall import Spout
from squall.streams import StreamBuilder, ValueMapper

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


class Words(Spout):
    outputs = ["word"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.due = 0.0
        self.rng = random.Random(context.task_id)
        self.next_id = 0
        self.pending: dict[int, str] = {}

    def next_tuple(self) -> None:
        if self.clock.now() < self.due:
            return  # nothing now: the executor waits a moment before asking again
        self.due = self.clock.now() + 0.01
        msg_id, self.next_id = self.next_id, self.next_id + 1
        self.pending[msg_id] = self.rng.choice(WORDS)
        self.emit([self.pending[msg_id]], tup_id=msg_id)

    def ack(self, tup_id: Any) -> None:
        self.pending.pop(tup_id, None)

    def fail(self, tup_id: Any) -> None:
        self.emit([self.pending[tup_id]], tup_id=tup_id)


class Queries(Spout):
    """A word to look up every second (and one never counted)."""

    outputs = ["word"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.due = 0.0
        self.rng = random.Random(context.task_id)

    def next_tuple(self) -> None:
        if self.clock.now() < self.due:
            return  # nothing now: the executor waits a moment before asking again
        self.due = self.clock.now() + 1
        self.emit([self.rng.choice([*WORDS, "nobody"])])


builder = StreamBuilder()
counts = (builder.new_stream(Words, ValueMapper(0), parallelism=2)
          .map_to_pair(lambda word: (word, 1))
          .update_state_by_key(0, add))                        # a StreamState
builder.new_stream(Queries, ValueMapper(0)).state_query(counts).print()   # ('nathan', 7)
