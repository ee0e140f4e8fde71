"""The tokens nimbus mints for reading one logviewer (the format and the checks:
squall.security.logtokens): its key, derived from the keyring nimbus has now (re-read when
it changes on disk), published in ZooKeeper for the supervisors, and a token only for a
logviewer a supervisor registered there.

A user asks with their own token, which goes to nimbus only; the logviewer gets a token
that names them, that one logviewer and a few minutes, and that nothing it holds could
have made.  Who may read which log is the logviewer's to decide (its readers records).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from squall.cluster.state import ClusterState
from squall.errors import InvalidRequest, NotFound, Unavailable
from squall.security import logtokens
from squall.security.keyring import KeyringWatch, keyring_path

log = structlog.get_logger("squall.nimbus.logtokens")

NO_CA_KEY = ("this nimbus's keyring holds no CA key, so it cannot mint logviewer tokens: run nimbus "
             "with the cluster keyring `squall secrets init` wrote")


class LogviewerTokens:
    def __init__(self, state: ClusterState, conf: dict[str, Any], now: Callable[[], float] = time.time,
                 keyring: KeyringWatch | None = None) -> None:
        self.state = state
        self.validity = float(conf["logviewer.token.validity.secs"])
        self.now = now
        self.keyring = keyring or (KeyringWatch(keyring_path(conf)) if conf["squall.secure"] else None)
        self._lock = threading.Lock()  # requests mint from several threads
        self._ca_key: str | None = None
        self._minter: logtokens.Minter | None = None
        self._record: dict[str, str] = {}
        self._published: str | None = None  # the kid last published

    def _current(self) -> logtokens.Minter:
        """The minter of the keyring's CA key, its key published first (a new keyring's key
        is published before any token it signed leaves nimbus)."""
        assert self.keyring is not None
        ca_key = self.keyring.current().ca_key_pem
        if not ca_key:
            raise Unavailable(NO_CA_KEY)
        with self._lock:
            if ca_key != self._ca_key or self._minter is None:
                key = logtokens.signing_key(ca_key)
                self._minter = logtokens.Minter(key, self.validity, self.now)
                self._record = logtokens.public_record(key, ca_key)
                self._ca_key = ca_key
            minter, record = self._minter, self._record
            if self._published != minter.kid:
                try:
                    added = self.state.add_logviewer_key(record)
                except Exception as e:  # ZooKeeper trouble: a token no logviewer could check is no use
                    msg = f"the logviewers' token key could not be published: {type(e).__name__} {e}"
                    raise Unavailable(msg) from e
                self._published = minter.kid
                log.info("logviewer token key published", kid=minter.kid, new=added)
        return minter

    def publish(self) -> None:
        """At nimbus's start: the key out before anyone asks for a token.  A failure is
        said, and the first token asked for tries again."""
        if self.keyring is None:
            return
        try:
            self._current()
        except Exception as e:  # noqa: BLE001 - ZooKeeper trouble, a keyring without a CA key: later
            log.warning("logviewer token key not published yet", error=str(e))

    def registered(self) -> list[str]:
        """The logviewers' base URLs as their supervisors registered them."""
        return [info["logviewer"] for info in self.state.supervisors().values()
                if isinstance(info.get("logviewer"), str)]

    def mint(self, user: str | None, body: Any) -> dict[str, Any]:
        """The answer to ``POST /api/v1/logviewer/token`` ``{"logviewer": <its base URL>}``."""
        asked = body.get("logviewer") if isinstance(body, dict) else None
        if not isinstance(asked, str) or not asked:
            raise InvalidRequest('the body must be {"logviewer": "<the logviewer\'s base URL>"}')
        audience = logtokens.registered(asked, self.registered())
        if audience is None:
            msg = f"no supervisor registered a logviewer at {asked[:200]!r}"
            raise NotFound(msg)
        if self.keyring is None or user is None:  # insecure: logviewers take no token
            return {"token": None, "logviewer": audience}
        minted = self._current().mint(user, audience)
        return {"token": minted.token, "logviewer": audience, "user": user, "expires": minted.expires,
                "expires_in_secs": self.validity}
