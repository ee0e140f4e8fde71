"""Self-regulation on a real dev cluster (issue 50; Heron's Dhalion): a bolt that is the
bottleneck gets more executors through rebalance, the action is judged by the throughput
it bought, and a latency over its target brings max spout pending down in the running
workers; the action log says why, over REST and `squall autoscale log`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.cli.devcluster import DevCluster
from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, squall_cli

FAST_ROUNDS = ("topology.autoscale=true", "topology.autoscale.period.secs=1.5", "topology.autoscale.rounds=2",
               "topology.autoscale.settle.rounds=2", "topology.autoscale.quiet.rounds=1000")
TOPOLOGY = str(TOPOLOGIES / "self_sizing.py")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = DevCluster(Path(tmp_path_factory.mktemp("autoscale")) / "c", supervisors=1, slots=2,
                   conf={"supervisor.run.worker.as.user": False})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _submit(cluster: DevCluster, name: str, topology: str, *conf: str) -> None:
    args = [a for kv in (*FAST_ROUNDS, *conf) for a in ("--conf", kv)]
    squall_cli(cluster, "submit", TOPOLOGY, "--topology", topology, "--name", name, *args)


def _log(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.api("GET", f"topology/{name}/autoscale")


def _acted(cluster: DevCluster, name: str) -> dict[str, Any] | None:
    return next((a for a in _log(cluster, name)["actions"] if a["status"] != "noted"), None)


def _judged(cluster: DevCluster, name: str, action_id: int) -> dict[str, Any] | None:
    action = next(a for a in _log(cluster, name)["actions"] if a["id"] == action_id)
    return action if action["status"] in ("helped", "undone", "failed") else None


def _executors(cluster: DevCluster, name: str, component: str) -> int:
    return len(cluster.api("GET", f"topology/{name}/component/{component}")["executorStats"])


def test_a_bottleneck_bolt_is_scaled_up_and_the_log_says_why(cluster: DevCluster) -> None:
    _submit(cluster, "slow", "SlowBoltTopology")
    act = poll_for(lambda: _acted(cluster, "slow"), timeout=90, interval=0.5, message="self-regulation acted")
    assert act["policy"] == "scale up" and act["component"] == "waits"
    assert "overloaded" in act["symptom"] and "waiting" in act["diagnosis"]  # sleeps: not CPU bound
    grown = act["resolution"]["executors"]["waits"]
    assert 2 <= grown <= 4  # never past its four tasks
    poll_for(lambda: _executors(cluster, "slow", "waits") == grown, timeout=60, message="rebalanced")
    judged = poll_for(lambda: _judged(cluster, "slow", act["id"]), timeout=90, interval=0.5,
                      message="the action judged")
    assert judged["status"] == "helped", judged  # more executors of a waiting bolt carry more
    assert judged["after"]["throughput"] > judged["before"]["throughput"] * 1.3
    said = squall_cli(cluster, "autoscale", "log", "slow").stdout
    assert "self-regulation of slow: enabled" in said and "scale up  waits  helped" in said
    assert f"resolution: executors waits={grown}" in said and "under-provisioned, waiting" in said
    # Switched off at run time: the log says so, and nothing more is done.
    assert "disabled" in squall_cli(cluster, "autoscale", "disable", "slow").stdout
    assert _log(cluster, "slow")["enabled"] is False
    refused = squall_cli(cluster, "autoscale", "resize", "slow", check=False)
    assert refused.returncode != 0 and "invalid choice" in refused.stderr
    squall_cli(cluster, "kill", "slow", "-w", "0")


def test_a_latency_over_target_brings_max_spout_pending_down_in_the_running_workers(
        cluster: DevCluster) -> None:
    _submit(cluster, "queueing", "QueueingTopology", "topology.autoscale.latency.p99.ms=60")
    act = poll_for(lambda: _acted(cluster, "queueing"), timeout=90, interval=0.5,
                   message="self-regulation acted")
    assert act["policy"] == "max spout pending" and "over the 60 ms target" in act["symptom"]
    lowered = act["resolution"]["max_pending"]["numbers"]
    assert 1 <= lowered < 400
    # The running spout takes it without a relaunch: the same worker, the new bound in force.
    poll_for(lambda: cluster.api("GET", "topology/queueing/component/numbers")["executorStats"][0]
             .get("maxSpoutPending") == lowered, timeout=30, message="the spout's max spout pending set")
    judged = poll_for(lambda: _judged(cluster, "queueing", act["id"]), timeout=60, interval=0.5,
                      message="the action judged")
    assert judged["status"] == "helped", judged
    assert judged["after"]["p99_ms"] < judged["before"]["p99_ms"] * 0.7
    log = "".join(p.read_text(errors="replace") for p in cluster.root.glob("**/queueing-*/*/worker.log"))
    assert log.count("worker process started") == 1 and "max spout pending set by self-regulation" in log
