"""Storm's TypedTupleExample with the Streams API: a spout's fields as a typed tuple,
re-keyed and counted in tumbling windows of 10 values.

    squall local examples/streams/typed_tuples.py --duration 5

``TupleValueMappers.of(0, 1, 2)`` makes each value a Python tuple of the three fields
(Storm's ``Tuple3``); ``map_to_pair`` keys it by its second field.
"""

from __future__ import annotations

import random
from typing import Any

from squall import Spout
from squall.streams import Count, StreamBuilder, TumblingWindows, TupleValueMappers


class RandomTriples(Spout):
    outputs = ["a", "b", "c"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.due = 0.0
        self.rng = random.Random(context.task_id)

    def next_tuple(self) -> None:
        if self.clock.now() < self.due:
            return  # nothing now: the executor waits a moment before asking again
        self.due = self.clock.now() + 0.05
        self.emit([self.rng.randint(0, 9), self.rng.choice("xyz"), self.rng.random()])


builder = StreamBuilder()
(builder.new_stream(RandomTriples, TupleValueMappers.of(0, 1, 2))   # (int, str, float)
    .map_to_pair(lambda t: (t[1], t[0]))                             # keyed by the str
    .window(TumblingWindows.of(Count(10)))
    .count_by_key()
    .print())
