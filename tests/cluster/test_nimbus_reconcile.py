"""Nimbus's reconciliation against a real ZooKeeper: a kill racing the monitor's
pass leaves no assignment behind, and an assignment whose topology is gone is
cleaned up, so its slots serve the next topology.

Found by ``benchmarks/cluster.py``: after a few submit-and-kill rounds a dev
cluster ran nothing more, every new topology assigned ``slots=[]``, because
a killed topology's assignment had been written back after its removal.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall import config as config_mod
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import DevZookeeper, start_client
from squall.nimbus.control import TopologyControl
from tests.helpers import IdlePipeline, keyring_conf

NODE = "node-a"
PORTS = [6700, 6701]  # a supervisor's slots as it registers them: numbers only, nothing binds them


@pytest.fixture
def nimbus(zookeeper: DevZookeeper, tmp_path: Path) -> Iterator[TopologyControl]:
    conf = config_mod.merge({"storm.zookeeper.port": zookeeper.port, **keyring_conf(tmp_path)})
    client = start_client(conf)
    state = ClusterState(client, conf["storm.zookeeper.root"])
    state.setup()
    state.register_supervisor(NODE, {"node": NODE, "host": "127.0.0.1", "ports": PORTS, "time": 0})
    try:
        yield TopologyControl(state, conf)
    finally:
        client.stop()
        client.close()


def add_topology(control: TopologyControl, topology_id: str, workers: int = 2) -> None:
    """A topology as submit records it, then reconciled as submit does."""
    control.state.put_topology({
        "id": topology_id, "name": topology_id.split("-")[0], "status": "active",
        "definition": IdlePipeline.definition().to_dict(), "conf": {"topology.workers": workers},
        "submitted": 0, "num_workers": workers, "owner": None})
    control.reconcile(topology_id)


def slots(control: TopologyControl, topology_id: str) -> list[tuple[str, int]]:
    assignment = control.state.assignment(topology_id) or {"workers": []}
    return sorted((w["node"], w["port"]) for w in assignment["workers"])


def test_a_kill_during_the_monitors_pass_leaves_no_assignment_behind(nimbus: TopologyControl) -> None:
    # Given a running topology on both slots
    add_topology(nimbus, "first-1")
    assert slots(nimbus, "first-1") == [(NODE, p) for p in PORTS]
    # And the monitor's pass over it, held after it read the topology and before it
    # reads the assignment (where a kill may come in between)
    state = nimbus.state
    read_assignment, reading, go_on = state.assignment, threading.Event(), threading.Event()
    monitor: list[threading.Thread] = []

    def held(topology_id: str) -> Any:
        if monitor and threading.current_thread() is monitor[0]:
            reading.set()
            go_on.wait(10)
        return read_assignment(topology_id)

    state.assignment = held  # type: ignore[method-assign]
    monitor.append(threading.Thread(target=nimbus.reconcile, args=("first-1",)))
    monitor[0].start()
    assert reading.wait(10)
    # When the topology is killed (wait 0: removed at once) while the pass is held
    killer = threading.Thread(target=nimbus.kill, args=("first", 0))
    killer.start()
    killer.join(0.5)  # a kill that does not wait for the pass is done by now
    go_on.set()
    monitor[0].join(10)
    killer.join(10)
    state.assignment = read_assignment  # type: ignore[method-assign]
    # Then the topology and its assignment are both gone
    assert state.topology("first-1") is None
    assert "first-1" not in state.assignment_ids()
    # And the next topology gets the slots
    add_topology(nimbus, "second-2")
    assert slots(nimbus, "second-2") == [(NODE, p) for p in PORTS]


def test_an_orphan_assignment_is_removed_and_its_slots_serve_the_next_topology(
        nimbus: TopologyControl) -> None:
    # Given an assignment left behind by a topology that no longer exists, on both slots
    workers = [{"node": NODE, "port": p, "executors": [[1, 1]], "since": 0} for p in PORTS]
    nimbus.state.put_assignment("gone-1", {"version": 1, "time": 0, "hosts": {NODE: "127.0.0.1"},
                                           "active": True, "workers": workers})
    # And a topology submitted after it, which finds no free slot
    add_topology(nimbus, "next-2")
    assert slots(nimbus, "next-2") == []
    # When the monitor's passes run
    nimbus.reconcile_all()
    nimbus.reconcile_all()
    # Then the orphan is gone, and the topology runs on its slots
    assert nimbus.state.assignment_ids() == ["next-2"]
    assert slots(nimbus, "next-2") == [(NODE, p) for p in PORTS]
