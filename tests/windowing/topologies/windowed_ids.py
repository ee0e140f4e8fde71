"""A windowed bolt for the cluster test: numbered tuples from a spout that
journals its acks, a 1 s tumbling window per task (par 2, two workers), and
a sink that writes each window's ids to a file the test reads."""

from __future__ import annotations

import json
import os
from typing import Any

from squall import Bolt, Grouping, Spout, Topology
from squall.windowing import Duration, WindowedBolt


class Numbers(Spout):
    outputs = ["id"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.dir = conf["squall.test.dir"]
        self.todo = list(range(conf["squall.test.count"]))
        self.acked = open(os.path.join(self.dir, "acked.log"), "a", buffering=1)  # noqa: SIM115

    def next_tuple(self) -> None:
        if self.todo:
            n = self.todo.pop()
            self.emit([n], tup_id=n)

    def ack(self, tup_id: Any) -> None:
        self.acked.write(f"{tup_id}\n")

    def fail(self, tup_id: Any) -> None:
        self.todo.append(tup_id)


class WindowIds(WindowedBolt):
    outputs = ["task", "pid", "ids", "start", "end"]

    def process_window(self, window: Any) -> None:
        self.emit([self.context.task_id, os.getpid(), [t.values.id for t in window.tuples],
                   window.start, window.end])


class WriteWindows(Bolt):
    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        path = os.path.join(conf["squall.test.dir"], f"windows-{context.task_id}-{os.getpid()}.log")
        self.out = open(path, "a", buffering=1)  # noqa: SIM115

    def process(self, tup: Any) -> None:
        self.out.write(json.dumps(list(tup.values)) + "\n")


class WindowedIds(Topology):
    config = {"topology.message.timeout.secs": 10, "topology.max.spout.pending": 500}
    numbers = Numbers.spec()
    # Fields grouping: half the ids cross to the other worker (a shuffle would keep them
    # beside the spout, as Storm 2's load-aware shuffle does).
    windows = WindowIds.spec(inputs={numbers: Grouping.fields("id")}, par=2, tumbling=Duration.seconds(1))
    sink = WriteWindows.spec(inputs=[windows])
