"""Transactional state in a real (embedded) ZooKeeper: round trips, sharing
between clients, Storm's server override, and failures that come out as
CoordinationError in bounded time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from squall import config as config_mod
from squall.cluster.transactional_state import ZooKeeperBackend
from squall.cluster.zookeeper import DevZookeeper
from squall.errors import CoordinationError, SerializationError
from squall.runtime.ports import free_port
from squall.testing import poll_for
from tests.helpers import keyring_conf


def tx_conf(zookeeper: DevZookeeper, **extra: Any) -> dict[str, Any]:
    # A unique root per test: a test never sees another's state.
    return config_mod.merge({
        "storm.zookeeper.port": zookeeper.port, "storm.zookeeper.session.timeout": 6000,
        "storm.zookeeper.connection.timeout": 15000, **keyring_conf(zookeeper.data_dir.parent),
    }) | {"transactional.zookeeper.root": f"/tx-{uuid4().hex}", **extra}


@pytest.fixture
def backends(zookeeper: DevZookeeper) -> Iterator[list[ZooKeeperBackend]]:
    """Backends made in a test, closed whatever it did."""
    made: list[ZooKeeperBackend] = []
    yield made
    for backend in made:
        backend.close()


def test_round_trips_nested_paths_and_absent_paths(zookeeper: DevZookeeper,
                                                   backends: list[ZooKeeperBackend]) -> None:
    backends.append(backend := ZooKeeperBackend.for_transactional_conf(tx_conf(zookeeper)))
    state = backend.open("wordcount", "coordinator")
    assert state.get_data("currtx") is None
    assert state.list("meta") == []
    state.set_data("currtx", 12)
    state.set_data("currtx", 13)  # an existing node is overwritten
    state.set_data("meta/12", {"offset": 7, "range": (1, 2), "ok": True, "none": None, "f": 1.5})
    state.set_data("meta/2", "two")
    state.set_data("/partition_3/12/", [1, "x"])  # outer slashes are ignored
    assert state.get_data("currtx") == 13
    assert state.get_data("meta/12") == {"offset": 7, "range": [1, 2], "ok": True, "none": None, "f": 1.5}
    assert state.list("") == ["currtx", "meta", "partition_3"]
    assert state.list("meta") == ["12", "2"]  # sorted names, as Storm's callers sort them numerically
    assert state.get_data("partition_3/12") == [1, "x"]
    # Where it lives: <root>/<transactional id>/<subdir>/<path>
    root = backend.root
    data, _stat = backend.zk.get(f"{root}/wordcount/coordinator/meta/2")
    assert data == b'"two"'
    state.delete("meta")
    assert state.list("meta") == [] and state.get_data("meta/12") is None
    state.delete("meta")  # absent is fine
    state.delete("nothing/here")
    assert state.get_data("currtx") == 13
    # Another id or subdir is another subtree
    assert backend.open("wordcount", "user").get_data("currtx") is None
    assert backend.open("other", "coordinator").list("") == []


def test_unserializable_values_are_refused_and_nothing_is_written(zookeeper: DevZookeeper,
                                                                  backends: list[ZooKeeperBackend]) -> None:
    backends.append(backend := ZooKeeperBackend.for_transactional_conf(tx_conf(zookeeper)))
    state = backend.open("t", "user")
    for value in ({"a": object()}, float("nan"), {1, 2}):
        with pytest.raises(SerializationError, match="meta/1"):
            state.set_data("meta/1", value)
    assert state.get_data("meta/1") is None
    assert backend.zk.exists(f"{backend.root}/t/user/meta") is None  # not even the parent


def test_invalid_ids_subdirs_and_paths_are_value_errors(zookeeper: DevZookeeper,
                                                        backends: list[ZooKeeperBackend]) -> None:
    backends.append(backend := ZooKeeperBackend.for_transactional_conf(tx_conf(zookeeper)))
    for tx_id in ("", "a/b", ".", ".."):
        with pytest.raises(ValueError, match="transactional id"):
            backend.open(tx_id, "user")
    for subdir in ("", "/user", "user/", "a//b", "..", "a/./b"):
        with pytest.raises(ValueError, match="subdir"):
            backend.open("t", subdir)
    assert backend.open("t", "user/partitions").base == f"{backend.root}/t/user/partitions"
    state = backend.open("t", "user")
    for path in ("a//b", "../escape", "a/./b"):
        with pytest.raises(ValueError, match="state path"):
            state.set_data(path, 1)


def test_a_second_client_sees_the_first_ones_writes_after_it_closed(zookeeper: DevZookeeper,
                                                                    backends: list[ZooKeeperBackend]) -> None:
    conf = tx_conf(zookeeper)
    first = ZooKeeperBackend.for_transactional_conf(conf)
    backends.append(first)
    backends.append(second := ZooKeeperBackend.for_cluster_conf(conf))
    first.open("t", "coordinator").set_data("currtx", 5)
    assert second.open("t", "coordinator").get_data("currtx") == 5
    second.open("t", "coordinator").set_data("meta/5", {"n": 1})
    assert first.open("t", "coordinator").get_data("meta/5") == {"n": 1}
    # A restarted worker: the first one is gone, its state is not
    first.close()
    first.close()  # idempotent
    assert not first.zk.connected
    with pytest.raises(CoordinationError, match="closed"):
        first.open("t", "coordinator").get_data("currtx")
    backends.append(third := ZooKeeperBackend.for_transactional_conf(conf))
    state = third.open("t", "coordinator")
    assert (state.get_data("currtx"), state.list("meta")) == (5, ["5"])


def test_a_backend_that_does_not_own_its_client_leaves_it_open(zookeeper: DevZookeeper,
                                                               backends: list[ZooKeeperBackend]) -> None:
    backends.append(owner := ZooKeeperBackend.for_transactional_conf(tx_conf(zookeeper)))
    borrower = ZooKeeperBackend(owner.zk, owner.root, owns_client=False)
    borrower.open("t", "user").set_data("x", 1)
    borrower.close()
    assert owner.open("t", "user").get_data("x") == 1


def test_transactional_servers_override_the_clusters(zookeeper: DevZookeeper,
                                                     backends: list[ZooKeeperBackend]) -> None:
    # storm.zookeeper.* points at nothing: only the override can work
    conf = tx_conf(zookeeper, **{"transactional.zookeeper.servers": ["127.0.0.1"],
                                 "transactional.zookeeper.port": zookeeper.port})
    conf["storm.zookeeper.port"] = free_port()
    conf["storm.zookeeper.servers"] = ["127.0.0.1"]
    backends.append(backend := ZooKeeperBackend.for_transactional_conf(conf))
    backend.open("t", "user").set_data("k", "v")
    assert backend.open("t", "user").get_data("k") == "v"
    # And None means "not set": the storm.zookeeper.* keys apply
    conf = tx_conf(zookeeper, **{"transactional.zookeeper.servers": None,
                                 "transactional.zookeeper.port": None})
    backends.append(fallback := ZooKeeperBackend.for_transactional_conf(conf))
    assert fallback.open("t", "user").list("") == []


def test_nothing_listening_is_a_coordination_error_naming_the_address(tmp_path: Path) -> None:
    port = free_port()
    conf = config_mod.merge({"storm.zookeeper.port": port, "storm.zookeeper.connection.timeout": 2000,
                             **keyring_conf(tmp_path)})
    started = time.monotonic()
    with pytest.raises(CoordinationError, match=f"transactional state.*127.0.0.1:{port}"):
        ZooKeeperBackend.for_transactional_conf(conf)
    assert time.monotonic() - started < 15


def test_zookeeper_down_fails_in_bounded_time_and_recovers(zookeeper: DevZookeeper,
                                                           backends: list[ZooKeeperBackend]) -> None:
    backends.append(backend := ZooKeeperBackend.for_transactional_conf(tx_conf(zookeeper)))
    state = backend.open("t", "coordinator")
    state.set_data("currtx", 1)
    zookeeper.stop()
    for op, call in (("write", lambda: state.set_data("currtx", 2)),
                     ("read", lambda: state.get_data("currtx")),
                     ("list", lambda: state.list("")),
                     ("delete", lambda: state.delete("currtx"))):
        started = time.monotonic()
        with pytest.raises(CoordinationError, match=f"cannot {op} {backend.root}/t/coordinator"):
            call()
        assert time.monotonic() - started < 30, op
    # The same server again on the same data dir: the same backend carries on
    zookeeper.start()
    poll_for(lambda: backend.zk.connected, timeout=30, message="the client reconnected")
    assert state.get_data("currtx") == 1  # the failed write was not applied later
    state.set_data("currtx", 3)
    assert state.get_data("currtx") == 3
