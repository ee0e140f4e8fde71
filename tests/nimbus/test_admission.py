"""The checks a submitted topology passes (squall.nimbus.admission): local mode
refuses at submit what nimbus refuses, with the same message, before any
worker starts."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from squall import Spout, Topology
from squall.errors import ConfigError, TopologyValidationError
from squall.local.cluster import LocalCluster
from squall.nimbus.admission import plan_submission
from squall.state import StatefulBolt


class Words(Spout):
    outputs = ["word"]

    def next_tuple(self) -> None:
        self.emit(["w"])


class Count(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def process(self, tup: Any) -> None:
        self.counts.put(tup.values.word, self.counts.get(tup.values.word, 0) + 1)


class Counting(Topology):
    words = Words.spec()
    count = Count.spec(inputs=[words])


BAD = [
    # (the case) an interval the message timeout cannot cover, given at submit:
    # accepted, a worker would crash-loop on it
    ({"topology.state.checkpoint.interval.ms": 30000}, ConfigError,
     r"checkpoint\.interval\.ms \(30000\) must be below topology\.message\.timeout\.secs \(30 s\)"),
    ({"topology.message.timeout.secs": 1}, ConfigError,
     r"interval\.ms \(1000\) must be below topology\.message\.timeout\.secs \(1 s\)"),
    ({"topology.workers": "2"}, ConfigError, r"config 'topology\.workers' must be int, got '2'"),
    ({"topology.state.provider": "zookeeper"}, ConfigError, r"topology\.state\.provider must be one of"),
    ([("topology.workers", 2)], ConfigError, r"conf must be a JSON object of config keys, got list"),
]


@pytest.mark.parametrize(("conf", "error", "message"), BAD)
def test_local_mode_refuses_a_bad_conf_at_submit_as_nimbus_does(conf: Any, error: type[Exception],
                                                                 message: str) -> None:
    # Given a local cluster
    with LocalCluster() as cluster:
        # When a topology is submitted with a conf nimbus refuses
        with pytest.raises(error, match=message):
            cluster.submit("counting", Counting, conf=conf)
        # Then nothing runs
        assert cluster.topologies() == {}
    # and nimbus's checks (the same function, with the cluster's caps) say the same
    with pytest.raises(error, match=message):
        plan_submission("counting", Counting.definition(), conf, ["node-a"], structlog.get_logger(),
                        limits={})


def test_the_cluster_settings_count_in_local_mode_as_a_clusters_do() -> None:
    # Given a local cluster whose own conf sets a short message timeout
    with LocalCluster({"topology.message.timeout.secs": 2}) as cluster:
        # Then an interval the topology's submit conf sets above it is refused at submit
        with pytest.raises(ConfigError, match=r"\(2500\) must be below topology\.message\.timeout\.secs"):
            cluster.submit("counting", Counting, conf={"topology.state.checkpoint.interval.ms": 2500})
        assert cluster.topologies() == {}


def test_names_nimbus_refuses_are_refused_in_local_mode_too() -> None:
    with LocalCluster() as cluster:
        with pytest.raises(TopologyValidationError, match=r"is over 100 characters"):
            cluster.submit("x" * 101, Counting)
        with pytest.raises(TopologyValidationError, match=r"must be 1-128 letters, digits, '_' or '-'"):
            cluster.submit("../etc", Counting)
        assert cluster.topologies() == {}


def test_a_clusters_size_caps_are_checked_before_planning() -> None:
    # (4 executors: the spout, the bolt, the checkpoint spout, one acker)
    with pytest.raises(TopologyValidationError,
                       match=r"asks for 4 executors, over this cluster's nimbus\.executors\.perTopology \(3"):
        plan_submission("counting", Counting.definition(), {}, ["node-a"], structlog.get_logger(),
                        limits={"nimbus.executors.perTopology": 3})


class Tally(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def process(self, tup: Any) -> None:
        pass


def _colocating(anchor: str, par: int = 1, back: bool = False) -> type[Topology]:
    class Colocated(Topology):
        words = Words.spec()
        count = Count.spec(inputs=[words], config={"topology.colocate.with": "tally"} if back else {})
        tally = Tally.spec(inputs=[words], par=par, config={"topology.colocate.with": anchor})
    return Colocated


@pytest.mark.parametrize(("topology", "message"), [
    (_colocating("counter"), (r"colocate\.with of 'tally' names 'counter', not a component of this topology "
                             r"\(it has \['count', 'tally', 'words'\]\)")),
    (_colocating("count", par=2), r"both need as many executors \('tally' has 2, 'count' 1\)"),
    (_colocating("count", back=True), r"'count' goes round in a circle: count -> tally -> count"),
])
def test_a_colocation_that_cannot_hold_is_refused_at_submit(topology: type[Topology], message: str) -> None:
    with LocalCluster() as cluster:
        with pytest.raises(TopologyValidationError, match=message):
            cluster.submit("colocated", topology)
        assert cluster.topologies() == {}


def test_a_colocated_component_runs_in_its_anchors_worker_in_local_mode() -> None:
    with LocalCluster() as cluster:
        runner = cluster.submit("colocated", _colocating("count"), conf={"topology.workers": 2})
        workers = [{e.component for e in execs} for execs in runner.placement]
        (beside,) = [components for components in workers if "tally" in components]
        assert "count" in beside


RESOURCES_BAD = [
    ({"topology.component.resources.onheap.memory.mb": float("nan")}, r"onheap\.memory\.mb must be a number"),
    ({"topology.component.resources.onheap.memory.mb": -5}, ConfigError),
    ({"topology.component.cpu.pcore.percent": True}, ConfigError),
    ({"topology.component.resources.offheap.memory.mb": 10**9}, r"over the most Squall accepts"),
    ({"topology.worker.max.heap.size.mb": float("inf")}, r"max\.heap\.size\.mb must be a number"),
    ({"topology.component.resources.onheap.memory.mb": 900},
     r"declares 900 MB per executor, over topology\.worker\.max\.heap\.size\.mb \(768 MB\)"),
    ({"topology.scheduler.strategy": "fastest"}, r"topology\.scheduler\.strategy must be"),
]


@pytest.mark.parametrize(("conf", "expected"), RESOURCES_BAD)
def test_resource_declarations_are_checked_at_submit(conf: dict[str, Any], expected: Any) -> None:
    # A submit's conf: refused with the key named, before anything is planned onto a node
    error, match = (TopologyValidationError, expected) if isinstance(expected, str) else (expected, None)
    with pytest.raises(error, match=match):
        plan_submission("counting", Counting.definition(), conf, ["node-a"], structlog.get_logger(),
                        limits={})


def test_a_components_own_declaration_is_checked_at_submit_too() -> None:
    from squall.topology.topology import definition_from_dict

    d = Counting.definition().to_dict()
    d["components"][0]["config"]["topology.component.cpu.pcore.percent"] = float("nan")
    with pytest.raises(TopologyValidationError, match=r"component '\w+': topology\.component\.cpu\.pcore"):
        plan_submission("counting", definition_from_dict(d), {}, ["node-a"], structlog.get_logger(),
                        limits={})
