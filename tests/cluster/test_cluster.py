"""The cluster end to end: CLI -> nimbus -> ZooKeeper -> supervisors ->
worker processes -> ZeroMQ, with exact results."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from squall.cli.devcluster import DevCluster
from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, WordCountRun, squall_cli
from tests.helpers import stay


def http(cluster: DevCluster, method: str, path: str, raw: bytes | None) -> tuple[int, Any]:
    response = cluster.request(method, f"{cluster.nimbus_url}/api/v1/{path}", raw)
    return response.status_code, json.loads(response.content)


def test_word_count_on_two_supervisors_and_four_workers_is_exact(make_cluster: Any, tmp_path: Path) -> None:
    # Given a dev cluster of 2 supervisors with 2 slots each, its workers run as the
    # topology's own user (as root, the default)
    run = WordCountRun(tmp_path / "wc", sentences=1000)
    cluster = make_cluster(supervisors=2, slots=2, run_as_users=True,
                           conf={"supervisor.worker.shared.dirs": [str(run.dir)]})
    # When the word count is submitted through the CLI with 4 workers
    run.submit(cluster, "wc", "topology.workers=4")
    # Then every sentence is acked and the counts are exact
    poll_for(run.done, timeout=60, message="all sentences acked")
    assert run.counts() == run.expected
    info = cluster.api("GET", "topologies/wc")
    assert len(info["workers"]) == 4
    assert len({w["node"] for w in info["workers"]}) == 2  # spread over both nodes
    listing = squall_cli(cluster, "list").stdout
    assert "wc" in listing and "active" in listing
    # Each worker is pinned to one core, and the two nodes' workers do not share one
    # (the dev cluster shares this machine's cores out between its supervisors).
    pinned = {key: psutil.Process(pid).cpu_affinity() for key, pid in cluster.worker_pids().items()}
    assert all(len(cores) == 1 for cores in pinned.values()), pinned
    if len(os.sched_getaffinity(0)) >= 2:
        by_node = {i: {c for (j, _), cores in pinned.items() if j == i for c in cores} for i in (0, 1)}
        assert not by_node[0] & by_node[1], pinned


def test_bad_submissions_get_clear_errors_and_change_nothing(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=1, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=10)
    # A topology referencing a class that is not in its code package
    broken = squall_cli(cluster, "submit", str(TOPOLOGIES / "broken.py"), check=False)
    assert broken.returncode == 1
    assert "durable_wordcount:NoSuchBolt" in broken.stderr
    assert cluster.api("GET", "topologies") == []
    # A duplicate name
    run.submit(cluster, "dup")
    again = squall_cli(cluster, "submit", str(TOPOLOGIES / "durable_wordcount.py"), "--name", "dup",
                       "--conf", f"squall.test.dir={run.dir}", check=False)
    assert again.returncode == 1 and "already running" in again.stderr
    assert [t["name"] for t in cluster.api("GET", "topologies")] == ["dup"]
    # Malformed requests to the API
    for raw, fragment in ((b"{not json", "not valid JSON"), (b"[1, 2]", "JSON object"),
                          (b'{"name": "x"}', "topology"),
                          (b'{"name": "bad/name", "topology": {}}', "name"),
                          ((b'{"name": "x", "topology": {"name": "x", "components": [{"name": "s", "kind": '
                            b'"spout", "class": "m:C", "par": 0}]}}'), "par must be")):
        status, body = http(cluster, "POST", "topologies", raw)
        assert status == 400, (raw, body)
        assert fragment in body["error"], (raw, body)
    status, body = http(cluster, "POST", "topologies/nope/kill", b"{}")
    assert status == 404 and "nope" in body["error"]
    status, body = http(cluster, "POST", "topologies/dup/rebalance", b'{"workers": 0}')
    assert status == 400 and "workers" in body["error"]
    assert [t["name"] for t in cluster.api("GET", "topologies")] == ["dup"]


def test_kill_deactivate_activate_through_the_cli(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(supervisors=1, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=100_000)
    run.submit(cluster, "ctl", "squall.test.rate=200")
    poll_for(lambda: len(run.acked()) > 50, timeout=30, message="processing started")
    # A name given in the wrong case: nimbus says which one was meant.
    wrong = squall_cli(cluster, "info", "CTL", check=False)
    assert wrong.returncode != 0 and "did you mean 'ctl'? names are case-sensitive" in wrong.stderr
    squall_cli(cluster, "deactivate", "ctl")
    poll_for(lambda: cluster.api("GET", "topologies/ctl")["status"] == "inactive", message="inactive")
    # once pending tuples drained, nothing more is acked
    poll_for(lambda: _quiet(run), timeout=20, message="acks stop while inactive")
    squall_cli(cluster, "activate", "ctl")
    before = len(run.acked())
    poll_for(lambda: len(run.acked()) > before + 20, timeout=30, message="processing resumed")
    # (Storm's spelling, -w; and what it says is what happens: removed later, not yet)
    said = squall_cli(cluster, "kill", "ctl", "-w", "0").stdout
    assert "deactivated now, removed in 0" in said
    poll_for(lambda: cluster.api("GET", "topologies") == [], timeout=30, message="topology removed")
    poll_for(lambda: not cluster.worker_pids(), timeout=30, message="workers stopped")


def _quiet(run: WordCountRun) -> bool:
    first = len(run.acked())
    return stay(lambda: len(run.acked()) == first, 1.0)


@pytest.mark.parametrize("workers", [2])
def test_rebalance_moves_executors_and_keeps_counting(make_cluster: Any, tmp_path: Path,
                                                      workers: int) -> None:
    cluster = make_cluster(supervisors=2, slots=2)
    run = WordCountRun(tmp_path / "wc", sentences=3000)
    run.submit(cluster, "rb", "topology.workers=1", "squall.test.rate=500")
    poll_for(lambda: len(run.acked()) > 100, timeout=30, message="processing started")
    # A wait that is not a number >= 0 is refused at the call, the topology untouched
    with pytest.raises(OSError, match="wait_secs"):
        cluster.api("POST", "topologies/rb/rebalance", {"wait_secs": -1, "workers": workers})
    assert cluster.api("GET", "topologies/rb")["status"] == "active"
    # Storm's spellings (storm rebalance NAME -w 3 -n 2 -e split=1): the spouts are deactivated
    # first and the move waits 3 s for the tuples in flight, then the topology goes on.
    said = squall_cli(cluster, "rebalance", "rb", "-w", "3", "-n", str(workers), "-e", "split=1").stdout
    assert "spouts deactivated for 3.0 s" in said
    assert cluster.api("GET", "topologies/rb")["status"] == "rebalancing"
    poll_for(lambda: _quiet(run), timeout=20, message="acks stop while the tuples in flight drain")
    assert len(cluster.api("GET", "topologies/rb")["workers"]) == 1  # not moved yet
    poll_for(lambda: len(cluster.api("GET", "topologies/rb")["workers"]) == workers, message="rebalanced")
    assert cluster.api("GET", "topologies/rb")["status"] == "active"
    poll_for(run.done, timeout=60, message="all sentences acked")
    assert run.counts() == run.expected
