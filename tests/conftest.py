from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squall import FakeClock, LocalCluster
from squall.cluster.zookeeper import DevZookeeper
from squall.runtime.ports import free_port
from tests import leaks


def pytest_configure() -> None:
    leaks.start_singletons()


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Every test: no thread, child process or file descriptor it started is left (tests/leaks.py)."""
    yield from leaks.check()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object]) -> Iterator[None]:
    """A module- or session-scoped fixture owns what its setup starts (tests/leaks.py)."""
    if fixturedef.scope == "function":
        return (yield)
    leaks.fixture_setting_up(fixturedef)
    try:
        return (yield)
    finally:
        leaks.fixture_set_up(fixturedef)


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[object]) -> None:
    """After its teardown, a module- or session-scoped fixture has left nothing behind."""
    if fixturedef.scope != "function":
        leaks.fixture_torn_down(fixturedef, fixturedef.argname)


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
