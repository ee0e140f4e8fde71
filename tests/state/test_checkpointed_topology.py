"""The rewrite of a topology with stateful bolts, and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Bolt, Grouping, Spout, Topology
from squall.errors import TopologyValidationError
from squall.state import CheckpointedSpout, StatefulBolt
from squall.state.bolt_wrapper import CheckpointedBolt
from squall.state.spout import CheckpointSpout

pytestmark = pytest.mark.timeout(10)


class Words(Spout):
    outputs = ["word"]


class Rewinding(CheckpointedSpout):
    outputs = ["word"]


class Upper(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        self.emit([tup.values.word.upper()])


class Count(StatefulBolt):
    outputs = ["word", "count"]

    def init_state(self, state: Any) -> None:
        self.state = state


def wiring(topology: type[Topology]) -> dict[str, Any]:
    return {name: (c.cls, sorted((i.component, i.stream, i.grouping.type) for i in c.inputs))
            for name, c in topology.definition().components.items()}


def test_a_stateful_bolt_gets_a_checkpoint_spout_and_every_bolt_the_checkpoint_stream():
    class WC(Topology):
        words = Words.spec()
        upper = Upper.spec(inputs=[words], par=2)
        count = Count.spec(inputs={upper: Grouping.fields("word")}, par=3)

    w = wiring(WC)
    assert w["$checkpointspout"] == (CheckpointSpout, [])
    assert w["words"] == (Words, [])
    assert w["upper"] == (CheckpointedBolt, [("$checkpointspout", "$checkpoint", "all"),
                                             ("words", "default", "shuffle")])
    assert w["count"] == (CheckpointedBolt, [("upper", "$checkpoint", "all"), ("upper", "default", "fields")])
    assert WC.definition().components["count"].options["bolt"] is Count
    assert "$checkpoint" in WC.definition().components["count"].streams


def test_a_checkpointed_spout_is_the_checkpoint_spout():
    class WC(Topology):
        words = Rewinding.spec()
        count = Count.spec(inputs=[words])

    w = wiring(WC)
    assert "$checkpointspout" not in w
    assert w["words"] == (CheckpointSpout, [])
    assert w["count"] == (CheckpointedBolt, [("words", "$checkpoint", "all"),
                                             ("words", "default", "shuffle")])
    assert set(WC.definition().components["words"].streams) == {"default", "$checkpoint"}


def test_a_bolt_reading_two_spouts_subscribes_once_to_the_checkpoint_spout():
    # Both spouts' barriers come from the one checkpoint spout: one barrier per checkpoint
    class Other(Spout):
        outputs = ["word"]

    class WC(Topology):
        words = Words.spec()
        more = Other.spec()
        upper = Upper.spec(inputs=[words])
        count = Count.spec(inputs=[words, more], par=2)
        both = Count.spec(inputs=[more, upper])

    w = wiring(WC)
    assert w["count"] == (CheckpointedBolt, [("$checkpointspout", "$checkpoint", "all"),
                                             ("more", "default", "shuffle"), ("words", "default", "shuffle")])
    assert w["both"] == (CheckpointedBolt, [("$checkpointspout", "$checkpoint", "all"),
                                            ("more", "default", "shuffle"), ("upper", "$checkpoint", "all"),
                                            ("upper", "default", "shuffle")])


def test_a_bolt_reading_a_checkpointed_spout_and_a_plain_one_subscribes_once_to_the_first():
    class WC(Topology):
        words = Rewinding.spec()
        more = Words.spec()
        count = Count.spec(inputs=[words, more])

    assert wiring(WC)["count"] == (CheckpointedBolt, [("more", "default", "shuffle"),
                                                      ("words", "$checkpoint", "all"),
                                                      ("words", "default", "shuffle")])


def test_a_topology_without_state_is_left_alone():
    class Plain(Topology):
        words = Words.spec()
        upper = Upper.spec(inputs=[words])

    assert wiring(Plain)["upper"][0] is Upper


@pytest.mark.parametrize(("config", "message"), [
    ({"topology.state.checkpoint.interval.ms": 30000, "topology.message.timeout.secs": 30},
     r"topology.state.checkpoint.interval.ms \(30000\) must be below topology.message.timeout.secs"),
    ({"topology.state.provider": "zookeeper"}, "topology.state.provider must be one of"),
    ({"topology.state.provider.config": "{nope"}, "provider.config is not valid JSON"),
    ({"topology.state.provider": "redis"}, "no URL is set"),
    ({"topology.acker.executors": 0}, "topology.acker.executors is 0"),
])
def test_bad_state_config_is_refused_at_definition(config, message):
    with pytest.raises(TopologyValidationError, match=message):
        type("Bad", (Topology,), {"config": config, "words": Words.spec(),
                                  "count": Count.spec(inputs=["words"])})


def test_a_parallel_checkpointed_spout_is_refused():
    with pytest.raises(TopologyValidationError, match=r"one task \(par=1\)"):
        class Bad(Topology):
            words = Rewinding.spec(par=2)
            count = Count.spec(inputs=[words])


def test_a_cycle_is_refused():
    with pytest.raises(TopologyValidationError, match="cycle"):
        class Bad(Topology):
            words = Words.spec()
            a = Upper.spec(inputs=["words", "b"])
            b = Count.spec(inputs=["a"], outputs=["word"])


def test_a_bolt_that_flushes_per_batch_keeps_its_batch_done():
    from squall.state.bolt_wrapper import CheckpointedFlushingBolt

    class Flushing(Bolt):
        def process(self, tup: Any) -> None:
            pass

        def batch_done(self) -> None:
            pass

    class WC(Topology):
        words = Words.spec()
        flush = Flushing.spec(inputs=[words])
        count = Count.spec(inputs=[words])

    assert wiring(WC)["flush"][0] is CheckpointedFlushingBolt
    assert wiring(WC)["count"][0] is CheckpointedBolt
