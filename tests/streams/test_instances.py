"""Spouts and sinks given as instances travel by value without their runtime: a worker
importing the topology's module builds it again there, where the logging is configured
and a component's logger holds its stream's lock (no pickle)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from squall import Spout
from squall.local.cluster import LocalCluster
from squall.streams import StreamBuilder, ValueMapper
from squall.testing import poll_for
from tests.streams.streams_data import Record, Recorded

pytestmark = pytest.mark.timeout(60)


class Upto(Spout):
    outputs = ["n"]

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.next = 0

    def next_tuple(self) -> None:
        if self.next < self.limit:
            self.emit([self.next])
            self.next += 1


class LockedLogger:
    """A logger as a worker binds one: its stream's lock comes with it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


def test_instances_travel_without_their_runtime() -> None:
    Recorded.clear()
    spout, sink = Upto(3), Record()
    spout.logger, sink.logger = LockedLogger(), LockedLogger()  # a worker's: no pickle
    spout.options = {"note": "kept"}
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0)).map(lambda n: n * 10).to(sink)
    topology = builder.build()  # TypeError before: cannot pickle '_thread.lock' object
    assert topology.definition().components["spout1"].options["note"] == "kept"
    with LocalCluster() as cluster:
        cluster.submit("instances", topology)
        poll_for(lambda: len(Recorded.get("bolt2")) == 3, 30, "the three values")
        cluster.kill("instances")
    assert sorted(Recorded.get("bolt2")) == [[0], [10], [20]]
