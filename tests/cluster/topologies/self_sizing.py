"""Topologies for self-regulation (issue 50), each with one thing wrong with its size:

* SlowBoltTopology: a bolt that waits on every tuple (a remote call's time, as
  time.sleep: the GIL is free meanwhile) at one executor of four tasks, the bottleneck
  that must be found and scaled;
* QueueingTopology: 400 trees allowed in flight into a bolt already at its task count:
  they queue, and only fewer in flight bring the latency down (max spout pending)."""

from __future__ import annotations

import time
from typing import Any

from squall import Bolt, Spout, Topology


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.emit([self.n], tup_id=self.n)


class Waits(Bolt):
    """Waits ``squall.test.wait.ms`` on every tuple."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.wait = conf.get("squall.test.wait.ms", 10) / 1000

    def process(self, tup: Any) -> None:
        time.sleep(self.wait)


class SlowBoltTopology(Topology):
    config = {"topology.max.spout.pending": 64}
    numbers = Numbers.spec()
    waits = Waits.spec(inputs=[numbers], par=1, tasks=4)


class QueueingTopology(Topology):
    config = {"topology.max.spout.pending": 400, "squall.test.wait.ms": 2}
    numbers = Numbers.spec()
    quick = Waits.spec(inputs=[numbers], par=2, tasks=2)
