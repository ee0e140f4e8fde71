"""Storm's BranchExample with the Streams API: random integers branched into evens,
odds and negatives, each printed with its own tag.

    squall local examples/streams/branch.py --duration 5

A value goes to the first branch whose predicate holds, so a negative even number is an
even one here; all three branches run in the spout's first bolt.
"""

from __future__ import annotations

import random
from typing import Any

from squall import Spout
from squall.streams import StreamBuilder, ValueMapper


class RandomIntegers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.due = 0.0
        self.rng = random.Random(context.task_id)

    def next_tuple(self) -> None:
        if self.clock.now() < self.due:
            return  # nothing now: the executor waits a moment before asking again
        self.due = self.clock.now() + 0.2
        self.emit([self.rng.randint(-100, 100)])


builder = StreamBuilder()
evens, odds, negatives = builder.new_stream(RandomIntegers, ValueMapper(0)).branch(
    lambda x: x % 2 == 0, lambda x: x % 2 == 1, lambda x: x < 0)
evens.map(lambda x: f"even {x}").print()
odds.map(lambda x: f"odd {x}").print()
negatives.map(lambda x: f"negative {x}").print()  # none: each is even or odd first
