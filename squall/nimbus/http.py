"""Nimbus's HTTP JSON API.

    GET  /api/v1/cluster                          who leads, supervisors, slots
    GET  /api/v1/topologies                       list
    POST /api/v1/topologies                       submit {name, topology, conf, code}
    GET  /api/v1/topologies/<name>                info: status, workers, stats, errors
    POST /api/v1/topologies/<name>/kill           {wait_secs}
    POST /api/v1/topologies/<name>/activate
    POST /api/v1/topologies/<name>/deactivate
    POST /api/v1/topologies/<name>/rebalance      {workers, executors: {component: n}}

Errors are ``{"error": message}`` with 400 (bad input), 404 (no such
topology), 409 (conflict), 503 (this nimbus is not the leader; the body
names the leader's URL).  Only the leader changes anything.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import structlog

from squall.nimbus.service import ApiError

if TYPE_CHECKING:
    from squall.nimbus.daemon import Nimbus

log = structlog.get_logger("squall.nimbus.http")

MAX_BODY = 64 * 1024 * 1024
PREFIX = "/api/v1/"


class _Handler(BaseHTTPRequestHandler):
    server_version = "squall-nimbus"
    nimbus: Nimbus

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("http", request=format % args)

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ApiError(413, f"request body over {MAX_BODY} bytes")
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError as e:
            raise ApiError(400, f"the request body is not valid JSON: {e}") from e

    def _route(self, method: str) -> None:
        try:
            if not self.path.startswith(PREFIX):
                raise ApiError(404, f"no such endpoint {self.path!r}")
            parts = [p for p in self.path[len(PREFIX):].split("?")[0].split("/") if p]
            self._reply(200, self._dispatch(method, parts))
        except ApiError as e:
            body: dict[str, Any] = {"error": str(e)}
            if e.status == 503:
                body["leader"] = self.nimbus.leader_url()
            self._reply(e.status, body)
        except Exception as e:  # noqa: BLE001 - never drop the connection without an answer
            log.exception("api request failed", path=self.path)
            self._reply(500, {"error": f"internal error: {type(e).__name__}: {e}"})

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
            return service.submit(body)
        name, action = parts[1], (parts[2] if len(parts) == 3 else "")
        if action == "kill":
            return service.kill(name, body.get("wait_secs"))
        if action in ("activate", "deactivate"):
            return service.set_status(name, "active" if action == "activate" else "inactive")
        if action == "rebalance":
            return service.rebalance(name, body)
        raise ApiError(404, f"no such action {action!r} (kill, activate, deactivate, rebalance)")

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")


class ApiServer:
    def __init__(self, nimbus: Nimbus, host: str, port: int) -> None:
        handler = type("Handler", (_Handler,), {"nimbus": nimbus})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="nimbus-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
