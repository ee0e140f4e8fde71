from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squall import FakeClock, LocalCluster
from squall.cluster.zookeeper import DevZookeeper, free_port
from tests import leaks


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Every test: no thread, child process or file descriptor it started is left (tests/leaks.py)."""
    yield from leaks.check()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object]) -> Iterator[None]:
    """A module- or session-scoped fixture set up during a test (``request.getfixturevalue``):
    what it starts is its own, ended by its own teardown, not the test's leak."""
    if fixturedef.scope == "function" or leaks.current is None:
        return (yield)
    before = leaks.Snapshot()
    try:
        return (yield)
    finally:
        leaks.absorb(before)


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
