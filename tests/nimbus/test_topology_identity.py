"""Which ZooKeeper nodes a topology's own identity is granted at submit: the state ids
it uses (each transactional component's id by squall.transactional's rule, and the
definition's name when it has checkpointed state), under the cluster's root only, and
nothing when it keeps that state in another ensemble."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from squall.errors import TopologyValidationError
from squall.nimbus.submission import state_ids, transactional_paths
from squall.state.checkpoint import CHECKPOINT_STREAM


def definition(name: str, **options: dict[str, str]) -> SimpleNamespace:
    return SimpleNamespace(name=name, components={
        c: SimpleNamespace(options=o, streams={CHECKPOINT_STREAM: None} if o.get("checkpointed") else {})
        for c, o in options.items()})


def test_the_ids_a_topology_uses_are_its_transactional_ids_and_its_checkpointed_name() -> None:
    defn = definition("WordCount", spout={"transactional_id": "tx-own"}, emitter={"transactional_id": None},
                      count={})
    conf = {"topology.name": "wc", "topology.transactional.id": "tx-conf"}
    assert state_ids(defn, conf) == ["tx-conf", "tx-own"]
    assert state_ids(defn, {"topology.name": "wc"}) == ["tx-own", "wc"]
    # a plain topology uses none: its name and class name claim nothing
    assert state_ids(definition("WordCount", split={}, count={}), conf) == []
    assert state_ids(definition("Stateful", count={"checkpointed": True}), conf) == ["Stateful"]


def test_paths_are_under_the_clusters_root_and_another_ensemble_gets_nothing() -> None:
    assert transactional_paths("/transactional/", ["a", "b"]) == ["/transactional/a", "/transactional/b"]
    defn = definition("WordCount", spout={"transactional_id": "tx"})
    assert state_ids(defn, {"topology.name": "wc", "transactional.zookeeper.servers": ["zk.example"]}) == []


@pytest.mark.parametrize("bad", ["a/b", "..", ".", "-rf", "x" * 129, "a/../b", ".hidden"])
def test_an_id_that_is_not_one_node_name_is_refused(bad: str) -> None:
    with pytest.raises(TopologyValidationError, match="transactional id"):
        state_ids(definition("W", spout={"transactional_id": bad}), {"topology.name": "wc"})
