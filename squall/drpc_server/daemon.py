"""The DRPC server daemon: its HTTP(S) server on ``storm.local.hostname:drpc.port`` and, in a
secure cluster, its ZooKeeper client, which follows the topologies' DRPC credentials and
the users nimbus publishes, and keeps who serves which function (squall.drpc_server.owners).

Stopping it answers every waiting client SERVER_SHUTDOWN (503) before the server closes.
Requests live in its memory only (as in Storm): a restarted server has none, and the
clients of a killed one see their connection break.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from squall.clock import Clock
from squall.cluster.state import ClusterState
from squall.cluster.watches import ChildrenWatch, DataWatch
from squall.cluster.zookeeper import connect, disconnect, is_secure, make_client
from squall.drpc_server.app import DrpcService, create_app
from squall.drpc_server.invokers import DrpcGate, Invokers, PublishedUsers
from squall.drpc_server.limits import CallLimits
from squall.drpc_server.owners import FunctionOwners
from squall.httpd.connections import Limits
from squall.httpd.server import HttpServer, tls_for_conf
from squall.runtime.status import Status
from squall.security.keyring import KeyringWatch, keyring_path

log = structlog.get_logger("squall.drpc_server.DRPCServer")


class DRPCServer:
    def __init__(self, conf: dict[str, Any], clock: Clock | None = None) -> None:
        self.conf = conf
        self.status = Status.INIT
        self.secure = is_secure(conf)
        self.invokers = Invokers()
        self.users = PublishedUsers()
        self.zk = make_client(conf) if self.secure else None
        self.state = ClusterState(self.zk, conf["storm.zookeeper.root"]) if self.zk is not None else None
        self.owners = (FunctionOwners(self.state, conf, self.invokers, clock)
                       if self.state is not None else None)
        self._watches: list[ChildrenWatch | DataWatch] = []
        gate = (DrpcGate(conf, KeyringWatch(keyring_path(conf)), self.invokers, self.users)
                if self.secure else None)
        limits = CallLimits(int(conf["drpc.max.pending.per.user"]), int(conf["drpc.max.pending.unserved"]))
        self.service = DrpcService(float(conf["drpc.request.timeout.secs"]), clock, limits)
        app = create_app(self.service, conf, gate, self.owners)
        self.http = HttpServer(app, conf["storm.local.hostname"], conf["drpc.port"],
                               tls_context=tls_for_conf(conf), limits=Limits.for_conf(conf), name="drpc-http")

    @property
    def port(self) -> int:
        return self.http.port

    @property
    def url(self) -> str:
        return f"{self.http.scheme}://{self.conf['storm.local.hostname']}:{self.http.port}"

    def start(self) -> None:
        if self.status is not Status.INIT:
            return
        if self.zk is not None and self.state is not None:
            connect(self.zk, self.conf, "the DRPC server")
            # kazoo re-arms them on a new session; meanwhile the last credentials seen hold.
            self._watches = [self.state.watch_drpc_invokers(self.invokers.update),
                             self.state.watch_users(self.users.update)]
            if self.owners is not None:
                self.owners.start()
        self.http.start()
        self.status = Status.RUNNING
        log.info("drpc server started", url=self.url, secure=self.secure,
                 timeout_secs=self.conf["drpc.request.timeout.secs"],
                 users_from="nimbus" if self.users.published else "keyring file",
                 max_pending_per_user=self.conf["drpc.max.pending.per.user"],
                 max_pending_unserved=self.conf["drpc.max.pending.unserved"])
        if self.conf["drpc.max.pending.per.user"] >= self.conf["drpc.max.requests"]:
            log.warning("drpc.max.pending.per.user is not below drpc.max.requests: one user's calls "
                        "can hold the server for everyone")

    def stop(self, reason: str = "stop") -> None:
        if self.status is not Status.RUNNING:
            return
        log.info("drpc server stopping", reason=reason, waiting=len(self.service.core))
        loop = self.http.loop
        if loop is not None and self.http.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(_close(self.service), loop).result(5)
            except (RuntimeError, TimeoutError) as e:  # the loop closed meanwhile
                log.warning("could not answer the waiting clients", error=repr(e))
        self.http.stop()
        if self.owners is not None:
            self.owners.stop()
        for watch in self._watches:
            watch.stop()
        if self.zk is not None:
            disconnect(self.zk)
        self.status = Status.STOPPED


async def _close(service: DrpcService) -> None:
    service.close()
    await asyncio.sleep(0.05)  # their answers go out before the server stops
