"""Numbered entries of a Redis stream read at least once, for the cluster test.

The spout reads stream ``events`` through group ``g``; ``Pace`` slows each
tuple down (``squall.test.pace.ms``) so that kills land mid-run; the sink
XADDs each processed entry's stream and id to stream ``processed``: the
durable record the test checks.  Redis comes from ``--conf redis.url=...``.
"""

from __future__ import annotations

import time
from typing import Any

from squall import Bolt, Topology
from squall.contrib.redis import RedisStreamSink, RedisStreamSpout


class Pace(Bolt):
    outputs = ["stream", "id"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.pause = float(conf.get("squall.test.pace.ms", 0)) / 1000.0

    def process(self, tup: Any) -> None:
        if self.pause:
            time.sleep(self.pause)
        self.emit([tup.values.stream, tup.values.id])


class StreamAck(Topology):
    config = {"topology.max.spout.pending": 100, "topology.message.timeout.secs": 5}
    events = RedisStreamSpout.spec(streams=["events"], group="g", par=2, backoff_initial=0.05,
                                   backoff_max=0.5)
    pace = Pace.spec(inputs=[events], par=2)
    record = RedisStreamSink.spec(inputs=[pace], stream="processed", par=2)
