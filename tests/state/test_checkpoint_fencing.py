"""Two checkpoint spouts of one topology at once (a worker whose slot moved,
still running beside its replacement): the newer one supersedes the older,
which stores no record and emits no barrier or data from then on, and the
committed state stays exact.  Two LocalClusters stand for the two workers;
the record lives in a real (embedded) ZooKeeper, as on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squall.cluster.zookeeper import DevZookeeper
from squall.local.cluster import LocalCluster
from squall.testing import poll_for
from tests.helpers import keyring_conf
from tests.state.test_local_stateful import EXPECTED, committed, topology

pytestmark = pytest.mark.timeout(120)


def spout_gauges(cluster: LocalCluster) -> dict[str, Any]:
    tasks = cluster.metrics("count").get("sentences", {})  # the checkpointed spout is the checkpoint spout
    return next(iter(tasks.values()), {}).get("gauges", {})


def test_a_second_checkpoint_spout_supersedes_the_first(tmp_path: Path, zookeeper: DevZookeeper) -> None:
    db = tmp_path / "state.sqlite"
    conf = {"transactional.zookeeper.servers": ["127.0.0.1"], "transactional.zookeeper.port": zookeeper.port,
            **keyring_conf(zookeeper.data_dir.parent)}
    with LocalCluster(conf=conf) as old, LocalCluster(conf=conf) as new:
        # Given a stateful word count that has committed checkpoints
        old.submit("count", topology(db))
        poll_for(lambda: sum(committed(db).values()) > 500, timeout=60, message="a commit")
        assert spout_gauges(old) == {"epoch": 1, "standby": 0}
        # When a second instance of the topology starts on the same state
        new.submit("count", topology(db))
        # Then the first finds itself superseded at its next checkpoint and stands by
        poll_for(lambda: spout_gauges(old).get("standby") == 1, timeout=60,
                 message="the first checkpoint spout standing by")
        assert spout_gauges(new) == {"epoch": 2, "standby": 0}
        # and the second alone carries the count to its exact end
        poll_for(lambda: sum(committed(db).values()) >= sum(EXPECTED.values()), timeout=60,
                 message="every word committed")
        assert committed(db) == EXPECTED
        assert spout_gauges(old)["standby"] == 1
