"""In front of every daemon's routes (nimbus's and local mode's app, a DRPC server's, a
logviewer's): :class:`Guard` -- authentication, the request budget and the audit.

Secure mode (``squall.secure``), and local mode's ``--ui`` (its run's token, which a browser
holds as a cookie: squall.httpd.auth.RunToken, squall.httpd.loopback): every request but the
UI's own static files carries a token (``Authorization: Bearer <token>``, or that cookie);
every POST leaves an audit line, and so does every GET of Storm's profiling paths (its UI
sends them as GETs, and they dump, profile and restart workers); every answer has its secrets
redacted.  At most
``max_requests`` authenticated requests are served at once, and at most ``per_user`` of one
user's (squall.httpd.budget); past either a request is answered at once (503 busy, 429 for
that user), never queued behind a slow one.  Only those who presented a token count against
that budget: strangers are refused (401) before it, so they cannot use it up
(squall.httpd.connections bounds their connections).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from squall.httpd.answers import refusal
from squall.httpd.auth import Gate, Unauthorized
from squall.httpd.budget import RequestBudget
from squall.httpd.connections import CONNECTION


def public(method: str, path: str) -> bool:
    """The UI's own files: the same in every install, no data in them."""
    return method in ("GET", "HEAD") and (path in ("/", "/ui") or path.startswith("/ui/"))


def raw_api_path(scope: Scope) -> Scope:
    """Under /api/ the route table matches the path as sent (empty segments dropped), each
    parameter decoded on its own (squall.ui.routes.Segment): ``a%2Fb`` is one segment."""
    if not scope["path"].startswith("/api/"):
        return scope
    raw = scope.get("raw_path") or scope["path"].encode()
    segments = [s for s in raw.decode("latin-1").split("/") if s]
    return {**scope, "path": "/" + "/".join(segments)}


class Guard:
    """Authentication, the request budget and the audit, around the routes."""

    def __init__(self, app: ASGIApp, gate: Gate | None, max_requests: int,
                 audit_successes: bool = True, per_user: int | None = None, server: str = "nimbus") -> None:
        """``audit_successes``: False for a server whose POSTs are its traffic, not changes (a
        DRPC server's calls): then only the refused ones leave an audit line.  ``per_user``:
        the most requests one user may have open at once (None: no bound but the total);
        ``server``: what the refusals call this server."""
        self.app = app
        self.gate = gate
        self.max_requests = max_requests
        self.audit_successes = audit_successes
        # Touched on the server's event loop only.
        self.budget = RequestBudget(max_requests, per_user, server)

    @property
    def serving(self) -> int:
        return self.budget.serving

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope = raw_api_path(scope)
        method = scope["method"]
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        user: str | None = None
        try:
            if public(method, scope["path"]):
                await self.app(scope, receive, sending)
                return
            if self.gate is not None:
                headers = Headers(scope=scope)
                try:
                    user = self.gate.authenticate(headers.get("authorization"), headers.get("cookie"))
                except Unauthorized as e:
                    answer = refusal(e.status, str(e), headers={"WWW-Authenticate": 'Bearer realm="squall"'})
                    await answer(scope, receive, sending)
                    return
            connection = scope.get("extensions", {}).get(CONNECTION)
            if connection is not None:
                connection.trusted()
            refused = self.budget.admit(user)
            if refused is not None:
                await refusal(refused.status, refused.reason)(scope, receive, sending)
                return
            try:
                scope.setdefault("state", {})["user"] = user
                await self.app(scope, receive, sending)
            finally:
                self.budget.release(user)
        finally:
            if changes(method, scope) and (self.audit_successes or not 0 < status < 400):
                audit(scope, user, status)


def changes(method: str, scope: Scope) -> bool:
    """Whether a request may change something (its audit line says who asked)."""
    return method not in ("GET", "HEAD") or b"/profiling/" in (scope.get("raw_path") or b"")


def audit(scope: Scope, user: str | None, status: int) -> None:
    """Who changed what, allowed or not (user None: insecure, or refused before anyone was
    authenticated)."""
    query = scope.get("query_string") or b""
    path = (scope.get("raw_path") or b"") + (b"?" + query if query else b"")
    client = (scope.get("client") or ("?",))[0]
    Gate.audit(user, scope["method"], path.decode("latin-1")[:300], status, client)
