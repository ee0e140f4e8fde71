"""A lost ZooKeeper session is survived: daemons reconnect and re-register
(kazoo's harness trick: closing a second client on the same session id
expires the daemon's session)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from squall import config as config_mod
from squall.cluster.session import LOST
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import DevZookeeper, start_client
from squall.nimbus.daemon import Nimbus
from squall.runtime.ports import free_port
from squall.supervisor.daemon import Supervisor
from squall.testing import poll_for
from tests.helpers import keyring_conf


def expire(client: KazooClient, hosts: str) -> None:
    session_id, password = client.client_id
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def test_nimbus_and_supervisor_re_register_after_session_expiry(zookeeper: DevZookeeper,
                                                                 tmp_path: Path) -> None:
    conf: dict[str, Any] = config_mod.merge({
        "storm.zookeeper.port": zookeeper.port, "storm.zookeeper.session.timeout": 4000,
        "nimbus.http.port": 0, "nimbus.monitor.freq.secs": 0.5, "storm.local.dir": str(tmp_path / "sup"),
        "supervisor.slots.ports": [free_port()], "supervisor.heartbeat.frequency.secs": 0.3,
        "supervisor.assignments.sync.secs": 0.5, "supervisor.monitor.frequency.secs": 0.5,
        **keyring_conf(tmp_path),
    })
    nimbus, supervisor = Nimbus(conf), Supervisor(conf)
    observer = start_client(conf)
    state = ClusterState(observer, conf["storm.zookeeper.root"])
    try:
        nimbus.start()
        supervisor.start()
        poll_for(lambda: nimbus.is_leader and supervisor.node in state.supervisors(), message="registered")
        # When both daemons' sessions expire
        expire(nimbus.zk, zookeeper.address)
        expire(supervisor.zk, zookeeper.address)
        # Then they come back on new sessions: ephemeral nodes re-created, and
        # nimbus, having stepped down with its session, wins a new term
        poll_for(lambda: supervisor.node in state.supervisors(), timeout=20,
                 message="supervisor re-registered")
        poll_for(lambda: nimbus.leader_terms == 2 and nimbus.is_leader, timeout=20,
                 message="nimbus leads again")
        poll_for(lambda: len(state.nimbuses()) == 1, timeout=20, message="nimbus re-registered")
    finally:
        supervisor.stop()
        nimbus.stop()
        observer.stop()
        observer.close()


def test_a_leader_whose_session_came_back_before_it_looked_still_steps_down(zookeeper: DevZookeeper,
                                                                            tmp_path: Path) -> None:
    # (Regression: the leader polled a "lost" flag every 0.2 s; a session lost and
    # re-established in between cleared the flag unseen, and nimbus went on leading
    # without its lock, which had died with the old session.)
    conf: dict[str, Any] = config_mod.merge({
        "storm.zookeeper.port": zookeeper.port, "nimbus.http.port": 0, "nimbus.monitor.freq.secs": 0.5,
        **keyring_conf(tmp_path),
    })
    nimbus = Nimbus(conf)
    try:
        nimbus.start()
        poll_for(lambda: nimbus.is_leader, message="leading")
        # When kazoo reports the session lost, and the recovery runs at once (as
        # when the reconnect is immediate), before the leader's next look
        nimbus.session.handle(LOST)
        nimbus.session.recover()
        # Then the term still ends, and nimbus leads again in a new term
        poll_for(lambda: nimbus.leader_terms == 2 and nimbus.is_leader, timeout=10, message="a second term")
    finally:
        nimbus.stop()


def test_the_embedded_server_is_started_only_once_it_serves() -> None:
    # Given a server that answers "srvr" while still loading its database, as ZooKeeper does
    listener = socket.create_server(("127.0.0.1", 0))
    loading = b"This ZooKeeper instance is not currently serving requests\n"
    answers = [loading] * 3 + [b"Zookeeper version: 3.9\n"]
    asked: list[bytes] = []

    def serve() -> None:
        for answer in answers:
            conn, _ = listener.accept()
            with conn:
                asked.append(conn.recv(16))
                conn.sendall(answer)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    zk = DevZookeeper(listener.getsockname()[1], "unused")
    try:
        # When it is waited for, then it is ready only after the answer of a serving server
        zk.wait_ready(timeout=30)
        assert asked == [b"srvr"] * 4
    finally:
        listener.close()
