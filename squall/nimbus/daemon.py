"""The nimbus daemon: API server, leader election, and the monitor loop.

Several nimbus processes may run; kazoo's election recipe picks the leader,
and only the leader changes state or runs the monitor.  Everything a nimbus
knows lives in ZooKeeper (topologies, their code, assignments), so a
standby that wins the election carries on where the old leader stopped.
Running topologies never need nimbus: workers keep processing while no
nimbus is up.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from kazoo.protocol.states import KazooState

from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import connect, make_client
from squall.nimbus.service import ApiError, NimbusService
from squall.nimbus.web import api_server
from squall.runtime.status import Status

log = structlog.get_logger("squall.nimbus.Nimbus")


class Nimbus:
    def __init__(self, conf: dict[str, Any], now: Callable[[], float] = time.time) -> None:
        self.conf = conf
        self.now = now
        self.status = Status.INIT
        self.id = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(2).hex()}"
        self.is_leader = False
        self.leader_terms = 0  # how many times this nimbus became leader
        self._stop = threading.Event()
        self._lost = threading.Event()
        # Sessions lost so far.  A term ends when this changes, even if the session
        # came back (and _lost was cleared) before the leader looked: its lock node
        # died with the old session, so another nimbus may lead already.
        self._sessions_lost = 0
        self._threads: list[threading.Thread] = []
        self.zk = make_client(conf)
        self.state = ClusterState(self.zk, conf["storm.zookeeper.root"])
        self.service = NimbusService(self.state, conf, now)
        self.api = api_server(self)
        # Clients and standbys are told this URL: the node's advertised name,
        # not the (possibly wildcard) address the server listens on.
        self.url = f"{self.api.scheme}://{conf['storm.local.hostname']}:{self.api.port}"
        self._election: Any = None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        if self.status is not Status.INIT:
            return
        self.zk.add_listener(self._on_zk_state)
        connect(self.zk, self.conf, "nimbus")
        # Also gives every node the current keyring's ACL (a rotated ZooKeeper password),
        # and the transactional state's nodes the same when they live in this ensemble.
        self.state.setup()
        if not self.conf.get("transactional.zookeeper.servers"):
            tx_root = self.conf["transactional.zookeeper.root"]
            if self.zk.exists(tx_root):
                ClusterState(self.zk, tx_root).fix_acls()
        self._register()
        self.api.start()
        for target, name in ((self._elect, "nimbus-election"), (self._monitor, "nimbus-monitor"),
                             (self._gather_stats, "nimbus-stats")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        self.status = Status.RUNNING
        log.info("nimbus started", url=self.url, id=self.id)

    def stop(self, reason: str = "stop") -> None:
        if self.status is not Status.RUNNING:
            return
        log.info("nimbus stopping", reason=reason)
        self._stop.set()
        self._lost.set()
        if self._election is not None:
            self._election.cancel()
        self.api.stop()
        for thread in self._threads:
            thread.join(5)
        self.zk.stop()
        self.zk.close()
        self.status = Status.STOPPED

    def wait(self) -> None:
        self._stop.wait()

    # -- ZooKeeper session ---------------------------------------------------

    def _register(self) -> None:
        self.state.register_nimbus(self.id, {"url": self.url, "started": self.now()})

    def _on_zk_state(self, state: str) -> None:
        # Listeners run on kazoo's thread and must not block: hand work off.
        if state == KazooState.LOST:
            log.warning("zookeeper session lost: stepping down")
            self._sessions_lost += 1
            self._lost.set()
        elif state == KazooState.CONNECTED and self._lost.is_set() and not self._stop.is_set():
            threading.Thread(target=self._recover, name="nimbus-recover", daemon=True).start()

    def _recover(self) -> None:
        try:
            self.state.setup(fix_acls=False)  # the ACLs were fixed at start
            self._register()
            self._lost.clear()
            log.info("zookeeper session re-established")
        except Exception:  # noqa: BLE001 - the next reconnect tries again
            log.exception("re-registering nimbus failed")

    # -- leadership ----------------------------------------------------------

    def _elect(self) -> None:
        while not self._stop.is_set():
            if self._lost.is_set():
                self._stop.wait(0.2)
                continue
            try:
                self._election = self.zk.Election(self.state.election_path(), self.url)
                self._election.run(self._lead)
            except Exception:  # noqa: BLE001 - connection trouble: try again
                if not self._stop.is_set():
                    log.exception("election failed; retrying")
                    self._stop.wait(1)

    def _lead(self) -> None:
        session = self._sessions_lost
        self.leader_terms += 1
        self.is_leader = True
        log.info("nimbus is the leader", url=self.url)
        try:
            self.service.reconcile_all()
        except Exception:  # noqa: BLE001
            log.exception("first reconciliation failed")
        while not self._stop.is_set() and not self._lost.is_set() and self._sessions_lost == session:
            self._stop.wait(0.2)
        self.is_leader = False
        log.info("nimbus is no longer the leader", url=self.url)

    def leader_url(self) -> str | None:
        try:
            contenders = self.zk.Election(self.state.election_path()).contenders()
        except Exception:  # noqa: BLE001
            return None
        return contenders[0] if contenders else None

    def require_leader(self) -> None:
        if not self.is_leader:
            raise ApiError(503, "this nimbus is not the leader")

    # -- monitor -------------------------------------------------------------

    def _monitor(self) -> None:
        period = self.conf["nimbus.monitor.freq.secs"]
        while not self._stop.wait(period):
            if not self.is_leader:
                continue
            try:
                self.service.reconcile_all()
            except Exception:  # noqa: BLE001 - ZooKeeper trouble: next round
                log.exception("monitor round failed")

    def _gather_stats(self) -> None:
        # Every nimbus, leader or not: a standby that takes over has the windows already.
        period = self.conf["nimbus.stats.freq.secs"]
        while not self._stop.wait(period):
            if self._lost.is_set():
                continue
            try:
                self.service.ingest_stats()
            except Exception:  # noqa: BLE001 - ZooKeeper trouble: next round
                log.warning("reading the workers' statistics failed; next round", exc_info=True)

    def cluster_info(self) -> dict[str, Any]:
        supervisors = self.state.supervisors()
        used = {(w["node"], w["port"]) for a in self.state.assignments().values() for w in a["workers"]}
        return {
            "leader": self.leader_url(),
            "this": {"url": self.url, "leader": self.is_leader},
            "nimbus": list(self.state.nimbuses().values()),
            "supervisors": [{**info, "used_ports": sorted(p for p in info["ports"] if (node, p) in used)}
                            for node, info in sorted(supervisors.items())],
        }
