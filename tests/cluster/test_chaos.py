"""Chaos: kill workers, a whole node, the leading nimbus, ZooKeeper itself,
while a reliable spout feeds the cluster; nothing is lost."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from typing import Any

from squall.testing import poll_for
from tests.cluster.conftest import WordCountRun, busy_workers
from tests.helpers import stay


def test_sigkill_random_workers_loses_nothing(make_cluster: Any, tmp_path: Path) -> None:
    # Given a word count fed at a steady rate on 2 nodes, 4 workers
    cluster = make_cluster(supervisors=2, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=2500)
    run.submit(cluster, "chaos", "topology.workers=4", "squall.test.rate=400")
    poll_for(lambda: len(cluster.worker_pids()) == 4, timeout=30, message="4 workers up")
    rng = random.Random(5)
    killed = []
    # When a random worker is SIGKILLed four times, mid-stream
    for _ in range(4):
        poll_for(lambda: len(cluster.worker_pids()) == 4, timeout=30, message="all workers back")
        before = len(run.acked())
        poll_for(lambda b=before: len(run.acked()) > b + 50, timeout=30, message="processing goes on")
        slot, pid = rng.choice(sorted(busy_workers(cluster, "chaos").items()))
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        # the supervisor notices and starts a new worker on the same slot
        poll_for(lambda s=slot, p=pid: cluster.worker_pids().get(s) not in (None, p), timeout=30,
                 message=f"worker on {slot} restarted")
    # Then every sentence is acked (at least once) and none is lost
    poll_for(run.done, timeout=90, message="all sentences acked")
    assert run.counts() == run.expected
    assert not set(killed) & set(cluster.worker_pids().values())


def test_killing_a_whole_node_moves_its_executors(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=2, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=2000)
    run.submit(cluster, "node", "topology.workers=2", "squall.test.rate=300")
    poll_for(lambda: len(cluster.worker_pids()) == 2, timeout=30, message="2 workers up")
    poll_for(lambda: len(run.acked()) > 100, timeout=30, message="processing started")
    nodes = {w["node"] for w in cluster.api("GET", "topologies/node")["workers"]}
    assert len(nodes) == 2
    # When supervisor 0 and its workers die at once (the machine is gone)
    cluster.kill_supervisor_node(0)
    # Then nimbus reassigns its executors to the other node, and processing goes on
    def moved() -> bool:
        workers = cluster.api("GET", "topologies/node")["workers"]
        return len({w["node"] for w in workers}) == 1 and all(w["alive"] for w in workers)

    poll_for(moved, timeout=60, message="executors reassigned to the surviving node")
    poll_for(run.done, timeout=90, message="all sentences acked")
    assert run.counts() == run.expected


def test_leader_nimbus_dies_a_standby_takes_over(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=1, slots=3, nimbuses=2)
    run = WordCountRun(tmp_path / "wc", sentences=1500)
    run.submit(cluster, "ha", "squall.test.rate=300")
    poll_for(lambda: len(run.acked()) > 100, timeout=30, message="processing started")
    leader = cluster.api("GET", "cluster")["leader"]
    index = cluster.nimbus_urls().index(leader)
    # When the leader is SIGKILLed
    cluster.kill_process(f"nimbus-{index}")
    # Then workers keep processing while no nimbus leads
    before = len(run.acked())
    poll_for(lambda: len(run.acked()) > before + 100, timeout=30, message="processing without nimbus")
    # and the standby takes over, topologies and code intact
    other = cluster.nimbus_urls()[1 - index]
    poll_for(lambda: cluster.api("GET", "cluster", url=other)["leader"] == other, timeout=30,
             message="the standby leads")
    assert [t["name"] for t in cluster.api("GET", "topologies", url=other)] == ["ha"]
    # and a submission through the CLI (seeds list both) reaches it
    second = WordCountRun(tmp_path / "wc2", sentences=200)
    second.submit(cluster, "after")
    poll_for(second.done, timeout=60, message="the new topology ran")
    poll_for(run.done, timeout=60, message="the first topology finished")
    assert run.counts() == run.expected and second.counts() == second.expected


def test_zookeeper_restart_is_survived(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=1, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=1500)
    run.submit(cluster, "zk", "squall.test.rate=300")
    poll_for(lambda: len(run.acked()) > 100, timeout=30, message="processing started")
    # When ZooKeeper goes down for a few seconds and comes back
    cluster.zk.stop()
    before = len(run.acked())
    poll_for(lambda: len(run.acked()) > before + 100, timeout=30, message="processing without ZooKeeper")
    cluster.start_zookeeper()
    # Then the daemons reconnect: nimbus leads again, the supervisor is registered,
    # a new topology can be submitted and both finish exactly
    poll_for(lambda: _leading(cluster), timeout=60, message="nimbus leads again")
    second = WordCountRun(tmp_path / "wc2", sentences=200)
    second.submit(cluster, "after-zk")
    poll_for(second.done, timeout=60, message="the new topology ran")
    poll_for(run.done, timeout=60, message="the first topology finished")
    assert run.counts() == run.expected and second.counts() == second.expected


def _leading(cluster: Any) -> bool:
    try:
        info = cluster.api("GET", "cluster")
    except OSError:
        return False
    return bool(info["leader"]) and len(info["supervisors"]) == 1


def test_supervisor_restart_leaves_healthy_workers_running(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=1, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=1500)
    run.submit(cluster, "keep", "topology.workers=2", "squall.test.rate=300")
    poll_for(lambda: len(cluster.worker_pids()) == 2, timeout=30, message="2 workers up")
    pids = cluster.worker_pids()
    # When the supervisor is stopped (SIGTERM, as systemd restarts it) and started again
    cluster.kill_process("supervisor-0", sig="term")
    assert stay(lambda: cluster.worker_pids() == pids, 1.0)
    cluster.start_supervisor(0)
    poll_for(lambda: len(cluster.api("GET", "cluster")["supervisors"]) == 1, message="supervisor back")
    before = len(run.acked())
    poll_for(lambda: len(run.acked()) > before + 100, timeout=30, message="processing goes on")
    # Then the same worker processes still run
    assert cluster.worker_pids() == pids
    poll_for(run.done, timeout=60, message="all sentences acked")
    assert run.counts() == run.expected
