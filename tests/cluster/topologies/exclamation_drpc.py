"""Storm's exclamation DRPC topology (Distributed-RPC.md), built by the linear builder and
assigned at top level: ``squall submit`` takes this file as it is.  Arguments ``fail`` fail
the request."""

from __future__ import annotations

from typing import Any

from squall import BasicBolt, FailedException
from squall.drpc import LinearDRPCTopologyBuilder


class ExclaimBolt(BasicBolt):
    outputs = ["id", "result"]

    def process(self, tup: Any) -> None:
        if tup.values[1] == "fail":
            raise FailedException
        self.emit([tup.values[0], tup.values[1] + "!"])


builder = LinearDRPCTopologyBuilder("exclamation")
builder.add_bolt(ExclaimBolt, 2)
Exclamation = builder.create_remote_topology()
