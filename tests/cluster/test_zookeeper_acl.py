"""ZooKeeper in a secure cluster: digest auth, creator-only ACLs on every node
Squall makes, a password rotation that loses no node, and a dev server that
only this machine and this user can reach."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from squall import config as config_mod
from squall.cluster.state import ClusterState
from squall.cluster.transactional_state import ZooKeeperBackend
from squall.cluster.zookeeper import DevZookeeper, digest_acls, make_client, start_client
from squall.errors import ConfigError
from squall.runtime.ports import free_port
from squall.security.keyring import Keyring

TOPOLOGY = {"id": "t-1", "name": "t", "status": "active", "definition": {}, "conf": {}}
ASSIGNMENT = {"version": 1, "workers": [], "hosts": {}, "time": 0}
SECRETS = {"curve": {"public": "cHVibGlj", "secret": "c2VjcmV0"}}
LOG_LEVELS = {"ROOT": {"level": "DEBUG", "timeout_secs": 0, "expires_at": None}}


@pytest.fixture
def keyring(tmp_path: Path) -> Keyring:
    keyring, _token = Keyring.create()
    keyring.save(tmp_path / "keyring.json")
    return keyring


def secure_conf(zookeeper: DevZookeeper, keyring: Keyring) -> dict[str, Any]:
    return config_mod.merge({"storm.zookeeper.port": zookeeper.port,
                             "squall.keyring.path": str(keyring.path)})


@pytest.fixture
def client(zookeeper: DevZookeeper) -> Iterator[Callable[..., KazooClient]]:
    """Started kazoo clients, closed at the end: ``client()`` anonymous, ``client(conf, creds)``
    Squall's own (the keyring's credentials when ``creds`` is None)."""
    started: list[KazooClient] = []

    def make(conf: dict[str, Any] | None = None, credentials: list[tuple[str, str]] | None = None,
             auth_data: list[tuple[str, str]] | None = None) -> KazooClient:
        if conf is None:
            zk = KazooClient(hosts=zookeeper.address, auth_data=auth_data)
            zk.start(timeout=10)
        else:
            zk = start_client(conf, credentials)
        started.append(zk)
        return zk

    yield make
    for zk in started:
        zk.stop()
        zk.close()


def populate(state: ClusterState) -> None:
    state.setup()
    state.put_topology(TOPOLOGY)
    state.put_code("t-1", b"PK" * 1000)
    state.put_assignment("t-1", ASSIGNMENT)
    state.put_topology_secrets("t-1", SECRETS)
    state.put_log_levels("t-1", LOG_LEVELS)


def walk(zk: KazooClient, path: str) -> Iterator[str]:
    yield path
    for child in zk.get_children(path):
        yield from walk(zk, f"{path}/{child}")


def assert_locked_out(zk: KazooClient) -> None:
    for path in ("/squall/topologies/t-1", "/squall/code/t-1/000000", "/squall/secrets/t-1",
                 "/squall/assignments/t-1"):
        with pytest.raises(NoAuthError):
            zk.get(path)
    for path in ("/squall/topologies", "/squall/code/t-1", "/squall/secrets"):
        with pytest.raises(NoAuthError):
            zk.get_children(path)
    with pytest.raises(NoAuthError):
        zk.set("/squall/assignments/t-1", b'{"workers": "mine"}')
    with pytest.raises(NoAuthError):
        zk.create("/squall/assignments/t-2", b"{}")
    with pytest.raises(NoAuthError):
        zk.delete("/squall/secrets/t-1")


def test_only_the_clusters_credentials_read_or_write_squalls_nodes(
        zookeeper: DevZookeeper, keyring: Keyring, client: Callable[..., KazooClient]) -> None:
    # Given a secure cluster's state, written with the keyring's credentials
    conf = secure_conf(zookeeper, keyring)
    cluster = client(conf)
    state = ClusterState(cluster, conf["storm.zookeeper.root"])
    populate(state)
    # Then every node under the root names the cluster's credentials, and only them
    wanted = set(digest_acls(keyring.zookeeper_credentials()))
    nodes = list(walk(cluster, "/squall"))
    assert len(nodes) > 10
    for path in nodes:
        assert set(cluster.get_acls(path)[0]) == wanted, path
    # And a client without credentials, or with a wrong password, can do nothing with them
    assert_locked_out(client())
    assert_locked_out(client(auth_data=[("digest", "squall:not-the-password")]))
    # While the cluster's own client reads and writes everything
    assert state.topology("t-1") == TOPOLOGY
    assert state.code("t-1") == b"PK" * 1000
    assert state.assignment("t-1") == ASSIGNMENT
    assert state.topology_secrets("t-1") == SECRETS
    assert state.log_levels("t-1") == LOG_LEVELS
    state.put_assignment("t-1", {**ASSIGNMENT, "version": 2})
    assert state.assignment("t-1")["version"] == 2
    # And removing the topology removes its secrets and log levels
    state.remove_topology("t-1")
    assert state.topology_secrets("t-1") is None
    assert state.log_levels("t-1") == {}
    assert state.topology("t-1") is None


def test_a_rotated_password_reaches_the_nodes_made_before_and_the_previous_one_still_does(
        zookeeper: DevZookeeper, keyring: Keyring, client: Callable[..., KazooClient]) -> None:
    # Given nodes made under the first password
    conf = secure_conf(zookeeper, keyring)
    ((user, old),) = keyring.zookeeper_credentials()
    populate(ClusterState(client(conf), conf["storm.zookeeper.root"]))
    # When the keyring's ZooKeeper password is rotated
    keyring.rotate_zookeeper()
    keyring.save()
    (_, new), (_, previous) = keyring.zookeeper_credentials()
    assert previous == old and new != old
    new_only = ClusterState(client(conf, [(user, new)]), conf["storm.zookeeper.root"])
    with pytest.raises(NoAuthError):
        new_only.topology("t-1")  # not yet: the nodes name the old password only
    # And a daemon with the rotated keyring sets the cluster up (the leader nimbus does)
    rotated = ClusterState(client(conf), conf["storm.zookeeper.root"])
    rotated.setup()
    # Then every node names both passwords
    wanted = set(digest_acls([(user, new), (user, old)]))
    for path in walk(rotated.zk, "/squall"):
        assert set(rotated.zk.get_acls(path)[0]) == wanted, path
    assert rotated.fix_acls() == 0  # done already
    # And a client with only the new password reads and writes what was made before
    assert new_only.topology("t-1") == TOPOLOGY
    assert new_only.topology_secrets("t-1") == SECRETS
    assert new_only.code("t-1") == b"PK" * 1000
    new_only.put_assignment("t-1", {**ASSIGNMENT, "version": 3})
    # And so does one with only the previous password (daemons not restarted yet)
    old_only = ClusterState(client(conf, [(user, old)]), conf["storm.zookeeper.root"])
    assert old_only.assignment("t-1")["version"] == 3
    assert old_only.topology_secrets("t-1") == SECRETS
    # But nobody else
    assert_locked_out(client(auth_data=[("digest", f"{user}:not-the-password")]))


def test_transactional_state_uses_the_given_credentials_else_the_keyrings(
        zookeeper: DevZookeeper, keyring: Keyring, client: Callable[..., KazooClient]) -> None:
    conf = secure_conf(zookeeper, keyring)
    # Given a worker's backend, with the credentials of its secrets file
    worker = ZooKeeperBackend.for_cluster_conf(conf, credentials=keyring.zookeeper_credentials())
    keyringless = ZooKeeperBackend.for_transactional_conf({**conf, "squall.keyring.path": None},
                                                          credentials=keyring.zookeeper_credentials())
    fallback = ZooKeeperBackend.for_transactional_conf(conf)
    try:
        # When it writes its state
        worker.open("tx-1", "coordinator").set_data("currtx", 7)
        # Then the cluster reads it, with given credentials or the keyring's
        assert keyringless.open("tx-1", "coordinator").get_data("currtx") == 7
        assert fallback.open("tx-1", "coordinator").get_data("currtx") == 7
        # And nobody else does
        with pytest.raises(NoAuthError):
            client().get("/transactional/tx-1/coordinator/currtx")
    finally:
        for backend in (worker, keyringless, fallback):
            backend.close()


def test_an_insecure_cluster_keeps_the_open_acl(zookeeper: DevZookeeper,
                                                client: Callable[..., KazooClient]) -> None:
    conf = config_mod.merge({"storm.zookeeper.port": zookeeper.port, "squall.secure": False,
                             "squall.keyring.path": "/nonexistent/keyring.json"})
    state = ClusterState(client(conf), conf["storm.zookeeper.root"])
    populate(state)
    assert not state.secure and state.fix_acls() == 0
    assert client().get("/squall/topologies/t-1")[0]
    assert state.zk.get_acls("/squall/secrets/t-1")[0] == OPEN_ACL_UNSAFE


def test_a_secure_client_without_a_keyring_says_how_to_make_one(tmp_path: Path) -> None:
    conf = config_mod.merge({"squall.keyring.path": str(tmp_path / "missing.json")})
    with pytest.raises(ConfigError, match="squall secrets init"):
        make_client(conf)
    empty, _ = Keyring.create()
    empty.data["zookeeper"]["passwords"] = []
    empty.save(tmp_path / "empty.json")
    with pytest.raises(ConfigError, match="no ZooKeeper credentials"):
        make_client({**conf, "squall.keyring.path": str(tmp_path / "empty.json")})


def test_the_dev_zookeeper_listens_on_loopback_only_and_keeps_its_data_private(
        zookeeper: DevZookeeper) -> None:
    assert zookeeper.process is not None
    listening = [c.laddr for c in psutil.Process(zookeeper.process.pid).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN]
    assert zookeeper.port in {addr.port for addr in listening}
    assert {addr.ip for addr in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
    assert os.stat(zookeeper.data_dir).st_mode & 0o777 == 0o700
    assert os.stat(zookeeper.config_file).st_mode & 0o777 == 0o600
    assert "clientPortAddress=127.0.0.1\n" in zookeeper.config_file.read_text()


def test_an_existing_data_dir_is_made_private(tmp_path: Path) -> None:
    data = tmp_path / "zk"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    DevZookeeper(free_port(), data).prepare()
    assert os.stat(data).st_mode & 0o777 == 0o700


def test_the_dev_clusters_zookeeper_root_is_read_only_to_anyone_without_its_password(
        tmp_path: Path) -> None:
    # Issue 29, finding 2: the dev ZooKeeper's / kept world:anyone with every permission
    # (a 64 KB node was created with no credentials).
    from squall.cli.devcluster import DevCluster

    cluster = DevCluster(tmp_path / "c", supervisors=0)
    cluster.start()
    anonymous = KazooClient(hosts=f"127.0.0.1:{cluster.conf['storm.zookeeper.port']}")
    anonymous.start(timeout=10)
    try:
        with pytest.raises(NoAuthError):
            anonymous.create("/junk", b"x" * 65000)
        assert "squall" in anonymous.get_children("/")  # readable, as before
        with pytest.raises(NoAuthError):
            anonymous.set_acls("/", OPEN_ACL_UNSAFE)
        # while the cluster itself still makes what it needs at the root
        squall = start_client({**config_mod.DEFAULTS, **cluster.conf})
        try:
            squall.create("/squall-check", b"")
        finally:
            squall.stop()
            squall.close()
    finally:
        anonymous.stop()
        anonymous.close()
        cluster.stop()


def test_a_topologys_own_identity_reaches_its_transactional_nodes_only_until_revoked(
        zookeeper: DevZookeeper, keyring: Keyring, client: Callable[..., KazooClient],
        request: pytest.FixtureRequest) -> None:
    from squall.cluster.zookeeper import digest_id

    conf = secure_conf(zookeeper, keyring)
    cluster = ClusterState(client(conf), "/squall")
    cluster.grant(["/transactional/tx-a"], digest_id("topology-a", "pw-a"))
    # as a worker's client: the nodes it makes name it and the cluster's digest ids
    cluster_ids = [digest_id(u, p) for u, p in keyring.zookeeper_credentials()]
    mine = make_client(conf, [("topology-a", "pw-a")], cluster_ids)
    mine.start(timeout=10)
    request.addfinalizer(lambda: (mine.stop(), mine.close()))
    other = client(conf, [("topology-b", "pw-b")])
    mine.create("/transactional/tx-a/coordinator", b"1")
    with pytest.raises(NoAuthError):
        other.get("/transactional/tx-a/coordinator")
    with pytest.raises(NoAuthError):
        mine.create("/transactional/tx-b", b"")  # its siblings are the cluster's
    # a nimbus restart re-ACLs the tree and keeps the grant
    ClusterState(client(conf), "/transactional").fix_acls()
    assert mine.get("/transactional/tx-a")[0] == b""
    cluster.revoke(["/transactional/tx-a"])
    for path in ("/transactional/tx-a", "/transactional/tx-a/coordinator"):
        with pytest.raises(NoAuthError):
            mine.get(path)
