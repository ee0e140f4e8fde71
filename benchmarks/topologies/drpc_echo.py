"""A trivial DRPC function for benchmarks/drpc.py: ``echo`` answers its arguments, through a
linear DRPC topology of one bolt (Storm's exclamation, without the exclamation)."""

from __future__ import annotations

from typing import Any

from squall import BasicBolt
from squall.drpc import LinearDRPCTopologyBuilder


class Echo(BasicBolt):
    outputs = ["id", "result"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0], tup.values[1]])


builder = LinearDRPCTopologyBuilder("echo")
builder.add_bolt(Echo, 1)
EchoTopology = builder.create_remote_topology()
