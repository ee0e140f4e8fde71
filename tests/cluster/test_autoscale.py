"""Self-regulation on a real dev cluster (issue 50; Heron's Dhalion): a bolt that is the
bottleneck gets more executors through rebalance, the action is judged by the throughput
it bought, and the action log says why, over REST and `squall autoscale log`."""

from __future__ import annotations

from typing import Any

from squall.cli.devcluster import DevCluster
from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, squall_cli

FAST_ROUNDS = ("topology.autoscale=true", "topology.autoscale.period.secs=1.5", "topology.autoscale.rounds=2",
               "topology.autoscale.settle.rounds=2", "topology.autoscale.quiet.rounds=1000")


def _log(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.api("GET", f"topology/{name}/autoscale")


def _executors(cluster: DevCluster, name: str, component: str) -> int:
    page = cluster.api("GET", f"topology/{name}/component/{component}")
    return len(page["executorStats"])


def test_a_bottleneck_bolt_is_scaled_up_and_the_log_says_why(make_cluster: Any) -> None:
    cluster = make_cluster(supervisors=1, slots=2)
    args = [a for kv in FAST_ROUNDS for a in ("--conf", kv)]
    squall_cli(cluster, "submit", str(TOPOLOGIES / "slow_bolt.py"), "--name", "slow", *args)
    poll_for(lambda: any(a["status"] != "noted" for a in _log(cluster, "slow")["actions"]), timeout=90,
             interval=0.5, message="self-regulation acted")
    act = next(a for a in _log(cluster, "slow")["actions"] if a["status"] != "noted")
    assert act["policy"] == "scale up" and act["component"] == "waits"
    assert "overloaded" in act["symptom"] and "waiting" in act["diagnosis"]  # sleeps: not CPU bound
    grown = act["resolution"]["executors"]["waits"]
    assert 2 <= grown <= 4  # never past its four tasks
    poll_for(lambda: _executors(cluster, "slow", "waits") == grown, timeout=60, message="rebalanced")
    poll_for(lambda: _log(cluster, "slow")["actions"][0]["status"] in ("helped", "undone"), timeout=90,
             interval=0.5, message="the action judged")
    judged = _log(cluster, "slow")["actions"][0]
    assert judged["status"] == "helped", judged  # more executors of a waiting bolt carry more
    assert judged["after"]["throughput"] > judged["before"]["throughput"] * 1.3
    said = squall_cli(cluster, "autoscale", "log", "slow").stdout
    assert "self-regulation of slow: enabled" in said and "scale up  waits  helped" in said
    assert f"resolution: executors waits={grown}" in said and "under-provisioned, waiting" in said
    # Switched off at run time: nothing more is done, and the log says it is off.
    assert "disabled" in squall_cli(cluster, "autoscale", "disable", "slow").stdout
    assert _log(cluster, "slow")["enabled"] is False
    refused = squall_cli(cluster, "autoscale", "resize", "slow", check=False)
    assert refused.returncode != 0 and "invalid choice" in refused.stderr
