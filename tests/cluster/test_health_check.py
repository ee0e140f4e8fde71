"""Storm's node health checks on the dev cluster: a node whose script reports ERROR takes
no new workers (a new topology's go to the healthy node), and takes them again once its
check passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squall.testing import poll_for
from tests.cluster.conftest import WordCountRun

pytestmark = pytest.mark.timeout(180)


def test_a_node_failing_its_health_check_takes_no_new_workers(make_cluster: Any, tmp_path: Path) -> None:
    checks, flag = tmp_path / "checks", tmp_path / "supervisor-1-sick"
    checks.mkdir()
    script = checks / "disk.sh"
    script.write_text(f'#!/bin/sh\ncase "$SQUALL_LOCAL_DIR" in *supervisor-1) '
                      f'[ -e {flag} ] && echo "ERROR: disk full on $SQUALL_NODE";; esac\nexit 0\n')
    script.chmod(0o755)
    flag.touch()
    cluster = make_cluster(supervisors=2, slots=2, conf={"storm.health.check.dir": str(checks)})

    def health() -> dict[str, Any]:
        return {s["host"] + ":" + s["id"]: s for s in cluster.api("GET", "supervisor/summary")["supervisors"]}

    sick = poll_for(lambda: [s for s in health().values() if not s["healthy"]], 30, "the failing node")
    assert len(sick) == 1 and "ERROR: disk full" in sick[0]["health"]
    run = WordCountRun(tmp_path / "wc", sentences=200)
    run.submit(cluster, "hc", "topology.workers=2", "squall.test.rate=200")
    workers = poll_for(lambda: cluster.api("GET", "topologies/hc")["workers"], 60, "the workers placed")
    assert len(workers) == 2 and {w["node"] for w in workers} == {s["id"] for s in health().values()
                                                                   if s["healthy"]}
    poll_for(run.done, 120, "all sentences acked")
    assert run.counts() == run.expected
    flag.unlink()
    poll_for(lambda: all(s["healthy"] for s in health().values()), 30, "the node healthy again")
