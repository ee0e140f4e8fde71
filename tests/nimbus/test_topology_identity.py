"""Which ZooKeeper nodes a topology's own identity is granted at submit: every
transactional id its state may live under (squall.transactional's rule and
checkpointed state's), and nothing when it keeps that state in another ensemble."""

from __future__ import annotations

from types import SimpleNamespace

from squall.nimbus.submission import transactional_paths


def definition(name: str, **options: dict[str, str]) -> SimpleNamespace:
    return SimpleNamespace(name=name, components={c: SimpleNamespace(options=o) for c, o in options.items()})


def test_every_id_the_topologys_state_may_use_is_granted() -> None:
    defn = definition("WordCount", spout={"transactional_id": "tx-own"}, count={})
    conf = {"topology.name": "wc", "topology.transactional.id": "tx-conf"}
    assert transactional_paths(defn, conf) == [
        "/transactional/WordCount", "/transactional/tx-conf", "/transactional/tx-own", "/transactional/wc"]


def test_another_root_is_honoured_and_another_ensemble_gets_nothing() -> None:
    defn = definition("WordCount")
    assert transactional_paths(defn, {"topology.name": "wc", "transactional.zookeeper.root": "/tx/"}) == [
        "/tx/WordCount", "/tx/wc"]
    assert transactional_paths(defn, {"topology.name": "wc",
                                      "transactional.zookeeper.servers": ["zk.example"]}) == []


def test_ids_that_are_not_one_node_name_are_left_out() -> None:
    defn = definition("..", spout={"transactional_id": "a/b"})
    assert transactional_paths(defn, {"topology.name": "wc", "topology.transactional.id": ""}) == [
        "/transactional/wc"]
