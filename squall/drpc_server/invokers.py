"""Which topologies a DRPC server lets fetch and answer requests, and the gate that tells
them from users.

A topology's workers hold no user's token (they run users' code), so a topology proves
itself with a credential of its own: ``sqd_<topology id>.<random>``, made by nimbus when
it accepts the topology and handed to its workers in their secrets.json (with the CA the
server's certificate is signed by).  Nimbus writes the credential's SHA-256 to ZooKeeper
(``drpc/<topology id>.<sha256>``: squall.cluster.state); the server follows those nodes
with one watch and checks a credential in memory, in constant time: nothing a stranger
sends makes it read ZooKeeper, and it keeps checking through a ZooKeeper outage with
what it last saw.  A killed topology's node is removed, and its credential stops working
when the watch hears of it.

Why not a user's token, or one cluster-wide secret: a worker of a topology would then hold
what lets it act as someone else, or as every topology, for ever.  The credential says
which topology; which functions it may serve follows from the topology's owner
(squall.drpc_server.ownership).

Users: the keyring's token hashes as the leading nimbus publishes them in ZooKeeper
(``users``, followed with one watch: :class:`PublishedUsers`), so a user added to
nimbus's keyring is let in here within nimbus's next round, and a removed one no longer;
the server's own keyring file only while nothing is published.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from typing import Any

from squall.httpd.auth import Gate
from squall.security.keyring import DRPC_TOKEN_PREFIX, KeyringWatch, token_hash

TOPOLOGY = "topology:"  # the principal a topology's credential stands for: topology:<id>


class Invokers:
    """topology id -> the SHA-256 (hex) of its DRPC credential, as the watch last saw."""

    def __init__(self) -> None:
        self._hashes: dict[str, str] = {}
        self._live: frozenset[str] = frozenset()
        self.seen = threading.Event()  # the watch has reported at least once

    def update(self, hashes: dict[str, str]) -> None:
        """From the watch's thread: replaced whole, so a reader sees one version or the other."""
        self._hashes = dict(hashes)
        self._live = frozenset(self._hashes)
        self.seen.set()

    def __len__(self) -> int:
        return len(self._hashes)

    def live(self) -> frozenset[str]:
        """The topologies holding a credential now: every topology the cluster has."""
        return self._live

    def identify(self, token: str) -> str | None:
        """``topology:<id>`` for a valid credential, else None."""
        if not token.startswith(DRPC_TOKEN_PREFIX):
            return None
        topology_id = token[len(DRPC_TOKEN_PREFIX):].partition(".")[0]
        known = self._hashes.get(topology_id)
        if known is None:
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        return TOPOLOGY + topology_id if hmac.compare_digest(known, digest) else None


class PublishedUsers:
    """The users nimbus publishes (squall.cluster.state ``users``): token hash -> user."""

    def __init__(self) -> None:
        self._by_hash: dict[str, str] | None = None  # None: nothing published

    def update(self, users: dict[str, list[str]] | None) -> None:
        """From the watch's thread: replaced whole."""
        self._by_hash = None if users is None else {h: name for name, hashes in users.items() for h in hashes}

    @property
    def published(self) -> bool:
        return self._by_hash is not None

    def authenticate(self, token: str) -> str | None:
        # A lookup by the token's SHA-256: how long it takes says nothing of the token itself.
        return (self._by_hash or {}).get(token_hash(token))


class DrpcGate(Gate):
    """Nimbus's gate (the keyring's users, re-read when it changes), and the topologies'
    credentials besides."""

    missing = ("authentication required: send 'Authorization: Bearer <token>' (DRPCClient and "
               "`squall drpc-client` send the keyring's)")

    def __init__(self, conf: dict[str, Any], watch: KeyringWatch, invokers: Invokers,
                 users: PublishedUsers | None = None) -> None:
        super().__init__(conf, watch)
        self.invokers = invokers
        self.users = users or PublishedUsers()

    def identify(self, token: str) -> str | None:
        if token.startswith(DRPC_TOKEN_PREFIX):
            return self.invokers.identify(token)
        if self.users.published:
            return self.users.authenticate(token)
        return super().identify(token)
