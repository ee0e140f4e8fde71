"""Storm's logviewer, served by each supervisor: its workers' logs (and its daemons', from
``storm.log.dir``) over HTTP(S), with the cluster's TLS and the tokens nimbus mints for it
(squall.supervisor.logviewer_auth: a user's own token never comes here).

Storm's routes and parameters (``file`` is ``<topology id>/<port>/worker.log``, or ``events.log``,
the event logger's)::

    GET /api/v1/log?file=&start=&length=&grep=      a page of the file (text; the last 51,200
                                                    bytes by default); X-Log-Start, X-Log-End
                                                    and X-Log-Size say which bytes of how many
    GET /api/v1/download?file=                      the whole file
    GET /api/v1/search?file=&search-string=&num-matches=&start-byte-offset=[&is-daemon=yes]
                                                    matches with their context (JSON, Storm's shape)
    GET /api/v1/listLogs?topoId=&port=              the worker logs this user may read (JSON)
    GET /api/v1/daemonlog?file=&start=&length=&grep=   and /api/v1/daemondownload?file=
    GET /api/v1/dumps/:topology-id/:host-port[/:file]  a worker's stack dumps and profiles
                                                    (squall.supervisor.dumps)

Who may read (squall.security.authz.may_read_logs): ``nimbus.admins`` and ``logs.users``
everything; a topology's owner, its ``topology.users`` and its own ``logs.users`` its
workers' logs (as recorded beside them at launch, so that they stay readable, by the same
people, after the topology is killed).  A browser opening a /api/v1/log link with no token
gets the log page (squall/ui/static/log.html), which takes the token from the address's
``#token=`` (the UI puts one there that nimbus minted for this logviewer), and reads the
same link with it.

At most MAX_REQUESTS requests at once, and ``logviewer.max.requests.per.user`` of one
user's (a download holds its place until its last byte is sent): past either, 503 or 429
at once (squall.httpd.budget), so one user's slow downloads leave the others theirs.

The files are the supervisor's own (root's, where it is root): read without following a
link all the same.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import structlog
from prometheus_client.registry import CollectorRegistry
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from squall.cluster.state import ClusterState
from squall.cluster.watches import DataWatch
from squall.errors import ApiError, ConfigError
from squall.httpd.answers import JsonAnswer, call
from squall.httpd.guard import Guard
from squall.httpd.server import HttpServer, tls_for_conf
from squall.security import authz
from squall.supervisor import dumps, logfiles
from squall.supervisor.logfiles import BadLogRequest
from squall.supervisor.logviewer_auth import LogviewerGate
from squall.supervisor.workers import open_plain_file
from squall.ui import STATIC

log = structlog.get_logger("squall.supervisor.logviewer")

SEARCH_CHUNK = 1 << 20
DOWNLOAD_CHUNK = 1 << 16
MAX_REQUESTS = 16


class LogNotFound(ApiError):
    def __init__(self, name: str) -> None:
        super().__init__(404, f"no such log on this node: {name}")


def open_log(path: Path) -> int:
    """A descriptor of the plain file at ``path``, not reached through a link; LogNotFound else."""
    fd = open_plain_file(path)
    if fd is None:
        raise LogNotFound(path.name)
    return fd


def read_range(path: Path, start: int | None, length: int | None,
               grep: str | None) -> tuple[bytes, int, int, int]:
    """(bytes, start, end, size) of a page of the file (only its lines holding ``grep``)."""
    fd = open_log(path)
    try:
        size = os.fstat(fd).st_size
        lo, hi = logfiles.page_bounds(size, start, length)
        data = os.pread(fd, hi - lo, lo)
    finally:
        os.close(fd)
    if grep:
        data = logfiles.grep_lines(data, grep.encode())
    return data, lo, hi, size


def search_file(path: Path, needle: bytes, limit: int, offset: int) -> dict[str, Any]:
    """Storm's search answer: up to ``limit`` matches from byte ``offset`` on, and where the
    next search goes on (``nextByteOffset``) when it stopped short of the file's end."""
    fd = open_log(path)
    try:
        size = os.fstat(fd).st_size
        matches: list[dict[str, Any]] = []
        at = min(max(offset, 0), size)
        while at < size and len(matches) < limit:
            base = max(0, at - logfiles.SEARCH_CONTEXT)
            hi = min(size, at + SEARCH_CHUNK)
            data = os.pread(fd, hi + len(needle) + logfiles.SEARCH_CONTEXT - base, base)
            matches += logfiles.find_matches(data, base, needle, limit - len(matches), at - base, hi - base)
            at = hi
    finally:
        os.close(fd)
    answer: dict[str, Any] = {"searchString": needle.decode(errors="replace"), "startByteOffset": offset,
                              "matches": matches}
    if len(matches) == limit:
        answer["nextByteOffset"] = matches[-1]["byteOffset"] + len(needle)
    return answer


def _int(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise BadLogRequest(f"{name} must be a whole number of bytes, got {value[:50]!r}") from None


class Logs:
    """The node's log files and who may read which."""

    def __init__(self, conf: dict[str, Any], local_dir: Path) -> None:
        self.conf = conf
        self.local_dir = local_dir
        self.daemon_dir = Path(conf["storm.log.dir"]) if conf.get("storm.log.dir") else None

    def readers(self, topology_id: str, port: int) -> dict[str, Any]:
        path = logfiles.worker_dir(self.local_dir, topology_id, port) / logfiles.READERS
        try:
            fd = open_log(path)
            with os.fdopen(fd, "rb") as f:
                record = json.loads(f.read(1 << 20))
        except (LogNotFound, ValueError):
            record = None
        # No record (a worker of before the logviewer): its logs are the admins' only.
        return record if isinstance(record, dict) else {"topology": topology_id}

    def worker_path(self, user: str | None, name: str | None) -> Path:
        """The worker log ``name`` (``<topology id>/<port>/worker.log``) if ``user`` may read it."""
        wanted = logfiles.worker_file(name)
        self.authorize(user, self.readers(wanted.topology_id, wanted.port))
        return wanted.path(self.local_dir)

    def daemon_path(self, user: str | None, name: str | None) -> Path:
        self.authorize(user, None)
        if self.daemon_dir is None:
            msg = "this supervisor serves no daemon logs (storm.log.dir is not set)"
            raise ApiError(404, msg)
        return self.daemon_dir / logfiles.daemon_file(name)

    def authorize(self, user: str | None, readers: dict[str, Any] | None) -> None:
        if user is None:
            return  # insecure: everyone may
        decision = authz.may_read_logs(user, self.conf, readers)
        if not decision.allowed:
            raise ApiError(403, decision.reason)

    def listing(self, user: str | None, topology_id: str | None, port: int | None) -> list[str]:
        """The worker logs ``user`` may read, of a topology and port if given, sorted."""
        base = self.local_dir / logfiles.ARTIFACTS
        out = []
        for topology_dir in sorted(base.iterdir()) if base.is_dir() else []:
            if topology_id and topology_dir.name != topology_id:
                continue
            for port_dir in sorted(topology_dir.iterdir()):
                if not port_dir.name.isdigit() or (port is not None and int(port_dir.name) != port):
                    continue
                try:
                    self.authorize(user, self.readers(topology_dir.name, int(port_dir.name)))
                except ApiError:
                    continue
                for entry in sorted(port_dir.iterdir()):
                    try:
                        out.append(logfiles.worker_file(f"{topology_dir.name}/{port_dir.name}/{entry.name}").relative)
                    except BadLogRequest:
                        continue
        return out


# -- the routes ---------------------------------------------------------------------------------


def _logs(request: Request) -> Logs:
    return request.app.state.logs  # type: ignore[no-any-return]


def _user(request: Request) -> str | None:
    return getattr(request.state, "user", None)


async def _page(request: Request, daemon: bool) -> Response:
    logs, user, q = _logs(request), _user(request), request.query_params

    def read() -> tuple[bytes, int, int, int]:
        path = logs.daemon_path(user, q.get("file")) if daemon else logs.worker_path(user, q.get("file"))
        return read_range(path, _int(request, "start"), _int(request, "length"), q.get("grep"))

    data, start, end, size = await call(request, read)
    return Response(data, media_type="text/plain; charset=utf-8",
                    headers={"X-Log-Start": str(start), "X-Log-End": str(end), "X-Log-Size": str(size),
                             "Cache-Control": "no-store"})


async def worker_log(request: Request) -> Response:
    return await _page(request, daemon=False)


async def daemon_log(request: Request) -> Response:
    return await _page(request, daemon=True)


async def _download(request: Request, daemon: bool) -> Response:
    logs, user, name = _logs(request), _user(request), request.query_params.get("file")

    def opened() -> tuple[int, str]:
        path = logs.daemon_path(user, name) if daemon else logs.worker_path(user, name)
        return open_log(path), path.name

    fd, filename = await call(request, opened)

    def chunks() -> Iterator[bytes]:
        with os.fdopen(fd, "rb") as f:
            while chunk := f.read(DOWNLOAD_CHUNK):
                yield chunk

    prefix = "" if daemon else (name or "").split("/")[0] + "-" + (name or "").split("/")[1] + "-"
    return StreamingResponse(chunks(), media_type="application/octet-stream", headers={
        "Content-Disposition": f'attachment; filename="{prefix}{filename}"'})


async def download(request: Request) -> Response:
    return await _download(request, daemon=False)


async def daemon_download(request: Request) -> Response:
    return await _download(request, daemon=True)


async def search(request: Request) -> Response:
    logs, user, q = _logs(request), _user(request), request.query_params
    daemon = q.get("is-daemon") == "yes"

    def find() -> dict[str, Any]:
        path = logs.daemon_path(user, q.get("file")) if daemon else logs.worker_path(user, q.get("file"))
        needle = logfiles.needle_of(q.get("search-string"))
        limit = _int(request, "num-matches") or logfiles.DEFAULT_MATCHES
        answer = search_file(path, needle, max(1, min(limit, 1000)), _int(request, "start-byte-offset") or 0)
        return {**answer, "file": q.get("file"), "isDaemon": "yes" if daemon else "no"}

    return JsonAnswer(await call(request, find))


async def list_logs(request: Request) -> Response:
    logs, user = _logs(request), _user(request)
    port = _int(request, "port")
    return JsonAnswer(await call(request, logs.listing, user, request.query_params.get("topoId"), port))


async def api_error(request: Request, exc: Exception) -> Response:
    status = exc.status if isinstance(exc, ApiError) else 500
    return JsonAnswer({"error": str(exc)}, status)


ROUTES = [
    Route("/api/v1/log", worker_log, methods=["GET"]),
    Route("/api/v1/download", download, methods=["GET"]),
    Route("/api/v1/search", search, methods=["GET"]),
    Route("/api/v1/listLogs", list_logs, methods=["GET"]),
    Route("/api/v1/searchLogs", list_logs, methods=["GET"]),
    Route("/api/v1/daemonlog", daemon_log, methods=["GET"]),
    Route("/api/v1/daemondownload", daemon_download, methods=["GET"]),
    *dumps.ROUTES,
    Mount("/ui", StaticFiles(directory=STATIC), name="ui"),
]


class BrowserPage:
    """A browser following a log link (it asks for HTML, and has no token to send) gets the
    log page, which reads the same link again with the token; everything else goes on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        listing = path.startswith("/api/v1/dumps/") and path.count("/") == 5
        if scope["type"] == "http" and scope["method"] == "GET" and (
                path in ("/api/v1/log", "/api/v1/daemonlog") or listing):
            headers = Headers(scope=scope)
            if "authorization" not in headers and "text/html" in headers.get("accept", ""):
                page = "dumps.html" if listing else "log.html"
                await FileResponse(STATIC / page)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(conf: dict[str, Any], local_dir: Path, gate: LogviewerGate | None) -> ASGIApp:
    app = Starlette(routes=ROUTES, exception_handlers={ApiError: api_error})
    app.router.redirect_slashes = False
    state: Any = app.state
    state.logs = Logs(conf, local_dir)
    state.registry = CollectorRegistry()
    state.limiter = anyio.CapacityLimiter(MAX_REQUESTS + 1)
    return BrowserPage(Guard(app, gate, MAX_REQUESTS, per_user=conf["logviewer.max.requests.per.user"],
                             server="logviewer"))


class Logviewer:
    """The supervisor's log server on ``storm.local.hostname:logviewer.port``; ``now``: the
    wall clock the tokens' expiry is judged on."""

    def __init__(self, conf: dict[str, Any], local_dir: Path, now: Callable[[], float] = time.time) -> None:
        self.gate = LogviewerGate.for_conf(conf, now)
        app = create_app(conf, local_dir, self.gate)
        self.server = HttpServer(app, conf["storm.local.hostname"], conf["logviewer.port"],
                                 tls_context=tls_for_conf(conf), name="squall-logviewer")
        if self.gate is not None:
            self.gate.audience = self.url  # what it registers: nimbus mints tokens for this
        self._keys_watch: DataWatch | None = None

    @property
    def url(self) -> str:
        return f"{self.server.scheme}://{self.server.host}:{self.server.port}"

    def follow(self, state: ClusterState) -> None:
        """Take the token keys nimbus publishes, now and whenever they change (the
        supervisor calls this once connected to ZooKeeper)."""
        if self.gate is not None and self._keys_watch is None:
            self._keys_watch = state.watch_logviewer_keys(self.gate.trust)

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        if self._keys_watch is not None:
            self._keys_watch.stop()
        self.server.stop()


def start_logviewer(conf: dict[str, Any], local_dir: Path) -> Logviewer | None:
    """The node's logviewer, serving; None (and said why) when it is off or cannot start:
    the supervisor's work goes on without it."""
    if conf.get("logviewer.port") is None:
        return None
    try:
        viewer = Logviewer(conf, local_dir)
        viewer.start()
    except (OSError, ConfigError, RuntimeError) as e:
        log.error("logviewer not started: workers run, their logs are not served", error=str(e),
                  port=conf.get("logviewer.port"))
        return None
    log.info("logviewer serving", url=viewer.url)
    return viewer
