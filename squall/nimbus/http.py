"""Nimbus's HTTP JSON API.

    GET  /api/v1/cluster                          who leads, supervisors, slots
    GET  /api/v1/topologies                       list
    POST /api/v1/topologies                       submit {name, topology, conf, code}
    GET  /api/v1/topologies/<name>                info: status, workers, stats, errors
    POST /api/v1/topologies/<name>/kill           {wait_secs}
    POST /api/v1/topologies/<name>/activate
    POST /api/v1/topologies/<name>/deactivate
    POST /api/v1/topologies/<name>/rebalance      {workers, executors: {component: n}}

Storm's UI REST API besides (its docs/STORM-UI-REST-API.md; the shapes and
what Squall approximates are in squall.nimbus.storm_api), ``:id`` being a
topology's id or its name, ``?window=`` one of 600, 10800, 86400, :all-time::

    GET  /api/v1/cluster/summary | cluster/configuration | supervisor/summary | nimbus/summary
    GET  /api/v1/topology/summary
    GET  /api/v1/topology/:id?window=600          (&sys=1: the acker too)
    GET  /api/v1/topology/:id/component/:component?window=600   (a '/' in it URL-encoded)
    GET  /api/v1/topology/:id/metrics?window=600
    GET  /api/v1/topology-workers/:id
    POST /api/v1/topology/:id/activate | deactivate | rebalance/:wait | kill/:wait
         rebalance's body: {"rebalanceOptions": {"numWorkers": N, "executors": {component: n}}}

    GET  /api/v1/topology/:id/visualization?window=600  the graph: nodes, edges with rates (&sys=1)

    GET  /metrics                                 Prometheus (see squall.nimbus.prometheus)
    GET  /  and  /ui/<file>                       the web UI (squall.ui), reading only the API above

Errors are ``{"error": message}`` with 400 (bad input), 401 (no or a wrong
token), 403 (not allowed), 404 (no such topology), 409 (conflict), 503 (this
nimbus is not the leader, the body naming the leader's URL; or too busy).
Only the leader changes anything.

Secure mode (``squall.secure``, squall.nimbus.guard): HTTPS, and every request
but the UI's own static files carries ``Authorization: Bearer <token>``; every
POST leaves an audit line; every answer has its secrets redacted.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from squall import __version__, ui
from squall.metrics.book import window_id
from squall.nimbus import prometheus
from squall.nimbus import storm_api as api
from squall.nimbus.guard import Gate, GuardedHTTPServer, Unauthorized, server_tls
from squall.nimbus.service import ApiError
from squall.security import authz
from squall.security.redact import redact_answer

if TYPE_CHECKING:
    from squall.nimbus.daemon import Nimbus

log = structlog.get_logger("squall.nimbus.http")

MAX_BODY = 64 * 1024 * 1024
PREFIX = "/api/v1/"
STORM_ROOTS = ("supervisor", "nimbus", "topology", "topology-workers")  # and cluster/<what>
STORM_ACTIONS = {"activate": 0, "deactivate": 0, "rebalance": 1, "kill": 1}  # -> path arguments (wait)


class ApiHandler(BaseHTTPRequestHandler):
    """The HTTP API and the web UI.  Both nimbus (:class:`ApiServer`) and local mode
    (squall.local.ui, a subclass answering from a LocalCluster) serve through it; a server
    makes a subclass with ``nimbus`` (what answers) and ``metrics`` (the Prometheus registry)."""

    server_version = "squall-nimbus"
    nimbus: Nimbus
    metrics: CollectorRegistry
    gate: Gate | None = None  # None: no authentication (insecure mode, local mode's UI)
    user: str | None = None  # who sent this request, once authenticated

    # A request line without a version (HTTP/0.9's) still gets a status line back.
    default_request_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("http", request=format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (a bad request line, headers too long) as JSON, like ours."""
        self.close_connection = True
        if code == 501:  # a method we do not serve: the client's mistake, not a server fault
            code = 405
        try:
            self._reply(code, {"error": message or explain or f"HTTP {code}"}, {"Connection": "close"})
        except OSError:
            pass

    def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(redact_answer(body)).encode(), "application/json", headers)

    def _send(self, status: int, data: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _raw_body(self) -> bytes:
        header = self.headers.get("Content-Length") or "0"
        # Digits only: int() would take "-1" (reading to EOF past the cap) or " 12 ".
        if not header.isdigit():
            msg = f"Content-Length must be a number of bytes, got {header!r}"
            raise ApiError(400, msg)
        length = int(header)
        if length > MAX_BODY:
            raise ApiError(413, f"request body over {MAX_BODY} bytes")
        try:
            data = self.rfile.read(length) if length else b""
        except (TimeoutError, OSError) as e:
            msg = "the request body did not arrive in time (nimbus.http.timeout.secs)"
            raise ApiError(408, msg) from e
        if len(data) < length:
            msg = f"the request body ended after {len(data)} of {length} bytes"
            raise ApiError(400, msg)
        self._request_read()
        return data

    def _request_read(self) -> None:
        """The whole request is in: the server's deadline for sending it no longer applies."""
        done = getattr(self.server, "done_reading", None)
        if done is not None:
            done(self.connection)

    def _body(self) -> Any:
        raw = self._raw_body()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:  # bad JSON, bad UTF-8, nesting too deep
            msg = f"the request body is not valid JSON: {str(e)[:200]}"
            raise ApiError(400, msg) from e

    def _authenticate(self, method: str, path: str) -> None:
        if self.gate is None:
            return
        if method == "GET" and (path == "/" or path.startswith("/ui/") or path == "/ui"):
            return  # the UI's own files: the same in every install, no data in them
        self.user = self.gate.authenticate(self.headers.get("Authorization"))

    def _authorize(self, action: str, topology: dict[str, Any] | None = None) -> None:
        if self.gate is not None:
            assert self.user is not None
            self.gate.authorize(self.user, action, topology)

    def _route(self, method: str) -> None:
        self.status = 0
        try:
            self._route_checked(method)
        finally:
            if method != "GET":  # who changed what, allowed or not (user None: insecure mode)
                Gate.audit(self.user, method, self.path[:300], self.status, self.client_address[0])

    def _route_checked(self, method: str) -> None:
        try:
            url = urlsplit(self.path)
            self._authenticate(method, url.path)
            if method == "GET":
                self._request_read()
            if url.path in ("/metrics", "/metrics/"):
                if method != "GET":
                    msg = f"{method} /metrics is not supported"
                    raise ApiError(405, msg)
                self._send(200, generate_latest(self.metrics), CONTENT_TYPE_LATEST)
                return
            if url.path == "/" or url.path.startswith("/ui/") or url.path == "/ui":
                self._static(method, url.path)
                return
            if not self.path.startswith(PREFIX):
                raise ApiError(404, f"no such endpoint {self.path!r}")
            parts = [p for p in self.path[len(PREFIX):].split("?")[0].split("/") if p]
            if parts and (parts[0] in STORM_ROOTS or (parts[0] == "cluster" and len(parts) > 1)):
                # Path segments decoded one by one: an encoded '/' stays inside its component id.
                storm = [unquote(p) for p in url.path[len(PREFIX):].split("/") if p]
                self._reply(200, self._storm(method, storm, parse_qs(url.query)))
                return
            self._reply(200, self._dispatch(method, parts))
        except Unauthorized as e:
            headers = {"WWW-Authenticate": 'Bearer realm="squall"'} if e.status == 401 else None
            self._reply(e.status, {"error": str(e)}, headers)
        except ApiError as e:
            body: dict[str, Any] = {"error": str(e)}
            if e.status == 503:
                body["leader"] = self.nimbus.leader_url()
            self._reply(e.status, body)
        except Exception as e:  # noqa: BLE001 - never drop the connection without an answer
            log.exception("api request failed", path=self.path)
            self._reply(500, {"error": f"internal error: {type(e).__name__}: {e}"})

    def _static(self, method: str, path: str) -> None:
        """The web UI's files (squall.ui): ``/`` is the cluster page."""
        if method != "GET":
            msg = f"{method} {path} is not supported"
            raise ApiError(405, msg)
        found = ui.asset(unquote(path[len("/ui/"):]) if path.startswith("/ui/") else "")
        if found is None:
            msg = f"no such file {path!r}"
            raise ApiError(404, msg)
        data, content_type = found
        self._send(200, data, content_type)

    def _dispatch(self, method: str, parts: list[str]) -> Any:
        service = self.nimbus.service
        if parts == ["cluster"] and method == "GET":
            return self.nimbus.cluster_info()
        if parts[:1] != ["topologies"]:
            raise ApiError(404, f"no such endpoint {self.path!r}")
        if method == "GET" and len(parts) == 1:
            return service.list()
        if method == "GET" and len(parts) == 2:
            return service.info(parts[1])
        if method != "POST" or len(parts) > 3:
            raise ApiError(405 if len(parts) <= 3 else 404, f"{method} {self.path} is not supported")
        body = self._body()
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        self.nimbus.require_leader()
        if len(parts) == 1:
            self._authorize(authz.SUBMIT)
            return service.submit(body, owner=self.user)
        name, action = parts[1], (parts[2] if len(parts) == 3 else "")
        if action in authz.MANAGE:
            self._authorize(action, service.record(name))
        if action == "kill":
            return service.kill(name, body.get("wait_secs"))
        if action in ("activate", "deactivate"):
            return service.set_status(name, "active" if action == "activate" else "inactive")
        if action == "rebalance":
            return service.rebalance(name, body)
        raise ApiError(404, f"no such action {action!r} (kill, activate, deactivate, rebalance)")

    # -- Storm's UI REST API ----------------------------------------------------

    def _storm(self, method: str, parts: list[str], query: dict[str, list[str]]) -> Any:
        service = self.nimbus.service
        head, rest = parts[0], parts[1:]
        if head == "topology" and len(rest) >= 2 and rest[1] in STORM_ACTIONS:
            return self._storm_action(method, rest)
        if method != "GET":
            msg = f"{method} {self.path} is not supported"
            raise ApiError(405, msg)
        now = service.now()
        if rest == ["summary"] and head in ("cluster", "supervisor", "nimbus", "topology"):
            return self._storm_summary(head, now)
        if parts == ["cluster", "configuration"]:
            return self.nimbus.conf
        if head == "topology-workers" and len(rest) == 1:
            return api.topology_workers(service.view(service.resolve(rest[0])))
        if head == "topology" and len(rest) in (1, 2, 3):
            try:
                window = window_id(query.get("window", [None])[0])
            except ValueError as e:
                raise ApiError(400, str(e)) from e
            sys = query.get("sys", ["0"])[0].lower() in ("1", "true")
            if rest[1:] == ["visualization"]:
                return service.visualization(rest[0], window, sys)
            view = service.view(service.resolve(rest[0]), details=True)
            if len(rest) == 1:
                return api.topology_page(view, window, now, sys)
            if rest[1:] == ["metrics"]:
                return api.topology_metrics(view, window, sys)

            if len(rest) == 3 and rest[1] == "component":
                if rest[2] not in view.components:
                    msg = f"topology {view.name!r} has no component {rest[2]!r}"
                    raise ApiError(404, msg)
                return api.component_page(view, rest[2], window, now, sys)
        msg = f"no such endpoint {self.path!r}"
        raise ApiError(404, msg)

    def _storm_summary(self, head: str, now: float) -> Any:
        state, service = self.nimbus.state, self.nimbus.service
        supervisors = state.supervisors()
        used = {(w["node"], w["port"]) for a in state.assignments().values() for w in a["workers"]}
        if head == "supervisor":
            return api.supervisor_summary(supervisors, service.supervisors_started(), used, __version__, now)
        if head == "nimbus":
            return api.nimbus_summary(state.nimbuses().values(), self.nimbus.leader_url(), __version__, now)
        views = [service.view(record) for record in state.topologies()]
        if head == "cluster":
            return api.cluster_summary(views, supervisors, used, __version__)
        return api.topology_summary(views, now)

    def _storm_action(self, method: str, rest: list[str]) -> Any:
        ident, action, args = rest[0], rest[1], rest[2:]
        if method != "POST":
            msg = f"{method} {self.path} is not supported: POST it"
            raise ApiError(405, msg)
        if len(args) != STORM_ACTIONS[action]:
            usage = "/api/v1/topology/:id/" + action + ("/:wait-time" if STORM_ACTIONS[action] else "")
            msg = f"no such endpoint {self.path!r} (it is {usage})"
            raise ApiError(404, msg)
        try:
            wait = api.wait_secs(args[0]) if args else 0
        except ValueError as e:
            raise ApiError(400, str(e)) from e
        # Storm's clients may send a form or nothing: only rebalance's body is read as JSON.
        body = self._body() if action == "rebalance" else self._raw_body()
        self.nimbus.require_leader()
        self._authorize(action, self.nimbus.service.resolve(ident))
        return self.nimbus.service.storm_action(ident, action, wait, body)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")


class ApiServer:
    def __init__(self, nimbus: Nimbus, host: str, port: int) -> None:
        conf = nimbus.conf
        metrics = prometheus.registry(nimbus.service.prometheus_snapshot)
        timeout = conf["nimbus.http.timeout.secs"]
        handler = type("Handler", (ApiHandler,), {"nimbus": nimbus, "metrics": metrics,
                                                  "gate": Gate.for_conf(conf), "timeout": timeout})
        self.httpd = GuardedHTTPServer((host, port), handler, timeout_secs=timeout,
                                       tls_context=server_tls(conf),
                                       max_connections=conf["nimbus.http.max.connections"])
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="nimbus-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def scheme(self) -> str:
        return self.httpd.scheme

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
