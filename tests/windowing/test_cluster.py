"""A windowed bolt on the dev cluster: ZooKeeper, nimbus, two supervisors,
two worker processes, ZeroMQ between them, real ackers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from squall.testing import poll_for
from tests.cluster.conftest import squall_cli

pytestmark = pytest.mark.timeout(90)
TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "windowed_ids.py"
COUNT = 2000


def windows(directory: Path) -> list[list[Any]]:
    return [json.loads(line) for path in directory.glob("windows-*.log")
            for line in path.read_text().splitlines() if line.strip()]


def acked(directory: Path) -> set[int]:
    path = directory / "acked.log"
    return {int(x) for x in path.read_text().split()} if path.exists() else set()


def test_tumbling_windows_across_two_workers_ack_every_tuple(make_cluster: Any, tmp_path: Path) -> None:
    # Given a dev cluster of 2 supervisors and a windowed bolt of 2 tasks over 2 workers
    cluster = make_cluster(supervisors=2, slots=1)
    run = tmp_path / "run"
    run.mkdir()
    squall_cli(cluster, "submit", str(TOPOLOGY), "--name", "windows", "--conf", "topology.workers=2",
               "--conf", f"squall.test.dir={run}", "--conf", f"squall.test.count={COUNT}")
    # Then every tuple is windowed, expires and is acked: none is left pending
    poll_for(lambda: len(acked(run)) == COUNT, timeout=45, message=f"{COUNT} tuples acked")
    got = windows(run)
    seen = [n for w in got for n in w[2]]
    assert set(seen) == set(range(COUNT))
    # each tuple in exactly one tumbling window of its task (no replays in a quiet run)
    assert len(seen) == COUNT
    # windows are 1 s of epoch time, from both tasks, in two worker processes on two nodes
    assert {w[4] - w[3] for w in got} == {1000}
    assert all(abs(w[4] - time.time() * 1000) < 120_000 for w in got)
    assert len({w[0] for w in got}) == 2
    assert len({w[1] for w in got}) == 2
    info = cluster.api("GET", "topologies/windows")
    assert len({w["node"] for w in info["workers"]}) == 2
