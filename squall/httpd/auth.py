"""Who is asking and whether they may: a bearer token checked against the keyring (re-read
when it changes on disk, so a rotated token works without a restart), Storm's authorizer
(squall.security.authz), and an audit line per mutating request.

Local mode's ``--ui`` has no keyring: :class:`RunToken` is the same gate around one random
token made for the run, which may also come as a cookie (the browser's, see
squall.httpd.loopback)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

import structlog
from starlette.requests import cookie_parser

from squall.security import authz
from squall.security.keyring import KeyringWatch, keyring_path

audit_log = structlog.get_logger("squall.audit")


class Unauthorized(Exception):
    """No valid credentials (401), or credentials that may not do this (403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Gate:
    """Authentication and authorization for one nimbus (or None when insecure)."""

    # The cookie that may carry the token when no Authorization header does (None: none may).
    cookie: str | None = None
    missing = ("authentication required: send 'Authorization: Bearer <token>' "
               "(the squall CLI does, from the keyring; `squall ui` prints the web UI's signed-in address)")
    invalid = "invalid token"

    def __init__(self, conf: dict[str, Any], watch: KeyringWatch) -> None:
        self.conf = conf
        self.watch = watch

    @classmethod
    def for_conf(cls, conf: dict[str, Any]) -> Gate | None:
        if not conf["squall.secure"]:
            return None
        return cls(conf, KeyringWatch(keyring_path(conf)))

    def authenticate(self, header: str | None, cookies: str | None = None) -> str:
        """The user the Authorization header's token (else :attr:`cookie` in the ``cookies``
        header) is; Unauthorized (401) when there is none or it is no one's."""
        if header:
            scheme, _, token = header.strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthorized(401, "the Authorization header must be 'Bearer <token>'")
        else:
            token = cookie_parser(cookies or "").get(self.cookie, "") if self.cookie else ""
            if not token:
                raise Unauthorized(401, self.missing)
        user = self.identify(token.strip())
        if user is None:
            raise Unauthorized(401, self.invalid)
        return user

    def identify(self, token: str) -> str | None:
        return self.watch.current().authenticate(token)

    def authorize(self, user: str, action: str, topology: dict[str, Any] | None = None) -> None:
        decision = authz.decide(user, action, self.conf, topology)
        if not decision.allowed:
            raise Unauthorized(403, decision.reason)

    @staticmethod
    def audit(user: str | None, method: str, path: str, status: int, client: str, **extra: Any) -> None:
        audit_log.info("audit", user=user, method=method, path=path, status=status, client=client,
                       outcome="ok" if status < 400 else "refused", **extra)


class RunToken(Gate):
    """Local mode's gate: one random token for the run, known to whoever started it (the
    address ``squall local --ui`` prints carries it).  Holding it makes you that developer,
    who may do everything: there is no one else to authorize."""

    USER = "local"
    missing = ("not signed in: open the address `squall local --ui` printed when it started "
               "('UI at http://127.0.0.1:PORT/?token=...'), or send 'Authorization: Bearer <token>'")
    invalid = "not this run's token: open the address `squall local --ui` printed when it started"

    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self.conf: dict[str, Any] = {}
        # Named after the token, not the port (cookies ignore ports): two runs at once,
        # each in a tab of one browser, keep a cookie each.
        self.cookie = "squall-ui-" + hashlib.sha256(self.token.encode()).hexdigest()[:16]

    def identify(self, token: str) -> str | None:
        # In constant time: how long a refusal takes says nothing of how much of the token was right.
        return self.USER if hmac.compare_digest(token.encode(), self.token.encode()) else None

    def authorize(self, user: str, action: str, topology: dict[str, Any] | None = None) -> None:
        """The token's holder may do everything."""
