"""Local mode with the transactional state in a real (embedded) ZooKeeper:
the layout a run leaves, rotation that keeps it small, a fresh LocalCluster
that continues the txids where the last one stopped, and an unreachable
ZooKeeper reported as a CoordinationError in bounded time."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from uuid import uuid4

import pytest
from kazoo.client import KazooClient

from squall import LocalCluster
from squall import config as config_mod
from squall.cluster.zookeeper import DevZookeeper, start_client
from squall.runtime.ports import free_port
from squall.state import OpaqueValue
from squall.testing import poll_for
from tests.helpers import keyring_conf
from tests.transactional.topologies import NUMBERS, GlobalTotal, Run

TX_ID = "global-total-id"
MAX_PENDING = GlobalTotal.config["topology.max.spout.pending"]
TOTAL = sum(v[0] for part in NUMBERS for v in part)


class IdentifiedGlobalTotal(GlobalTotal):
    """GlobalTotal under a transactional id of its own, whatever it is submitted as."""

    transactional_id = TX_ID


@pytest.fixture
def kazoo(zookeeper: DevZookeeper) -> Iterator[KazooClient]:
    client = start_client(config_mod.merge({"storm.zookeeper.servers": ["127.0.0.1"],
                                            "storm.zookeeper.port": zookeeper.port,
                                            **keyring_conf(zookeeper.data_dir.parent)}))
    yield client
    client.stop()
    client.close()




def cluster_conf(zookeeper: DevZookeeper, root: str) -> dict[str, Any]:
    return {"transactional.zookeeper.servers": ["127.0.0.1"], "transactional.zookeeper.port": zookeeper.port,
            "transactional.zookeeper.root": root, **keyring_conf(zookeeper.data_dir.parent)}


def read(client: KazooClient, path: str) -> Any:
    data, _stat = client.get(path)
    return json.loads(data)


def test_state_lives_in_zookeeper_rotated_and_a_new_cluster_continues_the_txids(
        zookeeper: DevZookeeper, kazoo: KazooClient, run: Callable[..., Run]) -> None:
    # Given a LocalCluster whose transactional state is in ZooKeeper, under a root of this test's own
    r = run()
    root = f"/tx-{uuid4().hex}"
    base = f"{root}/{TX_ID}"
    conf = cluster_conf(zookeeper, root)
    # When the global total runs to its exact total
    with LocalCluster(conf=conf) as cluster:
        cluster.submit("sum", IdentifiedGlobalTotal, {"test.run": r.name})
        poll_for(lambda: OpaqueValue(r.store, "total").get() == TOTAL, timeout=30, message="the total")
        last = max(r.committed_txids())
        # Then the coordinator's current txid in ZooKeeper is the next one (written once committed)
        poll_for(lambda: kazoo.exists(f"{base}/coordinator/currtx")
                 and read(kazoo, f"{base}/coordinator/currtx") == last + 1,
                 timeout=10, message=f"currtx == {last + 1}")
        assert not cluster.errors("sum")
    # and the per-transaction state is rotated: a few recent txids, not one znode per txid
    assert last > MAX_PENDING + 2, "too few transactions to tell rotation from none"
    assert sorted(kazoo.get_children(base)) == ["coordinator", "user"]
    # and the coordinator that stopped no longer holds its epoch
    assert read(kazoo, f"{base}/coordinator/epoch") == 1
    assert kazoo.get_children(f"{base}/coordinator/holders") == []
    meta = kazoo.get_children(f"{base}/coordinator/meta")
    assert 1 <= len(meta) <= MAX_PENDING + 2, meta
    assert all(int(t) <= last for t in meta)
    partitions = sorted(kazoo.get_children(f"{base}/user"))
    assert partitions == [f"partition_{p}" for p in range(len(NUMBERS))]
    for partition in partitions:
        txids = kazoo.get_children(f"{base}/user/{partition}")
        assert 1 <= len(txids) <= MAX_PENDING + 2, (partition, txids)
        newest = read(kazoo, f"{base}/user/{partition}/{max(txids, key=int)}")
        assert newest["index"] + newest["amount"] == len(NUMBERS[0])  # it read to the end
    commits_before = len(r.commits)

    # When a NEW LocalCluster (nothing in memory survives) runs the same topology on the same state
    with LocalCluster(conf=conf) as cluster:
        cluster.submit("sum-again", IdentifiedGlobalTotal, {"test.run": r.name})
        poll_for(lambda: len(r.commits) > commits_before, timeout=30, message="a commit in the new cluster")
        # Then its first commit is the txid after the last one committed before
        assert r.commits[commits_before][0] == last + 1
        poll_for(lambda: read(kazoo, f"{base}/coordinator/currtx") > last + 1, timeout=10,
                 message="currtx advanced")
        # and nothing is counted twice: the data was all read, the total stands
        assert OpaqueValue(r.store, "total").get() == TOTAL
        assert not cluster.errors("sum-again")
    new = [t for t, _a in r.commits[commits_before:]]
    assert new == list(range(last + 1, last + 1 + len(new)))
    assert OpaqueValue(r.store, "total").get() == TOTAL


class ConfIdentifiedGlobalTotal(GlobalTotal):
    config = {**GlobalTotal.config, "topology.transactional.id": "from-class-conf"}


def test_topology_transactional_id_in_the_class_config_names_the_state(
        zookeeper: DevZookeeper, kazoo: KazooClient, run: Callable[..., Run]) -> None:
    # Given topology.transactional.id in the topology's config instead of a class attribute
    r = run()
    root = f"/tx-{uuid4().hex}"
    with LocalCluster(conf=cluster_conf(zookeeper, root)) as cluster:
        # When it runs to its total
        cluster.submit("named-by-config", ConfIdentifiedGlobalTotal, {"test.run": r.name})
        poll_for(lambda: OpaqueValue(r.store, "total").get() == TOTAL, timeout=30, message="the total")
    # Then the state is under that id, not under the topology's name
    assert kazoo.get_children(root) == ["from-class-conf"]


def test_topology_transactional_id_in_the_submit_conf_names_the_state(
        zookeeper: DevZookeeper, kazoo: KazooClient, run: Callable[..., Run]) -> None:
    # Given topology.transactional.id given at submit time
    r = run()
    root = f"/tx-{uuid4().hex}"
    with LocalCluster(conf=cluster_conf(zookeeper, root)) as cluster:
        cluster.submit("named-by-submit", GlobalTotal,
                       {"test.run": r.name, "topology.transactional.id": "from-submit-conf"})
        poll_for(lambda: OpaqueValue(r.store, "total").get() == TOTAL, timeout=30, message="the total")
    # Then the state is under that id, not under the topology's name
    assert kazoo.get_children(root) == ["from-submit-conf"]


def test_an_unreachable_zookeeper_is_a_reported_coordination_error(run: Callable[..., Run]) -> None:
    # Given transactional state on a port where nothing listens, and a short connection timeout
    r = run()
    port = free_port()
    conf = {"transactional.zookeeper.servers": ["127.0.0.1"], "transactional.zookeeper.port": port,
            "storm.zookeeper.connection.timeout": 1000, "squall.secure": False}
    started = time.monotonic()
    with LocalCluster(conf=conf) as cluster:
        # When the topology starts
        cluster.submit("unreachable", GlobalTotal, {"test.run": r.name})
        # Then the coordinator cannot start, and the error says why, naming the address
        found = poll_for(lambda: [e for e in cluster.errors("unreachable")
                                  if "CoordinationError" in e.error and f"127.0.0.1:{port}" in e.error],
                         timeout=15, message="the CoordinationError")
        assert time.monotonic() - started < 15
        assert "cannot reach ZooKeeper" in found[0].error
        # and nothing ran
        assert not r.partials and not r.commits
