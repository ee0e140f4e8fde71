"""The route table: Storm's UI REST API (its docs/STORM-UI-REST-API.md; the shapes and what
Squall approximates are in squall.ui.storm_api), Squall's own API, ``/metrics`` and the web UI.

``:id`` is a topology's id or its name, ``?window=`` one of 600, 10800, 86400, :all-time::

    GET  /api/v1/cluster/summary | cluster/configuration | supervisor/summary | nimbus/summary
    GET  /api/v1/topology/summary
    GET  /api/v1/topology/:id?window=600          (&sys=1: the acker too)
    GET  /api/v1/topology/:id/component/:component?window=600   (a '/' in it URL-encoded)
    GET  /api/v1/topology/:id/metrics?window=600
    GET  /api/v1/topology/:id/visualization?window=600  the graph: nodes, edges with rates (&sys=1)
    GET  /api/v1/topology-workers/:id
    POST /api/v1/topology/:id/activate | deactivate | rebalance/:wait | kill/:wait
         rebalance's body: {"rebalanceOptions": {"numWorkers": N, "executors": {component: n}}}
    GET  /api/v1/topology/:id/autoscale           self-regulation: its switch, settings, action log
    POST /api/v1/topology/:id/autoscale/:action   enable or disable it (as who may rebalance)
    GET|POST /api/v1/topology/:id/profiling/start/:host-port/:timeout   profile a worker: py-spy
         records for :timeout minutes (Storm's unit) or seconds (``30s``); ?format=speedscope
         for a speedscope JSON instead of a flame graph (SVG)
    GET|POST /api/v1/topology/:id/profiling/stop | dumpprofile | dumpjstack | restartworker/:host-port
         end the record early | write it now and record on | every thread's stack (?locals=1:
         with locals) | restart the worker; dumpheap: 501, a Python worker has no heap dump
         (squall.nimbus.profiling; the outputs: the logviewer's /api/v1/dumps/:id/:host-port)
    POST /api/v1/topology/:id/debug/:action/:spct   action enable or disable: sample spct percent
    POST /api/v1/topology/:id/component/:component/debug/:action/:spct
         (0-100) of the tuples its components (or that one) emit into their workers' events.log
    GET  /api/v1/topology/:id/logconfig           the log levels set on its workers
    POST /api/v1/topology/:id/logconfig           set or reset them (squall.ui.logconfig):
         {"namedLoggerLevels": {"ROOT": {"target_level": "DEBUG", "timeout": 30}}}

Squall's own (nimbus only; local mode answers 404):

    GET  /api/v1/cluster                          who leads, supervisors, slots
    GET  /api/v1/topologies                       list
    POST /api/v1/topologies                       submit {name, topology, conf, code}
    GET  /api/v1/topologies/<name>                info: status, workers, stats, errors
    POST /api/v1/topologies/<name>/kill           {wait_secs}
    POST /api/v1/topologies/<name>/activate | deactivate
    POST /api/v1/topologies/<name>/rebalance      {workers, executors: {component: n}, wait_secs}
    POST /api/v1/logviewer/token                  {"logviewer": <a logviewer's base URL>}: a token
         for reading that logviewer as this user, valid logviewer.token.validity.secs
         (squall.nimbus.logtokens); the logviewers take no other

    GET  /metrics                                 Prometheus
    GET  /  and  /ui/<file>                       the web UI (static files), reading only the API above

Path parameters are matched on the path as sent, each segment decoded on its own, so an
encoded '/' (``%2F``) stays inside its component id (see squall.httpd.guard.raw_api_path).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from squall.errors import ApiError
from squall.httpd.answers import JsonAnswer, call, json_body, raw_body, target
from squall.metrics.book import window_id
from squall.runtime import profiling
from squall.security import authz
from squall.ui import STATIC, logconfig, storm_api

STORM_ACTIONS = {"activate": 0, "deactivate": 0, "rebalance": 1, "kill": 1}  # -> path arguments (wait)
SUMMARIES = ("cluster", "supervisor", "nimbus", "topology")


class Segment(Convertor[str]):
    """One path segment as sent, percent-decoded: ``a%2Fb`` is ``a/b``."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return quote(value, safe="")


register_url_convertor("seg", Segment())


def _authorize(request: Request, action: str, topology: dict[str, Any] | None = None) -> None:
    gate = request.app.state.gate
    if gate is not None:
        gate.authorize(request.state.user, action, topology)


def _query(request: Request) -> tuple[str, bool]:
    query = parse_qs(request.scope["query_string"].decode("latin-1"))
    try:
        window = window_id(query.get("window", [None])[0])
    except ValueError as e:
        raise ApiError(400, str(e)) from e
    return window, query.get("sys", ["0"])[0].lower() in ("1", "true")


# -- Storm's UI REST API ----------------------------------------------------------------------


def _summary(head: str) -> Route:
    async def summary(request: Request) -> Response:
        return JsonAnswer(await call(request, request.app.state.backend.views.summary, head))

    return Route(f"/api/v1/{head}/summary", summary, methods=["GET"], name=f"{head}-summary")


async def configuration(request: Request) -> Response:
    return JsonAnswer(request.app.state.backend.conf)


async def topology_page(request: Request, part: str | None) -> Response:
    """The topology's page, or one ``part`` of it: metrics, visualization, a component."""
    window, sys = _query(request)
    views, ident = request.app.state.backend.views, request.path_params["id"]

    def page() -> Any:
        now = views.now()
        resolved = views.resolve(ident)
        _authorize(request, authz.READ_TOPOLOGY, resolved)
        if part == "visualization":
            return views.visualization(ident, window, sys)
        view = views.view(resolved, details=True)
        if part == "metrics":
            return storm_api.topology_metrics(view, window, sys)
        if part == "component":
            component = request.path_params["component"]
            if component not in view.components:
                msg = f"topology {view.name!r} has no component {component!r}"
                raise ApiError(404, msg)
            return storm_api.component_page(view, component, window, now, sys)
        return storm_api.topology_page(view, window, now, sys)

    return JsonAnswer(await call(request, page))


def _page(part: str | None) -> Any:
    async def endpoint(request: Request) -> Response:
        return await topology_page(request, part)

    return endpoint


async def topology_workers(request: Request) -> Response:
    views = request.app.state.backend.views

    def workers() -> Any:
        resolved = views.resolve(request.path_params["id"])
        _authorize(request, authz.READ_TOPOLOGY, resolved)
        return storm_api.topology_workers(views.view(resolved))

    return JsonAnswer(await call(request, workers))


async def topology_action(request: Request) -> Response:
    """``POST /api/v1/topology/:id/<action>[/<wait>]``; anything else under it is refused as
    Storm's paths are: 405 for another method, 404 for another action or arity."""
    ident, action = request.path_params["id"], request.path_params["action"]
    args = [request.path_params["wait"]] if "wait" in request.path_params else []
    if action not in STORM_ACTIONS:
        if request.method != "GET":
            msg = f"{request.method} {target(request)} is not supported"
            raise ApiError(405, msg)
        raise ApiError(404, f"no such endpoint {target(request)!r}")
    if request.method != "POST":
        msg = f"{request.method} {target(request)} is not supported: POST it"
        raise ApiError(405, msg)
    if len(args) != STORM_ACTIONS[action]:
        usage = "/api/v1/topology/:id/" + action + ("/:wait-time" if STORM_ACTIONS[action] else "")
        msg = f"no such endpoint {target(request)!r} (it is {usage})"
        raise ApiError(404, msg)
    try:
        wait = storm_api.wait_secs(args[0]) if args else 0
    except ValueError as e:
        raise ApiError(400, str(e)) from e
    # Storm's clients may send a form or nothing: only rebalance's body is read as JSON.
    body = await json_body(request) if action == "rebalance" else await raw_body(request)
    backend = request.app.state.backend

    def act() -> Any:
        backend.leadership.require_leader()
        _authorize(request, action, backend.views.resolve(ident))
        return backend.control.storm_action(ident, action, wait, body)

    return JsonAnswer(await call(request, act))


async def topology_logconfig(request: Request) -> Response:
    """Storm's ``/api/v1/topology/:id/logconfig``: its readers may read it; a POST sets or
    resets levels, as the owner, topology.users or an admin may."""
    backend, ident = request.app.state.backend, request.path_params["id"]
    if request.method == "GET":
        def read() -> Any:
            _authorize(request, authz.READ_TOPOLOGY, backend.views.resolve(ident))
            return backend.control.log_config(ident)

        return JsonAnswer(await call(request, read))
    try:
        changes = logconfig.logconfig_request(await json_body(request))
    except ValueError as e:
        raise ApiError(400, str(e)) from e

    def change() -> Any:
        backend.leadership.require_leader()
        _authorize(request, authz.SET_LOG_LEVEL, backend.views.resolve(ident))
        return backend.control.set_log_config(ident, changes)

    return JsonAnswer(await call(request, change))


async def topology_autoscale(request: Request) -> Response:
    """Squall's ``/api/v1/topology/:id/autoscale``: self-regulation's switch, settings and
    action log for its readers; ``POST .../autoscale/enable|disable`` for those who may
    rebalance it (self-regulation acts through rebalance)."""
    backend, ident = request.app.state.backend, request.path_params["id"]
    action = request.path_params.get("action")
    service = backend.autoscale
    if service is None:
        raise ApiError(404, "self-regulation runs on a cluster's nimbus, not in local mode")
    if action is None:
        if request.method != "GET":
            raise ApiError(405, f"{request.method} {target(request)} is not supported: GET it")

        def read() -> Any:
            _authorize(request, authz.READ_TOPOLOGY, backend.views.resolve(ident))
            return service.describe(ident)

        return JsonAnswer(await call(request, read))
    if action not in ("enable", "disable"):
        raise ApiError(404, f"no such endpoint {target(request)!r} (it is /api/v1/topology/:id/autoscale/"
                            "enable or /disable)")
    if request.method != "POST":
        raise ApiError(405, f"{request.method} {target(request)} is not supported: POST it")

    def change() -> Any:
        backend.leadership.require_leader()
        _authorize(request, "rebalance", backend.views.resolve(ident))
        return service.switch(ident, action == "enable")

    return JsonAnswer(await call(request, change))


NO_HEAP_DUMP = ("a Python worker has no heap to dump (Storm's dumpheap is the JVM's jmap): "
                "dumpjstack gives every thread's stack, start a sampled profile")


async def topology_profiling(request: Request) -> Response:
    """Storm's ``/api/v1/topology/:id/profiling/<action>/:host-port[/:timeout]`` (GET as Storm's
    UI sends it, or POST): checked here and by nimbus, carried out by the worker's supervisor."""
    params = request.path_params
    ident, action, worker = params["id"], params["action"], params["worker"]
    timeout = params.get("timeout")
    if action == "dumpheap":
        raise ApiError(501, NO_HEAP_DUMP)
    if action not in profiling.STORM_ACTIONS:
        known = ", ".join(a for a in profiling.STORM_ACTIONS)
        raise ApiError(404, f"no such profiling action {action!r} ({known})")
    if (timeout is not None) != (action == "start"):
        usage = "/api/v1/topology/:id/profiling/" + action + "/:host-port" + (
            "/:timeout" if action == "start" else "")
        raise ApiError(404, f"no such endpoint {target(request)!r} (it is {usage})")
    query = request.query_params
    fmt = query.get("format") or None
    if fmt is not None and fmt not in profiling.FORMATS:
        raise ApiError(400, f"format is one of {', '.join(profiling.FORMATS)}, got {fmt[:40]!r}")
    locals_ = (query.get("locals") or "").lower() in ("1", "true", "yes")
    await raw_body(request)  # Storm's clients may send a form or nothing: not read
    backend = request.app.state.backend

    def ask() -> Any:
        backend.leadership.require_leader()
        _authorize(request, authz.PROFILE, backend.views.resolve(ident))
        return backend.control.profile(ident, action, worker, timeout, fmt, locals_,
                                       getattr(request.state, "user", None))

    return JsonAnswer(await call(request, ask))


PROFILING = "/api/v1/topology/{id:seg}/profiling/{action:seg}/{worker:seg}"

async def topology_debug(request: Request) -> Response:
    """Storm's debug action, for the topology or one component: as the owner, topology.users
    or an admin may.  A bad action or percentage is a 400 (squall.runtime.debug_options)."""
    backend, params = request.app.state.backend, request.path_params
    ident, component = params["id"], params.get("component")
    await raw_body(request)  # Storm's UI posts nothing; whatever comes is not read

    def act() -> Any:
        backend.leadership.require_leader()
        _authorize(request, authz.DEBUG, backend.views.resolve(ident))
        return backend.control.debug(ident, component, params["action"], params["spct"])

    return JsonAnswer(await call(request, act))


STORM: list[BaseRoute] = [
    *(_summary(head) for head in SUMMARIES),
    Route("/api/v1/cluster/configuration", configuration, methods=["GET"]),
    Route("/api/v1/topology/{id:seg}", _page(None), methods=["GET"]),
    Route("/api/v1/topology/{id:seg}/metrics", _page("metrics"), methods=["GET"]),
    Route("/api/v1/topology/{id:seg}/visualization", _page("visualization"), methods=["GET"]),
    Route("/api/v1/topology/{id:seg}/component/{component:seg}", _page("component"), methods=["GET"]),
    Route("/api/v1/topology/{id:seg}/logconfig", topology_logconfig, methods=["GET", "POST"]),
    Route("/api/v1/topology/{id:seg}/autoscale", topology_autoscale, methods=["GET", "POST"]),
    Route("/api/v1/topology/{id:seg}/autoscale/{action:seg}", topology_autoscale, methods=["GET", "POST"]),
    Route(PROFILING, topology_profiling, methods=["GET", "POST"]),
    Route(PROFILING + "/{timeout:seg}", topology_profiling, methods=["GET", "POST"]),
    Route("/api/v1/topology/{id:seg}/debug/{action:seg}/{spct:seg}", topology_debug, methods=["POST"]),
    Route("/api/v1/topology/{id:seg}/component/{component:seg}/debug/{action:seg}/{spct:seg}",
          topology_debug, methods=["POST"]),
    Route("/api/v1/topology/{id:seg}/{action:seg}", topology_action, methods=["GET", "POST"]),
    Route("/api/v1/topology/{id:seg}/{action:seg}/{wait:seg}", topology_action, methods=["GET", "POST"]),
    Route("/api/v1/topology-workers/{id:seg}", topology_workers, methods=["GET"]),
]


# -- Squall's own API -------------------------------------------------------------------------


async def cluster_info(request: Request) -> Response:
    return JsonAnswer(await call(request, request.app.state.squall.cluster_info))


async def topologies(request: Request) -> Response:
    squall = request.app.state.squall
    if request.method == "GET":
        return JsonAnswer(await call(request, squall.topologies.list))
    body = await _object(request)

    def submit() -> Any:
        request.app.state.backend.leadership.require_leader()
        _authorize(request, authz.SUBMIT)
        return squall.submission.submit(body, owner=request.state.user)

    return JsonAnswer(await call(request, submit))


async def topology_info(request: Request) -> Response:
    squall, name = request.app.state.squall, request.path_params["name"]
    if request.method == "GET":
        def info() -> Any:
            _authorize(request, authz.READ_TOPOLOGY, squall.topologies.record(name))
            return squall.topologies.info(name)

        return JsonAnswer(await call(request, info))
    await _object(request)
    raise ApiError(404, "no such action '' (kill, activate, deactivate, rebalance)")


async def topology_change(request: Request) -> Response:
    squall, name = request.app.state.squall, request.path_params["name"]
    action = request.path_params["action"]
    body = await _object(request)

    def change() -> Any:
        request.app.state.backend.leadership.require_leader()
        if action in authz.MANAGE:
            _authorize(request, action, squall.topologies.record(name))
        if action == "kill":
            return squall.changes.kill(name, body.get("wait_secs"))
        if action in ("activate", "deactivate"):
            return squall.changes.set_status(name, "active" if action == "activate" else "inactive")
        if action == "rebalance":
            return squall.changes.rebalance(name, body)
        raise ApiError(404, f"no such action {action!r} (kill, activate, deactivate, rebalance)")

    return JsonAnswer(await call(request, change))


async def logviewer_token(request: Request) -> Response:
    """Not a JsonAnswer: the token is this answer's point, and redaction would hide it."""
    body = await _object(request)
    answer = await call(request, request.app.state.squall.log_tokens.mint, request.state.user, body)
    return Response(json.dumps(answer), media_type="application/json", headers={"Cache-Control": "no-store"})


async def _object(request: Request) -> dict[str, Any]:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


SQUALL: list[BaseRoute] = [
    Route("/api/v1/cluster", cluster_info, methods=["GET"]),
    Route("/api/v1/topologies", topologies, methods=["GET", "POST"]),
    Route("/api/v1/topologies/{name:seg}", topology_info, methods=["GET", "POST"]),
    Route("/api/v1/topologies/{name:seg}/{action:seg}", topology_change, methods=["POST"]),
    Route("/api/v1/logviewer/token", logviewer_token, methods=["POST"]),
]


# -- /metrics and the web UI --------------------------------------------------------------------


async def metrics(request: Request) -> Response:
    text = await call(request, generate_latest, request.app.state.registry)
    return Response(text, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html")


PAGES: list[BaseRoute] = [
    Route("/metrics", metrics, methods=["GET"]),
    Route("/metrics/", metrics, methods=["GET"]),
    Route("/", index, methods=["GET"]),
    Route("/ui", index, methods=["GET"]),
    Mount("/ui", StaticFiles(directory=STATIC, html=True), name="ui"),
]
