"""Topologies that declare their memory (docs/scheduling.md), for the resource-aware
scheduler's cluster test: one packed into two workers, one too big for the node, and
one whose bolt holds far more than it declared after its first tuple (once: a marker
file in ``squall.test.dir`` says it did, so its restarted worker behaves)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from squall import Bolt, Spout, Topology


class Ticks(Spout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.counter = itertools.count()
        self.next_at = 0.0

    def next_tuple(self) -> None:
        # Ten a second: enough to reach every bolt, little for a shared machine.
        if self.clock.now() < self.next_at:
            return
        self.next_at = self.clock.now() + 0.1
        n = next(self.counter)
        self.emit([n], tup_id=n)


class Pass(Bolt):
    def process(self, tup: Any) -> None:
        pass


class Hog(Bolt):
    """Holds ``squall.test.hog.mb`` MB, every page written, from its first tuple on."""

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.marker = Path(conf["squall.test.dir"]) / "hogged"
        self.mb = conf["squall.test.hog.mb"]
        self.held: bytearray | None = None

    def process(self, tup: Any) -> None:
        if self.held is None and not self.marker.exists():
            self.marker.touch()
            self.held = bytearray(b"\x01") * (self.mb * 1024 * 1024)


class Packed(Topology):
    """3 executors of 300 MB with workers of at most 700: two workers (600 and 300 MB)."""

    config = {"topology.acker.executors": 0, "topology.worker.max.heap.size.mb": 700,
              "topology.max.spout.pending": 10}
    ticks = Ticks.spec().set_memory_load(300)
    passing = Pass.spec(inputs=[ticks], par=2).set_memory_load(200, 100).set_cpu_load(20)


class TooBig(Topology):
    """One worker of 500 MB and the interpreter's allowance."""

    config = {"topology.acker.executors": 0, "topology.max.spout.pending": 10}
    ticks = Ticks.spec().set_memory_load(500)


class Hogging(Topology):
    config = {"topology.acker.executors": 0, "topology.max.spout.pending": 10,
              "topology.component.resources.onheap.memory.mb": 10}
    ticks = Ticks.spec()
    hog = Hog.spec(inputs=[ticks])
