"""DRPC topologies that answer with a tag of their submitter's choosing (``--conf
squall.test.tag=alice``), so a test sees whose topology answered a call: ``Owned``
serves the function ``owned``, ``Handed`` the function ``handed``."""

from __future__ import annotations

from typing import Any

from squall import BasicBolt, Topology
from squall.drpc import DRPCSpout, ReturnResults


class TagBolt(BasicBolt):
    outputs = ["result", "return_info"]

    def initialize(self, conf: dict[str, Any], context: Any) -> None:
        self.tag = str(conf.get("squall.test.tag", "?"))

    def process(self, tup: Any) -> None:
        self.emit([f"{self.tag}:{tup.values[0]}", tup.values[1]])


class Owned(Topology):
    requests = DRPCSpout.spec(function="owned")
    tagged = TagBolt.spec(inputs=[requests])
    answer = ReturnResults.spec(inputs=[tagged])


class Handed(Topology):
    requests = DRPCSpout.spec(function="handed")
    tagged = TagBolt.spec(inputs=[requests])
    answer = ReturnResults.spec(inputs=[tagged])
