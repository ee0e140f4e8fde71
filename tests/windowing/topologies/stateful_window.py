"""A persisted stateful window for the cluster test: a rewinding spout of the
numbers 0..squall.test.n-1, paced at squall.test.rate a second, into tumbling
windows of squall.test.window tuples, each window's sum appended to the state."""

from __future__ import annotations

import os
import time
from typing import Any

from squall import Topology
from squall.state import CheckpointedSpout
from squall.windowing import Count, StatefulWindowedBolt

WINDOW = 700


class PacedNumbers(CheckpointedSpout):
    outputs = ["n"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.n = int(conf["squall.test.n"])
        self.rate = float(conf["squall.test.rate"])
        self.pos = 0
        self.started, self.sent = time.monotonic(), 0
        self.restores = open(os.path.join(conf["squall.test.dir"], "restores.log"), "a", buffering=1)  # noqa: SIM115

    def snapshot(self) -> int:
        return self.pos

    def restore(self, position: Any) -> None:
        self.restores.write(f"{position}\n")
        self.pos = position or 0

    def next_tuple(self) -> None:
        if self.pos >= self.n or self.sent >= (time.monotonic() - self.started) * self.rate:
            return
        self.sent += 1
        self.emit([self.pos])
        self.pos += 1


class WindowSums(StatefulWindowedBolt):
    outputs = ["sum"]

    def init_state(self, state: Any) -> None:
        self.state = state

    def process_window(self, window: Any) -> None:
        total = sum(t.values.n for t in window.tuples)
        self.state.put("sums", [*self.state.get("sums", []), total])
        self.emit([total])


class PersistedWindow(Topology):
    config = {"topology.message.timeout.secs": 6, "topology.state.checkpoint.interval.ms": 200}
    numbers = PacedNumbers.spec()
    sums = WindowSums.spec(inputs=[numbers], tumbling=Count(WINDOW), persist=True)
