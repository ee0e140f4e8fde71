"""The smallest topology with a spout, a bolt and an acker: what the wire tests frame."""

from __future__ import annotations

from typing import Any

from squall import Bolt, Grouping, Spout, Topology
from squall.worker.plan import TopologyPlan, plan_topology
from squall.worker.wire.frames import WireValidator


class Words(Spout):
    outputs = ["word"]


class Count(Bolt):
    outputs = ["word", "count"]


class WordCount(Topology):
    words = Words.spec()
    count = Count.spec(inputs={words: Grouping.shuffle()})


PLAN = plan_topology(WordCount.definition())


class Attempts(Spout):
    outputs = ["tx", "word"]


class TakeAttempts(Bolt):
    pass


class AttemptTopology(Topology):
    """A spout whose tuples carry TransactionAttempts, to a bolt of two tasks."""

    spout = Attempts.spec()
    take = TakeAttempts.spec(inputs={spout: Grouping.shuffle()}, par=2)


ATTEMPT_PLAN = plan_topology(AttemptTopology.definition())
ATTEMPT_SPOUT = ATTEMPT_PLAN.component_tasks["spout"][0]
ATTEMPT_BOLTS = tuple(ATTEMPT_PLAN.component_tasks["take"])


def decode(plan: TopologyPlan, frame: bytes) -> list[tuple[str, int, Any]]:
    """``frame`` as a worker running every task of ``plan`` reads it: through its one decoder."""
    return WireValidator(plan, plan.task_component).decode(frame)
