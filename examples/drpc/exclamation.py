"""Storm's BasicDRPCTopology: the DRPC function ``exclamation`` adds a "!" to its argument.

    squall submit examples/drpc/exclamation.py     # on a cluster (squall dev-cluster runs a
    squall drpc-client exclamation hello           #   DRPC server), then: exclamation "hello" => "hello!"
    python examples/drpc/exclamation.py            # local mode, with its own LocalDRPC

A LinearDRPCTopologyBuilder's topology: the DRPC spout, this one bolt, and the bolt that
returns each result to the server the request came from.
"""

from __future__ import annotations

from typing import Any

from squall import BasicBolt


class ExclaimBolt(BasicBolt):
    outputs = ["id", "result"]

    def process(self, tup: Any) -> None:
        request_id, argument = tup.values
        self.emit([request_id, argument + "!"])


def builder() -> Any:
    from squall.drpc import LinearDRPCTopologyBuilder

    linear = LinearDRPCTopologyBuilder("exclamation")
    linear.add_bolt(ExclaimBolt, 3)
    return linear


# What `squall submit` runs: its requests come from drpc.servers.
Exclamation = builder().create_remote_topology()

if __name__ == "__main__":
    from squall import LocalCluster
    from squall.drpc import LocalDRPC

    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit("exclamation", builder().create_local_topology(drpc))
        for word in ("hello", "goodbye"):
            print(f'exclamation "{word}" => "{drpc.execute("exclamation", word)}"')
