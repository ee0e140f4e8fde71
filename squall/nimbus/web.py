"""Nimbus's HTTP API, web UI and /metrics: the app of squall.ui answered by this nimbus,
served by squall.ui.server (TLS, tokens and limits from the conf: ``nimbus.http.*``,
``nimbus.tls.*``).  Only the leader changes anything; a standby answers 503 naming it."""

from __future__ import annotations

from typing import Any, Protocol

from squall.cluster.state import ClusterState
from squall.nimbus import prometheus
from squall.nimbus.logtokens import LogviewerTokens
from squall.nimbus.service import NimbusService
from squall.ui import storm_api as api
from squall.ui.app import create_app
from squall.ui.auth import Gate
from squall.ui.connections import Limits
from squall.ui.server import HttpServer, tls_for_conf
from squall.ui.storm_api import TopologyView
from squall.version import VERSION


class Nimbus(Protocol):
    """What the web side asks of the nimbus daemon (squall.nimbus.daemon, which imports this)."""

    conf: dict[str, Any]
    state: ClusterState
    service: NimbusService
    log_tokens: LogviewerTokens

    def require_leader(self) -> None: ...

    def leader_url(self) -> str | None: ...

    def cluster_info(self) -> dict[str, Any]: ...


class NimbusBackend:
    """What the app asks (squall.ui.backend: Storm's views and Squall's own API), from this
    nimbus, its service and ZooKeeper."""

    def __init__(self, nimbus: Nimbus) -> None:
        self.nimbus = nimbus
        self.service = nimbus.service
        self.conf = nimbus.conf

    # -- Storm's UI REST API ----------------------------------------------------------------

    def now(self) -> float:
        return self.service.now()

    def resolve(self, ident: str) -> dict[str, Any]:
        return self.service.resolve(ident)

    def view(self, resolved: dict[str, Any], details: bool = False) -> TopologyView:
        return self.service.view(resolved, details=details)

    def visualization(self, ident: str, window: str, sys: bool = False) -> dict[str, Any]:
        return self.service.visualization(ident, window, sys)

    def storm_action(self, ident: str, action: str, wait: int = 0, body: Any = None) -> dict[str, Any]:
        return self.service.storm_action(ident, action, wait, body)

    def log_config(self, ident: str) -> dict[str, Any]:
        return self.service.log_config(ident)

    def set_log_config(self, ident: str, changes: dict[str, Any]) -> dict[str, Any]:
        return self.service.set_log_config(ident, changes)

    def summary(self, head: str) -> Any:
        state, service, now = self.nimbus.state, self.service, self.service.now()
        supervisors = state.supervisors()
        used = {(w["node"], w["port"]) for a in state.assignments().values() for w in a["workers"]}
        if head == "supervisor":
            return api.supervisor_summary(supervisors, service.supervisors_started(), used, VERSION, now)
        if head == "nimbus":
            return api.nimbus_summary(state.nimbuses().values(), self.nimbus.leader_url(), VERSION, now)
        views = [service.view(record) for record in state.topologies()]
        if head == "cluster":
            return api.cluster_summary(views, supervisors, used, VERSION)
        return api.topology_summary(views, now)

    def require_leader(self) -> None:
        self.nimbus.require_leader()

    def leader_url(self) -> str | None:
        return self.nimbus.leader_url()

    # -- Squall's own API ---------------------------------------------------------------------

    def cluster_info(self) -> dict[str, Any]:
        return self.nimbus.cluster_info()

    def list(self) -> list[dict[str, Any]]:
        return self.service.list()

    def info(self, name: str) -> dict[str, Any]:
        return self.service.info(name)

    def record(self, name: str) -> dict[str, Any]:
        return self.service.record(name)

    def submit(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        return self.service.submit(body, owner=owner)

    def kill(self, name: str, wait: Any = None) -> dict[str, Any]:
        return self.service.kill(name, wait)

    def set_status(self, name: str, status: str) -> dict[str, Any]:
        return self.service.set_status(name, status)

    def rebalance(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.service.rebalance(name, body)

    def logviewer_token(self, user: str | None, body: Any) -> dict[str, Any]:
        return self.nimbus.log_tokens.mint(user, body)


def api_server(nimbus: Nimbus) -> HttpServer:
    """The server on ``nimbus.host:nimbus.http.port``, bound (not yet serving)."""
    conf = nimbus.conf
    backend = NimbusBackend(nimbus)
    limits = Limits.for_conf(conf)
    registry = prometheus.registry(nimbus.service.prometheus_snapshot)
    app = create_app(backend, squall=backend, registry=registry, gate=Gate.for_conf(conf),
                     max_requests=conf["nimbus.http.max.connections"], request_timeout=limits.request_secs,
                     max_requests_per_user=conf["nimbus.http.max.connections.per.user"])
    return HttpServer(app, conf["nimbus.host"], conf["nimbus.http.port"], tls_context=tls_for_conf(conf),
                      limits=limits, name="nimbus-http")
