from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squall import FakeClock, LocalCluster
from squall.cluster.zookeeper import DevZookeeper, free_port


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as c:
        yield c


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_cluster(fake_clock: FakeClock) -> Iterator[LocalCluster]:
    with LocalCluster(clock=fake_clock) as c:
        yield c


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[DevZookeeper]:
    """One embedded ZooKeeper server of its own, on a free port."""
    zk = DevZookeeper(free_port(), tmp_path / "zk", tmp_path / "zk.log")
    zk.start()
    yield zk
    zk.stop()
