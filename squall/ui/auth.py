"""Who is asking and whether they may: a bearer token checked against the keyring (re-read
when it changes on disk, so a rotated token works without a restart), Storm's authorizer
(squall.security.authz), and an audit line per mutating request."""

from __future__ import annotations

from typing import Any

import structlog

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

    def __init__(self, conf: dict[str, Any], watch: KeyringWatch) -> None:
        self.conf = conf
        self.watch = watch

    @classmethod
    def for_conf(cls, conf: dict[str, Any]) -> Gate | None:
        if not conf["squall.secure"]:
            return None
        return cls(conf, KeyringWatch(keyring_path(conf)))

    def authenticate(self, header: str | None) -> str:
        if not header:
            raise Unauthorized(401, "authentication required: send 'Authorization: Bearer <token>' "
                                    "(the squall CLI does, from the keyring)")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized(401, "the Authorization header must be 'Bearer <token>'")
        user = self.watch.current().authenticate(token.strip())
        if user is None:
            raise Unauthorized(401, "invalid token")
        return user

    def authorize(self, user: str, action: str, topology: dict[str, Any] | None = None) -> None:
        decision = authz.decide(user, action, self.conf, topology)
        if not decision.allowed:
            raise Unauthorized(403, decision.reason)

    @staticmethod
    def audit(user: str | None, method: str, path: str, status: int, client: str, **extra: Any) -> None:
        audit_log.info("audit", user=user, method=method, path=path, status=status, client=client,
                       outcome="ok" if status < 400 else "refused", **extra)
