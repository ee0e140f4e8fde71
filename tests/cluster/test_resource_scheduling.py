"""The resource-aware scheduler on a dev cluster (docs/scheduling.md): one supervisor
offering 1600 MB.  A topology whose components declare memory lands in the workers the
packing says, each with its memory limit; one that cannot fit is not scheduled and says
why; a worker whose bolt holds more than its limit is killed and restarted, saying why in
its topology's errors, its log and the supervisor's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.cli.devcluster import DevCluster
from squall.nimbus.packing import WORKER_BASE_MB
from squall.testing import poll_for
from tests.cluster.conftest import TOPOLOGIES, squall_cli, worker_logs

pytestmark = pytest.mark.timeout(180)
SIZED = str(TOPOLOGIES / "sized.py")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = DevCluster(tmp_path_factory.mktemp("ras") / "c", supervisors=1, slots=4, drpc=False,
                   conf={"supervisor.run.worker.as.user": False, "supervisor.memory.capacity.mb": 1600,
                         "supervisor.cpu.capacity": 200, "supervisor.monitor.frequency.secs": 0.5,
                         "supervisor.worker.memory.limit.samples": 2,
                         "supervisor.worker.shutdown.sleep.secs": 2})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def submit(cluster: DevCluster, topology: str, name: str, *conf: str) -> None:
    squall_cli(cluster, "submit", SIZED, "--topology", topology, "--name", name,
               *(c for kv in conf for c in ("--conf", kv)))


def test_packing_refusal_and_a_worker_over_its_memory_limit(cluster: DevCluster, tmp_path: Path) -> None:
    # Given a topology of 3 executors of 300 MB, workers of at most 700 MB
    submit(cluster, "Packed", "packed")
    # Then it runs in the two workers the packing says, with their limits
    workers = poll_for(lambda: cluster.api("GET", "topologies/packed")["workers"], 60, "packed placed")
    assert sorted(w["memory_mb"] for w in workers) == [300 + WORKER_BASE_MB, 600 + WORKER_BASE_MB]
    assert sorted(w["cpu"] for w in workers) == [20, 30]
    # A worker that holds more than declared (10 MB + the allowance) after its first tuple
    submit(cluster, "Hogging", "hogging", f"squall.test.dir={tmp_path}", "squall.test.hog.mb=400")
    # And a topology needing a worker larger than the node has left
    submit(cluster, "TooBig", "toobig")

    # Then the one too big is not scheduled and its REST answer says why
    def info() -> str:
        summary = cluster.api("GET", "topology/summary")["topologies"]
        return next(t.get("schedulerInfo") or "" for t in summary if t["name"] == "toobig")
    reason = poll_for(lambda: "largest free node" in info() and info(), 60, "toobig refused")
    assert "needs 1 worker of 596 MB" in reason and "MB free for a worker of 596 MB" in reason
    assert cluster.api("GET", "topologies/toobig")["workers"] == []
    nimbus_log = "".join(p.read_text() for p in (cluster.root / "logs").glob("nimbus*.log"))
    assert "topology not scheduled: resources short" in nimbus_log and "596 MB" in nimbus_log

    # And the hog is killed and restarted, saying why in its topology's errors
    def kill_errors() -> list[dict[str, Any]]:
        errors = cluster.api("GET", "topologies/hogging")["errors"]
        return [e for e in errors if "over its memory limit" in e["error"]]
    errors = poll_for(kill_errors, 60, "the hog's kill reported")
    assert {e["component"] for e in errors} == {"hog", "ticks"}
    assert f"limit {10 * 2 + WORKER_BASE_MB:g} MB" in errors[0]["error"]
    assert (tmp_path / "hogged").exists()
    # in its worker's log and the supervisor's
    assert "over its memory limit" in worker_logs(cluster)
    supervisor_log = "".join(p.read_text() for p in (cluster.root / "logs").glob("supervisor*.log"))
    assert "worker over its memory limit: killing and restarting" in supervisor_log
    # and its restarted worker runs on
    poll_for(lambda: [w for w in cluster.api("GET", "topologies/hogging")["workers"] if w["alive"]], 60,
             "the hog's worker running again")
    # The supervisor's REST answer counts what the workers hold
    (node,) = cluster.api("GET", "supervisor/summary")["supervisors"]
    assert node["totalMem"] == 1600 and node["totalCpu"] == 200
    assert node["usedMem"] == 300 + 600 + 20 + 3 * WORKER_BASE_MB
    assert node["availMem"] == 1600 - node["usedMem"]
