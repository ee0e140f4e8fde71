"""Self-regulation on a real dev cluster (issue 50; Heron's Dhalion): at a fixed input
rate, a bolt that is the bottleneck gets executors through rebalance until the spout keeps
up, and fewer when the input drops; a worker killed mid-action loses nothing; a latency
over its target brings max spout pending down in the running workers.  The action log
says why, over REST and `squall autoscale log`."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.cli.devcluster import DevCluster
from squall.testing import poll_for
from tests.cluster.conftest import REPO, TOPOLOGIES, WordCountRun, busy_workers, squall_cli

FAST_ROUNDS = ("topology.autoscale=true", "topology.autoscale.period.secs=1.5", "topology.autoscale.rounds=2",
               "topology.autoscale.settle.rounds=2", "topology.autoscale.quiet.rounds=1000")
EXAMPLE = str(REPO / "examples" / "autoscale" / "sizing.py")


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
    squall_cli(cluster, "submit", EXAMPLE, "--topology", topology, "--name", name, *args)


def _log(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.api("GET", f"topology/{name}/autoscale")


def _acted(cluster: DevCluster, name: str) -> dict[str, Any] | None:
    return next((a for a in _log(cluster, name)["actions"] if a["status"] != "noted"), None)


def _judged(cluster: DevCluster, name: str, action_id: int) -> dict[str, Any] | None:
    action = next(a for a in _log(cluster, name)["actions"] if a["id"] == action_id)
    return action if action["status"] in ("helped", "undone", "failed") else None


def _executors(cluster: DevCluster, name: str, component: str) -> int:
    return len(cluster.api("GET", f"topology/{name}/component/{component}")["executorStats"])


def _found(cluster: DevCluster, name: str, policy: str, component: str, status: str) -> dict[str, Any] | None:
    actions = _log(cluster, name)["actions"]
    wanted = (policy, component, status)
    return next((a for a in actions if (a["policy"], a["component"], a["status"]) == wanted), None)


@pytest.mark.timeout(300)  # a scale-up or two, a kill, a scale-down: rounds of 1.5 s each
def test_a_slow_bolt_is_scaled_up_to_keep_up_then_down_when_the_input_drops_and_a_kill_loses_nothing(
        cluster: DevCluster, tmp_path: Path) -> None:
    run = WordCountRun(tmp_path / "wc", sentences=9000)
    rate = run.dir / "rate"
    rate.write_text("150")  # one and a half times what one executor of the split carries
    args = [a for kv in (*FAST_ROUNDS[:-1], "topology.autoscale.quiet.rounds=3", f"squall.test.dir={run.dir}")
            for a in ("--conf", kv)]
    squall_cli(cluster, "submit", str(TOPOLOGIES / "stepped_wordcount.py"), "--name", "stepped", *args)
    act = poll_for(lambda: _acted(cluster, "stepped"), timeout=90, interval=0.5,
                   message="self-regulation acted")
    assert act["policy"] == "scale up" and act["component"] == "split"
    assert "overloaded" in act["symptom"] and "waiting" in act["diagnosis"]  # sleeps: not CPU bound
    assert 2 <= act["resolution"]["executors"]["split"] <= 8  # never past its eight tasks
    # A fault mid-action: the worker the rebalance moved the split into is killed while the
    # action is judged.  The round with it missing is not judged, and nothing is lost.
    poll_for(lambda: _executors(cluster, "stepped", "split") == act["resolution"]["executors"]["split"],
             timeout=60, message="rebalanced")
    for pid in busy_workers(cluster, "stepped").values():
        os.kill(pid, signal.SIGKILL)
    # Raised until the split keeps up: the spout's trees acked as fast as the input comes.
    kept_up = poll_for(lambda: next((a for a in _log(cluster, "stepped")["actions"]
                                     if a["policy"] == "scale up" and a["status"] == "helped"
                                     and a["after"]["throughput"] >= 0.9 * 150
                                     and a["after"]["capacity"] < 0.8), None),
                       timeout=150, interval=0.5, message="the split raised until the spout keeps up")
    grown = kept_up["resolution"]["executors"]["split"]
    # The input drops to a tenth: the split idles, and is scaled down after the quiet rounds.
    rate.write_text("15")
    down = poll_for(lambda: _found(cluster, "stepped", "scale down", "split", "helped"), timeout=120,
                    interval=0.5, message="the split scaled down")
    assert down["resolution"]["executors"]["split"] < grown
    assert "idle" in down["symptom"] and "over-provisioned" in down["diagnosis"]
    # Every sentence the spout took was acked (replays after the kill included), each word counted.
    (run.dir / "paused").unlink(missing_ok=True)
    rate.write_text("0")
    poll_for((run.dir / "paused").exists, timeout=30, message="the spout paused")  # nothing more leaves
    emitted = lambda: {int(x) for x in (run.dir / "emitted.log").read_text().split()}  # noqa: E731
    poll_for(lambda: emitted() <= run.acked(), timeout=60, message="every sentence taken acked")
    taken = emitted()
    assert len(taken) > 500
    expected = Counter(w for i in taken for w in run.sentences[i].split())
    assert run.counts() == expected
    said = squall_cli(cluster, "autoscale", "log", "stepped").stdout
    assert "self-regulation of stepped: enabled" in said and "scale up  split  helped" in said
    assert "scale down  split  helped" in said and "under-provisioned, waiting" in said
    # Switched off at run time: the log says so.
    assert "disabled" in squall_cli(cluster, "autoscale", "disable", "stepped").stdout
    assert _log(cluster, "stepped")["enabled"] is False
    refused = squall_cli(cluster, "autoscale", "resize", "stepped", check=False)
    assert refused.returncode != 0 and "invalid choice" in refused.stderr
    squall_cli(cluster, "kill", "stepped", "-w", "0")


def test_a_latency_over_target_brings_max_spout_pending_down_in_the_running_workers(
        cluster: DevCluster) -> None:
    _submit(cluster, "queueing", "QueueingTopology", "topology.autoscale.latency.p99.ms=60")
    act = poll_for(lambda: _acted(cluster, "queueing"), timeout=90, interval=0.5,
                   message="self-regulation acted")
    assert act["policy"] == "max spout pending" and "over the 60 ms target" in act["symptom"]
    lowered = act["resolution"]["max_pending"]["numbers"]
    assert 1 <= lowered < 2000
    # The running spout takes it without a relaunch: the same worker, the new bound in force.
    poll_for(lambda: cluster.api("GET", "topology/queueing/component/numbers")["executorStats"][0]
             .get("maxSpoutPending") == lowered, timeout=30, message="the spout's max spout pending set")
    judged = poll_for(lambda: _judged(cluster, "queueing", act["id"]), timeout=60, interval=0.5,
                      message="the action judged")
    assert judged["status"] == "helped", judged
    assert judged["after"]["p99_ms"] < judged["before"]["p99_ms"] * 0.7
    log = "".join(p.read_text(errors="replace") for p in cluster.root.glob("**/queueing-*/*/worker.log"))
    assert log.count("worker process started") == 1 and "max spout pending set by self-regulation" in log
