from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall import FakeClock, LocalCluster
from squall.cluster.zookeeper import DevZookeeper
from squall.runtime.ports import free_port
from tests import leaks

# The test files that take longest (a cluster under faults, chaos, a Spark server: 20 s to
# 5 min each, measured in CI), longest first.  With a file per xdist process at a time
# (--dist loadfile), they are handed out first, and the files of short tests fill in
# after: one begun last would run on alone while the other process idles.  The other
# files follow, those with the most tests first (xdist's own order, which
# pytest_configure turns off so that this one stands: not in pyproject.toml, whose hash
# is ops/bootstrap.sh's stamp of an installed .venv).  An entry out of date costs only
# balance.
LONGEST_FIRST = (
    "partitions/test_faults_network", "partitions/test_faults_links", "partitions/test_faults_process",
    "cluster/test_chaos", "cluster/test_transactional_cluster", "spark/test_spark_bolt",
    "state/test_stateful_cluster", "cluster/test_env_build_sandbox", "cluster/test_drpc_owners_cluster",
    "flux/test_cluster", "spark/test_spark_cluster", "cli/test_devcluster_signals", "cluster/test_cluster",
    "contrib/redis/test_exactly_once_cluster", "cluster/test_trident_chaos", "cluster/test_environments",
    "cluster/test_drpc_cluster", "cluster/test_key_rotation", "cluster/test_shared_cluster", "test_compiled",
    "cluster/test_log_levels", "security/test_hostile_api", "windowing/test_stateful_cluster",
    "ui/test_ui_browser", "spark/test_server", "cluster/test_transactional_state",
    "cli/test_readme_quickstart", "cli/test_readme_sections", "multilang/test_failures",
    "cluster/test_hostile_frames", "cluster/test_error_traces", "cli/test_cli_tables_cluster",
    "windowing/test_cluster", "streams/test_streams_cluster", "cluster/test_health_check",
)


def pytest_configure(config: pytest.Config) -> None:
    leaks.start_singletons()
    if hasattr(config.option, "loadscopereorder"):  # xdist's own order would undo LONGEST_FIRST's
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files in the order above, each file's tests in their own order (a stable sort)."""
    rank = {f"tests/{name}.py": i for i, name in enumerate(LONGEST_FIRST)}
    size = Counter(item.nodeid.split("::", 1)[0] for item in items)

    def order(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank)), -size[path]

    items.sort(key=order)


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
