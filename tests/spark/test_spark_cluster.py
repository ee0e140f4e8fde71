"""The Spark bolt on a real cluster: the supervisor runs the node's Spark
Connect server, and Spark bolts in two worker processes share it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import psutil
import pytest

from squall.cli.devcluster import DevCluster
from squall.runtime.ports import free_port
from squall.spark.server import SERVER_CLASS
from squall.testing import poll_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "spark" / "enrich.py"


def _server_jvms(root: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "name"]):
        cmdline = proc.info.get("cmdline") or []
        if (any(SERVER_CLASS in part for part in cmdline) and any(str(root) in part for part in cmdline)
                and proc.info.get("name") == "java"):  # not the sandbox around it
            found.append(proc)
    return found


@pytest.mark.timeout(400)
def test_supervisor_runs_one_server_shared_by_spark_bolts_in_two_workers(
        spark_available: None, enrich_example: ModuleType, tmp_path: Path) -> None:
    # Given a one-node cluster whose supervisor runs the node's Spark Connect server
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)  # the workers run as the topology's own user, and see this folder only
    cluster = DevCluster(tmp_path / "cluster", supervisors=1, slots=2, conf={
        "supervisor.worker.shared.dirs": [str(out)],
        "supervisor.spark.connect.enabled": True, "supervisor.spark.connect.port": port,
        "spark.master": "local[2]", "spark.connect.server.conf": {"spark.sql.shuffle.partitions": 2},
    })
    try:
        cluster.start()
        # When the example is submitted with two workers (its two Spark bolt tasks land on both)
        submit = subprocess.run(
            [sys.executable, "-m", "squall.cli", "submit", "--config", str(cluster.config_file),
             str(EXAMPLE), "--name", "enrich", "--conf", f"example.dir={out}",
             "--conf", "example.events=4000",
             "--conf", "topology.workers=2", "--conf", "topology.message.timeout.secs=120",
             "--conf", "spark.bolt.batch.size=500"],
            capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
        assert submit.returncode == 0, submit.stderr
        # Then every event comes out, exactly once, with the reference totals
        poll_for(lambda: len(set(enrich_example.read_totals(out)[1])) >= 4000, 300, "all events written")
        totals, ids = enrich_example.read_totals(out)
        assert sorted(ids) == list(range(4000))
        assert totals == enrich_example.reference_totals(enrich_example.make_events(4000, 1000), 1000)
        # And both workers were told the node's server, and each opened a session on it
        workers = sorted((cluster.supervisor_dir(0) / "workers").glob("*/assignment.json"))
        remotes = {json.loads(w.read_text())["conf"]["spark.node.remote"] for w in workers}
        token = (cluster.supervisor_dir(0) / "spark-connect" / "token").read_text()
        assert remotes == {f"sc://localhost:{port}/;token={token}"}
        artifacts = cluster.supervisor_dir(0) / "workers-artifacts"
        logs = [p.read_text() for p in artifacts.glob("*/*/worker.log")]
        assert len(logs) == 2 and all("Spark Connect session opened" in text for text in logs)
        # And the node runs exactly one Spark JVM, the supervisor's; no worker runs one
        assert len(_server_jvms(cluster.root)) == 1
        if os.geteuid() == 0:  # a root supervisor runs it as a user of its own: UDFs run there
            assert _server_jvms(cluster.root)[0].uids().real != 0
        for pid in cluster.worker_pids().values():
            assert not [c for c in psutil.Process(pid).children(recursive=True) if c.name() == "java"]
    finally:
        cluster.stop()
    assert _server_jvms(cluster.root) == []
