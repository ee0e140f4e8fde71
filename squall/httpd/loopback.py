"""In front of local mode's UI (squall.local.ui), which listens on 127.0.0.1 for the browser
of the developer who ran it, and so is within reach of every page that browser opens:

* The Host must be this server's own loopback name and port, else 421: a page whose name
  an attacker points at 127.0.0.1 (DNS rebinding) sends its own name.
* A request that changes something (any method but GET and HEAD) that says where it comes
  from (Origin, else Referer) must come from this server's own origin, else 403.  The cookie
  is SameSite=Strict, but a page on another port of 127.0.0.1 is the same site, and cookies
  ignore ports.  A request that says nothing (curl) is judged by its token alone.
* The address ``squall local --ui`` prints, ``/?token=...``, signs in: the token becomes an
  HttpOnly, SameSite=Strict cookie and the browser is sent on to the same page without it,
  so the token leaves the address bar and never rides in a Referer.

Who may is the app's Guard (squall.httpd.guard) with a RunToken gate (squall.httpd.auth):
the cookie or a bearer token, 401 without.  The UI's own static files load without either; their
API calls then get the 401 and the page says how to sign in.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

import structlog
from starlette.datastructures import Headers
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from squall.httpd.answers import refusal
from squall.httpd.auth import RunToken
from squall.httpd.guard import audit, public

log = structlog.get_logger("squall.httpd.loopback")

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
SAFE_METHODS = ("GET", "HEAD")


def own_hosts(port: int) -> set[str]:
    """The Host headers this server answers to on ``port`` (a browser leaves out port 80)."""
    return {f"{name}:{port}" for name in LOOPBACK_NAMES} | (set(LOOPBACK_NAMES) if port == 80 else set())


def claimed_origin(headers: Headers) -> str | None:
    """Where the request says it comes from: its Origin, else its Referer's origin; None
    when it says neither."""
    if "origin" in headers:
        return headers["origin"]
    if "referer" not in headers:
        return None
    parts = urlsplit(headers["referer"])
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


class Loopback:
    """The Host and Origin checks and the sign-in address, around local mode's app."""

    def __init__(self, app: ASGIApp, gate: RunToken) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        method = scope["method"]
        port = (scope.get("server") or ("", 0))[1]  # the address this connection came in on
        host = headers.get("host", "").lower()
        if host not in own_hosts(port):
            await self._refuse(scope, receive, send, 421,
                               f"this is the Squall UI at 127.0.0.1:{port}, not {host or 'no host'!r}")
            return
        origin = claimed_origin(headers)
        if method not in SAFE_METHODS and origin is not None and origin != f"http://{host}":
            await self._refuse(scope, receive, send, 403,
                               f"cross-origin request refused: origin {origin!r} is not this UI's")
            return
        if method == "GET" and public(method, scope["path"]):
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            token = next((value for key, value in query if key == "token"), None)
            if token is not None:
                await self._sign_in(token, query, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _sign_in(self, token: str, query: list[tuple[str, str]], scope: Scope, receive: Receive,
                       send: Send) -> None:
        """The printed address: the token as a cookie, and on to the page without it."""
        if self.gate.identify(token) is None:
            await self._refuse(scope, receive, send, 401, self.gate.invalid)
            return
        rest = urlencode([(key, value) for key, value in query if key != "token"])
        page = scope["path"] + (f"?{rest}" if rest else "")
        answer = RedirectResponse(page, status_code=303)
        answer.set_cookie(self.gate.cookie, token, httponly=True, samesite="strict", path="/")
        log.info("signed in", page=scope["path"])
        await answer(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
        log.warning("request refused", method=scope["method"], path=scope["path"], status=status,
                    reason=message)
        if scope["method"] not in SAFE_METHODS:
            audit(scope, None, status)
        await refusal(status, message)(scope, receive, send)
