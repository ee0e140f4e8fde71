"""The smallest topology with a spout, a bolt and an acker: what the wire tests frame."""

from __future__ import annotations

from squall import Bolt, Grouping, Spout, Topology
from squall.worker.plan import plan_topology


class Words(Spout):
    outputs = ["word"]


class Count(Bolt):
    outputs = ["word", "count"]


class WordCount(Topology):
    words = Words.spec()
    count = Count.spec(inputs={words: Grouping.shuffle()})


PLAN = plan_topology(WordCount.definition())
