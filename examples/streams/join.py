"""Storm's JoinExample with the Streams API: two streams of numbers, one of squares and
one of cubes, joined on the number in 5-second tumbling windows.

    squall local examples/streams/join.py --duration 12

prints ``(1, (1, 1))``, ``(2, (4, 8))``, ... once each 5-second window ends.  The window
applies to both streams together (``squares.window(...)`` is the stream ``join`` is
called on), in the bolt that joins them, reading both spouts' mapped values.
"""

from __future__ import annotations

from typing import Any

from squall import Spout
from squall.streams import Duration, PairValueMapper, StreamBuilder, TumblingWindows


class NumberSpout(Spout):
    """1, 2, 3, ... about ten a second, each with its ``power``; reliable (replays)."""

    outputs = ["n", "value"]
    power = 1

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.due = 0.0
        self.n = 0

    def next_tuple(self) -> None:
        if self.clock.now() < self.due:
            return  # nothing now: the executor waits a moment before asking again
        self.due = self.clock.now() + 0.1
        self.n += 1
        self.emit([self.n, self.n ** self.power], tup_id=self.n)

    def fail(self, tup_id: Any) -> None:
        self.emit([tup_id, tup_id ** self.power], tup_id=tup_id)


class Squares(NumberSpout):
    power = 2


class Cubes(NumberSpout):
    power = 3


builder = StreamBuilder()
squares = builder.new_stream(Squares, PairValueMapper(0, 1))   # (n, n*n)
cubes = builder.new_stream(Cubes, PairValueMapper(0, 1))       # (n, n**3)
squares.window(TumblingWindows.of(Duration.seconds(5))).join(cubes).print()  # (2, (4, 8))
