"""The nimbus daemon: API server, leader election, and the monitor loop.

Several nimbus processes may run; squall.cluster's leader election picks
the leader, and only the leader changes state or runs the monitor.
Everything a nimbus knows lives in ZooKeeper (topologies, their code,
assignments), so a standby that wins the election carries on where the old
leader stopped.
Running topologies never need nimbus: workers keep processing while no
nimbus is up.

The leader also publishes the keyring's users (their token hashes) in ZooKeeper at every
round: the DRPC servers follow them, so a user added with ``squall secrets user add`` is
known there within a round, with no keyring to copy.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from squall.cluster.election import LeaderFence, NotLeader
from squall.cluster.session import Session
from squall.cluster.state import ClusterState
from squall.cluster.zookeeper import connect, disconnect, make_client
from squall.errors import Unavailable
from squall.nimbus.autoscale import Autoscaler
from squall.nimbus.control import TopologyControl
from squall.nimbus.logtokens import LogviewerTokens
from squall.nimbus.submission import Submission
from squall.nimbus.views import TopologyViews
from squall.nimbus.web import api_server
from squall.runtime.status import Status
from squall.security.admission import check_cluster_roots
from squall.security.keyring import KeyringWatch, keyring_path

log = structlog.get_logger("squall.nimbus.Nimbus")


class Nimbus:
    def __init__(self, conf: dict[str, Any], now: Callable[[], float] = time.time) -> None:
        self.conf = conf
        self.now = now
        self.status = Status.INIT
        self.id = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(2).hex()}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.zk = make_client(conf)
        self.state = ClusterState(self.zk, conf["storm.zookeeper.root"])
        # What nimbus does, one object per job: what it shows (views), what it changes and
        # the reconciliation (control; its writes fenced by the election's term, see
        # squall.cluster.election), and taking topologies in (submission).
        self.views = TopologyViews(self.state, now, leader_url=self.leader_url)
        self.control = TopologyControl(self.state, conf, now, leadership=self._term)
        # Self-regulation (squall.nimbus.autoscale): the leader's rounds, through control's rebalance.
        self.autoscaler = Autoscaler(self.state, self.control, conf, now)
        self.submission = Submission(self.state, conf, self.control.reconcile, self.control.put_topology, now)
        # The tokens users read the logviewers with (squall.nimbus.logtokens); wall time, as
        # the supervisors that check them are on other machines.
        self.log_tokens = LogviewerTokens(self.state, conf, now)
        self.api = api_server(self)
        # Clients and standbys are told this URL: the node's advertised name,
        # not the (possibly wildcard) address the server listens on.
        self.url = f"{self.api.scheme}://{conf['storm.local.hostname']}:{self.api.port}"
        # While the session is lost nimbus leads nowhere and reads no statistics; once a new
        # session is up it re-registers (_recover), then runs for leader again.
        self.session = Session(self.zk, "nimbus", recover=self._recover, on_lost=self._on_session_lost)
        self._keyring = KeyringWatch(keyring_path(conf)) if conf["squall.secure"] else None
        self._published_users: dict[str, list[str]] | None = None
        self.election = self.state.election(self.url, self.session, self._on_leadership)

    @property
    def is_leader(self) -> bool:
        return self.election.is_leader

    def _term(self) -> LeaderFence | None:
        return self.election.fence

    @property
    def leader_terms(self) -> int:
        """How many times this nimbus became leader."""
        return self.election.terms

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        if self.status is not Status.INIT:
            return
        # First: a nimbus that must not run (no sandbox where one is required, roots that
        # overlap) stops here.
        if not self.conf.get("transactional.zookeeper.servers"):
            check_cluster_roots(self.conf["storm.zookeeper.root"], self.conf["transactional.zookeeper.root"])
        self.submission.start()  # whether submitted code is imported here: before serving
        self.session.start()
        connect(self.zk, self.conf, "nimbus")
        # Also gives every node the current keyring's ACL (a rotated ZooKeeper password),
        # and the transactional state's nodes the same when they live in this ensemble.
        self.state.setup()
        if not self.conf.get("transactional.zookeeper.servers"):
            tx_root = self.conf["transactional.zookeeper.root"]
            tx_state = ClusterState(self.zk, tx_root)
            if tx_state.exists():
                tx_state.fix_acls()
        self._register()
        self.log_tokens.publish()  # every nimbus: the same key, and one whose keyring changed adds its own
        self.api.start()
        self.election.start()
        for target, name in ((self._monitor, "nimbus-monitor"), (self._gather_stats, "nimbus-stats"),
                             (self._autoscale, "nimbus-autoscale")):
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
        self.session.close()
        self.election.stop()
        self.api.stop()
        self.election.join(5)
        for thread in self._threads:
            thread.join(5)
        disconnect(self.zk)
        self.status = Status.STOPPED

    def wait(self) -> None:
        self._stop.wait()

    # -- ZooKeeper session ---------------------------------------------------

    def _register(self) -> None:
        self.state.register_nimbus(self.id, {"url": self.url, "started": self.now()})

    def _on_session_lost(self) -> None:
        log.warning("zookeeper session lost: stepping down")

    def _recover(self) -> None:
        self.state.setup(fix_acls=False)  # the ACLs were fixed at start
        self._register()
        log.info("zookeeper session re-established")

    # -- leadership ----------------------------------------------------------

    def _on_leadership(self, leading: bool) -> None:
        """On the election's thread; the term holds until this returns."""
        if not leading:
            log.info("nimbus is no longer the leader", url=self.url)
            self.autoscaler.forget()
            return
        log.info("nimbus is the leader", url=self.url)
        self._published_users = None  # another leader may have published another keyring's
        self._publish_users()
        try:
            self.control.reconcile_all()
        except Exception:  # noqa: BLE001
            log.exception("first reconciliation failed")

    def leader_url(self) -> str | None:
        return self.election.leader()

    def require_leader(self) -> None:
        if not self.is_leader:
            raise Unavailable("this nimbus is not the leader")

    # -- monitor -------------------------------------------------------------

    def _monitor(self) -> None:
        period = self.conf["nimbus.monitor.freq.secs"]
        while not self._stop.wait(period):
            try:
                # Every nimbus keeps its own cache of topology environments.
                self.submission.sweep_envs()
            except Exception:  # noqa: BLE001 - ZooKeeper or disk trouble: next round
                log.warning("sweeping topology environments failed; next round", exc_info=True)
            if not self.is_leader:
                continue
            self._publish_users()
            try:
                self.control.reconcile_all()
            except Exception:  # noqa: BLE001 - ZooKeeper trouble: next round
                log.exception("monitor round failed")

    def _autoscale(self) -> None:
        """Self-regulation's rounds, on the leader: each topology's when its period is due."""
        period = self.conf["nimbus.autoscale.freq.secs"]
        while not self._stop.wait(period):
            if not self.is_leader or self.session.lost:
                self.autoscaler.forget()
                continue
            try:
                self.autoscaler.tick()
            except NotLeader:
                self.autoscaler.forget()
            except Exception:  # noqa: BLE001 - ZooKeeper trouble: next round
                log.warning("self-regulation tick failed; next round", exc_info=True)

    def _publish_users(self) -> None:
        """The keyring's users and their token hashes into ZooKeeper, when they changed."""
        if self._keyring is None:
            return
        users = {name: list(entry.get("tokens", ())) for name, entry in self._keyring.current().users.items()}
        if users == self._published_users:
            return
        try:
            self.state.put_users(users)
        except Exception:  # noqa: BLE001 - ZooKeeper trouble: next round
            log.warning("publishing the users failed; next round", exc_info=True)
            return
        self._published_users = users
        log.info("users published", users=len(users))

    def _gather_stats(self) -> None:
        # Every nimbus, leader or not: a standby that takes over has the windows already.
        period = self.conf["nimbus.stats.freq.secs"]
        while not self._stop.wait(period):
            if self.session.lost:
                continue
            try:
                self.views.ingest_stats()
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
