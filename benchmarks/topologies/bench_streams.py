"""What benchmarks/streams.py's topologies share: the word count written with the
Streams API, a spout of pre-generated (key, value) pairs and the join's tally.

The tally is a module function, so a Streams operation carries it by reference
(cloudpickle): in local mode every task calls this module's function and the
benchmark reads :data:`JOINED` from the same process.
"""

from __future__ import annotations

import random
from typing import Any

from squall import Spout

JOINED = [0]  # join results that reached the tally: one join task adds to it


def tally(_value: Any) -> None:
    JOINED[0] += 1


def pooled_pairs(seed: int, keys: int, size: int = 20_000, acking: bool = True) -> type[Spout]:
    """A spout class emitting ``size`` pre-generated ``(key, value)`` pairs round and
    round, keys drawn from ``range(keys)``."""
    rng = random.Random(seed)
    pool = [(rng.randrange(keys), rng.randrange(1_000_000)) for _ in range(size)]

    class PooledPairs(Spout):
        outputs = ["key", "value"]

        def initialize(self, conf: dict[str, Any], context: Any) -> None:
            self.i = 0

        def next_tuple(self) -> None:
            i = self.i
            self.i = i + 1
            key, value = pool[i % size]
            self.emit([key, value], tup_id=i if acking else None)

    return PooledPairs
