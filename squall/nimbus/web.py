"""Nimbus's HTTP API, web UI and /metrics: the app of squall.ui, its routes calling the
services that do the work (views, control, submission, the log tokens), served by
squall.httpd.server (TLS, tokens and limits from the conf: ``nimbus.http.*``,
``nimbus.tls.*``).  Only the leader changes anything; a standby answers 503 naming it."""

from __future__ import annotations

from typing import Any, Protocol

from squall.httpd.auth import Gate
from squall.httpd.connections import Limits
from squall.httpd.server import HttpServer, tls_for_conf
from squall.nimbus.autoscale import Autoscaler
from squall.nimbus.control import TopologyControl
from squall.nimbus.logtokens import LogviewerTokens
from squall.nimbus.submission import Submission
from squall.nimbus.views import TopologyViews
from squall.ui import prometheus
from squall.ui.app import create_app
from squall.ui.backend import Backend, SquallApi


class Nimbus(Protocol):
    """What the web side asks of the nimbus daemon (squall.nimbus.daemon, which imports this)."""

    conf: dict[str, Any]
    views: TopologyViews
    control: TopologyControl
    autoscaler: Autoscaler
    submission: Submission
    log_tokens: LogviewerTokens

    def require_leader(self) -> None: ...

    def leader_url(self) -> str | None: ...

    def cluster_info(self) -> dict[str, Any]: ...


def api_server(nimbus: Nimbus) -> HttpServer:
    """The server on ``nimbus.host:nimbus.http.port``, bound (not yet serving)."""
    conf = nimbus.conf
    backend = Backend(conf, views=nimbus.views, control=nimbus.control, leadership=nimbus,
                      autoscale=nimbus.autoscaler)
    squall = SquallApi(nimbus.cluster_info, topologies=nimbus.views, changes=nimbus.control,
                       submission=nimbus.submission, log_tokens=nimbus.log_tokens)
    limits = Limits.for_conf(conf)
    registry = prometheus.registry(nimbus.views.prometheus_snapshot)
    app = create_app(backend, squall=squall, registry=registry, gate=Gate.for_conf(conf),
                     max_requests=conf["nimbus.http.max.connections"], request_timeout=limits.request_secs,
                     max_requests_per_user=conf["nimbus.http.max.connections.per.user"])
    return HttpServer(app, conf["nimbus.host"], conf["nimbus.http.port"], tls_context=tls_for_conf(conf),
                      limits=limits, name="nimbus-http")
