"""Sliding sums and tumbling averages: Storm's SlidingWindowTopology.

    squall local examples/windowing/sums.py --duration 15

Numbers arrive with a message id and an event timestamp (epoch ms, a
little out of order).  ``sliding`` sums the last 30 numbers every 10;
``tumbling`` averages 5 s windows of event time, lag 2 s, watermarks every
second, and sends tuples later than the watermark to ``late``.  Every
number is acked when it leaves its last window, after the outputs anchored
to it were acked downstream (at least once).
"""

from __future__ import annotations

import random
import time
from typing import Any

from squall import Bolt, Spout, Topology
from squall.windowing import Count, Duration, WindowedBolt


class NumberSpout(Spout):
    outputs = ["n", "ts"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)
        self.next_id = 0
        self.pending: dict[int, tuple[int, int]] = {}
        self.replay: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop()
        else:
            time.sleep(0.01)  # ~100 numbers a second: windows you can read
            msg_id = self.next_id
            self.next_id += 1
            # event time: now, give or take up to 3 s (some will be late)
            ts = int(time.time() * 1000) - self.rng.randrange(0, 3000)
            self.pending[msg_id] = (self.rng.randrange(100), ts)
        self.emit(list(self.pending[msg_id]), tup_id=msg_id)

    def ack(self, tup_id: Any) -> None:
        del self.pending[tup_id]

    def fail(self, tup_id: Any) -> None:
        self.replay.append(tup_id)


class SlidingSum(WindowedBolt):
    outputs = ["sum"]

    def process_window(self, window: Any) -> None:
        self.emit([sum(t.values.n for t in window.tuples)])


class TumblingAvg(WindowedBolt):
    outputs = ["avg", "start", "end"]

    def process_window(self, window: Any) -> None:
        values = [t.values.n for t in window.tuples]
        self.emit([sum(values) / len(values), window.start, window.end])


class Printer(Bolt):
    def process(self, tup: Any) -> None:
        self.logger.info(f"{tup.component}/{tup.stream}", values=list(tup.values))


class Sums(Topology):
    config = {"topology.max.spout.pending": 5000}
    numbers = NumberSpout.spec()
    sliding = SlidingSum.spec(inputs=[numbers], window=Count(30), slide=Count(10))
    tumbling = TumblingAvg.spec(inputs=[numbers], tumbling=Duration.seconds(5),
                                timestamp_field="ts", lag=Duration.seconds(2),
                                watermark_interval=Duration.seconds(1), late_stream="late")
    printer = Printer.spec(inputs=[sliding, tumbling, tumbling["late"]])
