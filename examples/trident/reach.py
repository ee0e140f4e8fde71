"""Storm's TridentReach: the reach of a URL (how many distinct people saw it tweeted),
computed on demand by a DRPC function from two static states -- who tweeted each URL, and
who follows each tweeter.

    python examples/trident/reach.py            # local, with DRPC queries printed
    squall submit examples/trident/reach.py     # on a cluster, then:
    squall drpc-client reach foo.com/blog/1
"""

from __future__ import annotations

import json
from typing import Any

from squall.trident import (
    CombinerAggregator,
    Function,
    MapGet,
    ReadOnlyState,
    StateFactory,
    Sum,
    TridentTopology,
)

TWEETERS_DB = {
    "foo.com/blog/1": ["sally", "bob", "tim", "george", "nathan"],
    "engineering.twitter.com/blog/5": ["adam", "david", "sally", "nathan"],
    "tech.backtype.com/blog/123": ["tim", "mike", "john"],
}
FOLLOWERS_DB = {
    "sally": ["bob", "tim", "alice", "adam", "jim", "chris", "jai"],
    "bob": ["sally", "nathan", "jim", "mary", "david", "vivian"],
    "tim": ["alex"],
    "nathan": ["sally", "bob", "adam", "harry", "chris", "vivian", "emily", "jordan"],
    "adam": ["david", "carissa"],
    "mike": ["john", "bob"],
    "john": ["alice", "nathan", "jim", "mike", "bob"],
}


class StaticSingleKeyMapState(ReadOnlyState):
    """A read-only map from a dict: ``multi_get`` of one-field keys."""

    def __init__(self, table: dict[str, Any]) -> None:
        super().__init__()
        self.table = table

    def multi_get(self, keys: list[list[Any]]) -> list[Any]:
        return [self.table.get(key[0]) for key in keys]


class StaticFactory(StateFactory):
    def __init__(self, table: dict[str, Any]) -> None:
        super().__init__()
        self.table = table

    def make_state(self, conf: dict[str, Any], context: Any, partition_index: int,
                   num_partitions: int) -> StaticSingleKeyMapState:
        return StaticSingleKeyMapState(self.table)


class ExpandList(Function):
    """One tuple per element of the list in the first field (none for a missing list)."""

    def execute(self, tup: Any, collector: Any) -> None:
        for item in tup[0] or ():
            collector.emit([item])


class One(CombinerAggregator):
    """1 for any number of tuples: a group's presence."""

    def init(self, tup: Any) -> int:
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return 1

    def zero(self) -> int:
        return 1


def build(drpc: object = None) -> TridentTopology:
    topology = TridentTopology()
    url_to_tweeters = topology.new_static_state(StaticFactory(TWEETERS_DB))
    tweeters_to_followers = topology.new_static_state(StaticFactory(FOLLOWERS_DB))
    (topology.new_drpc_stream("reach", drpc)
     .state_query(url_to_tweeters, ["args"], MapGet(), ["tweeters"])
     .each(["tweeters"], ExpandList(), ["tweeter"])
     .shuffle()
     .state_query(tweeters_to_followers, ["tweeter"], MapGet(), ["followers"])
     .each(["followers"], ExpandList(), ["follower"])
     .group_by(["follower"])
     .aggregate(One(), ["one"])
     .aggregate(["one"], Sum(), ["reach"]))
    return topology


topology = build()

if __name__ == "__main__":
    from squall import LocalCluster
    from squall.drpc import LocalDRPC

    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit("reach", build(drpc).build("reach"))
        for url in ("aaa", "foo.com/blog/1", "engineering.twitter.com/blog/5"):
            print(f"REACH of {url}: {json.loads(drpc.execute('reach', url))}")
