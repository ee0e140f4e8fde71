"""Topologies sized wrong on purpose, for self-regulation to fix (docs/autoscale.md).

Each has a reliable spout of numbers and one bolt:

* ``WaitingTopology``: the bolt waits 10 ms on every tuple (a remote call, a database),
  at one executor of eight tasks: the bottleneck.  More executors carry more, as
  waiting threads free the GIL.
* ``CpuTopology``: the bolt computes for 2 ms a tuple at one executor of four tasks, in
  one worker: more threads in that worker would fight over its GIL, so it needs
  another worker as well.
* ``IdleTopology``: a spout held to 50 tuples a second and a bolt of eight executors
  with little to do: over-provisioned.
* ``QueueingTopology``: 2,000 trees allowed in flight into a bolt already at its task
  count: they wait in its queue, and only fewer in flight bring the latency down.

Run one on a cluster with self-regulation on, then read what it did and why::

    squall submit examples/autoscale/sizing.py --topology WaitingTopology --name waiting \\
        --conf topology.autoscale=true --conf topology.autoscale.period.secs=5
    squall autoscale log waiting
"""

from __future__ import annotations

import time
from typing import Any

from squall import Bolt, Spout, Topology


class Numbers(Spout):
    """Numbers as fast as max spout pending lets them go, or ``example.rate`` a second."""

    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = 0
        rate = conf.get("example.rate")
        self.every = 1 / rate if rate else 0.0
        self.next_at = 0.0

    def next_tuple(self) -> None:
        if self.every:
            now = time.monotonic()
            if now < self.next_at:
                return
            self.next_at = max(self.next_at + self.every, now - 1)
        self.n += 1
        self.emit([self.n], tup_id=self.n)


class Waits(Bolt):
    """Waits ``example.wait.ms`` on every tuple, as a call to a slow service would."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.wait = conf.get("example.wait.ms", 10) / 1000

    def process(self, tup: Any) -> None:
        time.sleep(self.wait)


class Computes(Bolt):
    """Computes for ``example.cpu.ms`` on every tuple, holding the GIL."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.cpu = conf.get("example.cpu.ms", 2) / 1000

    def process(self, tup: Any) -> None:
        until = time.thread_time() + self.cpu
        x = 0
        while time.thread_time() < until:
            x += 1


class WaitingTopology(Topology):
    config = {"topology.max.spout.pending": 256, "example.wait.ms": 10}
    numbers = Numbers.spec()
    waits = Waits.spec(inputs=[numbers], par=1, tasks=8)


class CpuTopology(Topology):
    config = {"topology.max.spout.pending": 256, "example.cpu.ms": 2}
    numbers = Numbers.spec()
    computes = Computes.spec(inputs=[numbers], par=1, tasks=4)


class IdleTopology(Topology):
    config = {"example.rate": 50, "example.wait.ms": 1}
    numbers = Numbers.spec()
    waits = Waits.spec(inputs=[numbers], par=8, tasks=8)


class QueueingTopology(Topology):
    config = {"topology.max.spout.pending": 2000, "example.wait.ms": 2}
    numbers = Numbers.spec()
    waits = Waits.spec(inputs=[numbers], par=2, tasks=2)
