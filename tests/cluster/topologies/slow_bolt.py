"""A reliable spout feeding a bolt that waits on every tuple (a remote call's time, as
time.sleep: the GIL is free meanwhile) at one executor of four tasks: the bolt is the
bottleneck that self-regulation must find and scale (issue 50)."""

from __future__ import annotations

import time
from typing import Any

from squall import Bolt, Spout, Topology

WAIT_SECS = 0.01  # a hundred tuples a second an executor


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.emit([self.n], tup_id=self.n)


class Waits(Bolt):
    def process(self, tup: Any) -> None:
        time.sleep(WAIT_SECS)


class SlowBoltTopology(Topology):
    config = {"topology.max.spout.pending": 64}
    numbers = Numbers.spec()
    waits = Waits.spec(inputs=[numbers], par=1, tasks=4)
