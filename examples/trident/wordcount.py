"""Storm's TridentWordCount: sentences counted into a state, exactly once, and a DRPC
function answering how many times some words were seen.

    python examples/trident/wordcount.py                     # local, with DRPC queries printed
    squall local examples/trident/wordcount.py --duration 10 # local, the counting only
    squall submit examples/trident/wordcount.py              # on a cluster, then:
    squall drpc-client words "cat the dog jumped"

The counts are kept in a ``MemoryMapState``, in the workers' memory: each partition in the
worker that updates it, where its query runs too (on any number of workers).  A worker that
dies loses its partitions; to keep them, keep the counts in Redis
(``squall.contrib.redis.RedisMapState.opaque()``).
"""

from __future__ import annotations

import json
import time

from squall.trident import Count, FilterNull, MapGet, MemoryMapState, Sum, TridentTopology
from squall.trident.testing import FixedBatchSpout, Split

SENTENCES = [
    "the cow jumped over the moon",
    "the man went to the store and bought some candy",
    "four score and seven years ago",
    "how many apples can you eat",
    "to be or not to be the person",
]


def build(drpc: object = None, state: object = None) -> TridentTopology:
    """The word count and its DRPC function ``words``; ``drpc``: a LocalDRPC (local mode)."""
    topology = TridentTopology()
    spout = FixedBatchSpout(["sentence"], 3, *[[s] for s in SENTENCES], cycle=True)
    counts = (topology.new_stream("spout1", spout)
              .each(["sentence"], Split(), ["word"])
              .group_by(["word"])
              .persistent_aggregate(state or MemoryMapState.factory(), Count(), ["count"])
              .parallelism_hint(4))
    (topology.new_drpc_stream("words", drpc)
     .each(["args"], Split(), ["word"])
     .group_by(["word"])
     .state_query(counts, ["word"], MapGet(), ["count"])
     .each(["count"], FilterNull())
     .aggregate(["count"], Sum(), ["sum"]))
    return topology


# What `squall local` and `squall submit` run (its DRPC stream asks drpc.servers).
topology = build()

if __name__ == "__main__":
    from squall import LocalCluster
    from squall.drpc import LocalDRPC

    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit("wordcount", build(drpc).build("wordcount"))
        for _ in range(5):
            time.sleep(1)
            answer = json.loads(drpc.execute("words", "cat the dog jumped"))
            print(f"DRPC RESULT: {answer}  (times 'the', 'dog', 'cat' and 'jumped' were counted)")
