"""Storm's Trident word count with its counts in a MemoryMapState of one partition, for a
cluster of two workers (tests/cluster/test_drpc_cluster.py): the state lives in the memory
of the worker that updates it, so its DRPC query must run in that worker too."""

from __future__ import annotations

from squall.trident import Count, FilterNull, MapGet, MemoryMapState, Sum, TridentTopology
from squall.trident.testing import FixedBatchSpout, Split

topology = TridentTopology()
counts = (topology.new_stream("sentences", FixedBatchSpout(["sentence"], 2, ["the cow"], ["the moon"],
                                                           cycle=True))
          .each(["sentence"], Split(), ["word"])
          .group_by(["word"])
          .persistent_aggregate(MemoryMapState.factory(), Count(), ["count"]))
(topology.new_drpc_stream("local_counts")
 .each(["args"], Split(), ["word"])
 .shuffle()  # a group of its own: the even scheduler alone would put the query apart from the state
 .each(["word"], FilterNull())
 .group_by(["word"])
 .state_query(counts, ["word"], MapGet(), ["count"])
 .each(["count"], FilterNull())
 .aggregate(["count"], Sum(), ["sum"]))
