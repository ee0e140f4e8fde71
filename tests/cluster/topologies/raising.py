"""A word count whose split bolt raises on every fifth sentence: its errors must reach
the user with their traces (issue 30)."""

from __future__ import annotations

import itertools
from typing import Any

from squall import Bolt, Spout, Topology


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counter = itertools.count()

    def next_tuple(self) -> None:
        n = next(self.counter)
        self.emit([n], tup_id=n)


class Picky(Bolt):
    outputs = ["n"]

    def process(self, tup: Any) -> None:
        n = tup.values[0]
        if n % 5 == 0:
            raise ValueError(f"{n} is a multiple of five")  # RAISES HERE
        self.emit([n])


class Raising(Topology):
    config = {"topology.max.spout.pending": 50}
    numbers = Numbers.spec()
    picky = Picky.spec(inputs=[numbers])
