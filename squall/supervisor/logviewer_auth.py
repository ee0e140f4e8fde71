"""Who is asking a logviewer: a token nimbus minted for this logviewer (the format and the
checks: squall.security.logtokens), never a user's own token.

The keys come from ZooKeeper, where nimbus publishes them (squall.cluster.state
``logviewerkeys``, watched by the supervisor); one is trusted only when the CA certificate
in this supervisor's keyring verifies its endorsement, so writing to ZooKeeper (which this
supervisor, and others, may) does not let anyone mint.  Who may read which log is decided
after, by the readers records (squall.security.authz.may_read_logs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from squall.httpd.auth import Gate, Unauthorized
from squall.security import logtokens
from squall.security.keyring import KeyringWatch, keyring_path

log = structlog.get_logger("squall.supervisor.logviewer")

NOT_MINTED = ("this logviewer takes only the tokens nimbus mints for it, never a user's own token: open "
              "the log from the UI, use `squall logs`, or POST {\"logviewer\": <this logviewer's URL>} to "
              "nimbus's /api/v1/logviewer/token")
NO_KEY = "this logviewer has no key from nimbus yet to check tokens with (nimbus publishes it at start)"


class LogviewerGate(Gate):
    """The logviewer's gate: minted tokens for ``audience`` (this logviewer's URL as it
    registers) under the keys nimbus published and the CA endorsed."""

    missing = ("authentication required: send 'Authorization: Bearer <token>' with a token nimbus minted "
               "for this logviewer (the UI's log links and `squall logs` do)")

    def __init__(self, conf: dict[str, Any], watch: KeyringWatch,
                 now: Callable[[], float] = time.time) -> None:
        super().__init__(conf, watch)
        self.now = now
        self.audience = ""  # set once the server is bound: its URL
        self.keys: Mapping[str, Ed25519PublicKey] = {}  # replaced whole, never changed in place

    @classmethod
    def for_conf(cls, conf: dict[str, Any], now: Callable[[], float] = time.time) -> LogviewerGate | None:
        if not conf["squall.secure"]:
            return None
        return cls(conf, KeyringWatch(keyring_path(conf)), now)

    def trust(self, records: list[dict[str, Any]]) -> None:
        """The keys nimbus published now (on the ZooKeeper watch's thread)."""
        ca_pem = self.watch.current().ca_pem
        if not ca_pem:
            log.error("the keyring holds no CA certificate: no token key can be trusted",
                      keyring=str(self.watch.path))
            self.keys = {}
            return
        keys, dropped = logtokens.trusted_keys(records, ca_pem)
        for why in dropped:
            log.warning("logviewer token key refused", reason=why)
        self.keys = keys
        log.info("logviewer token keys", kids=sorted(keys))

    def identify(self, token: str) -> str | None:
        """The user the token names; Unauthorized (saying why) when it is no token for here."""
        if not logtokens.is_minted(token):
            raise Unauthorized(401, NOT_MINTED)
        keys = self.keys
        if not keys:
            raise Unauthorized(503, NO_KEY)
        try:
            return logtokens.verify(token, keys, self.audience, self.now())
        except logtokens.BadToken as e:
            raise Unauthorized(401, f"invalid token: {e}") from None
