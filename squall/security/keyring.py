"""The cluster keyring: one JSON file, mode 0600, read by daemons and clients.

::

    {"format": 1, "cluster": "squall-5f1c...",
     "users": {"admin": {"tokens": ["sha256:<hex>", ...]}},     # who nimbus lets in
     "client": {"user": "admin", "token": "sq_..."},              # who the holder speaks as
     "zookeeper": {"user": "squall", "passwords": ["<current>", "<previous>"]},
     "tls": {"ca": PEM, "ca_key": PEM, "cert": PEM, "key": PEM}}

Nimbus keeps only a hash of each token (tokens are 256 random bits, so a
plain SHA-256 is enough); the token itself is in the ``client`` section of the
keyring its user holds.  ``squall secrets init`` writes the cluster's keyring
with an ``admin`` identity; ``squall secrets user add NAME --out FILE`` writes
another user's keyring (their token and the CA, nothing else).

Rotation never stops a topology: a user may hold several tokens while clients
move to the new one (``user rotate``, then ``user retire``), and ZooKeeper's
digest ACLs name the current and the previous password, so daemons restarted
with a rotated keyring and those not yet restarted reach the same nodes.
Running workers hold their topology's CURVE key (squall.security.curve),
which no keyring rotation changes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import ssl
from pathlib import Path
from typing import Any

from squall.errors import ConfigError, SquallError
from squall.security import tls
from squall.security.admission import USER_RULE, is_user_name
from squall.security.files import write_private

FORMAT = 1
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
ENV_VAR = "SQUALL_KEYRING"
DEFAULT_PATH = "~/.squall/keyring.json"
ADMIN = "admin"
ZK_USER = "squall"
ZK_PASSWORDS_KEPT = 2  # the current one and the one before
# A topology's DRPC credential: sqd_<topology id>.<random>, issued by nimbus at submit and
# checked by DRPC servers against its hash in ZooKeeper (squall.drpc_server.invokers).
DRPC_TOKEN_PREFIX = "sqd_"


def keyring_path(conf: dict[str, Any]) -> Path:
    configured = conf.get("squall.keyring.path") or os.environ.get(ENV_VAR) or DEFAULT_PATH
    return Path(configured).expanduser()


def new_token() -> str:
    return "sq_" + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


class Keyring:
    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        self.data = data
        self.path = path

    # -- files -----------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keyring:
        path = Path(path).expanduser()
        try:
            mode = path.stat().st_mode
            text = path.read_text()
        except FileNotFoundError:
            msg = f"no keyring at {path}: run `squall secrets init` (or set squall.keyring.path)"
            raise ConfigError(msg) from None
        except OSError as e:
            msg = f"cannot read the keyring {path}: {e}"
            raise ConfigError(msg) from e
        if mode & 0o077:
            msg = (f"the keyring {path} is readable by others (mode {mode & 0o777:o}): "
                   f"`chmod 600 {path}`")
            raise ConfigError(msg)
        try:
            data = json.loads(text)
        except ValueError as e:
            msg = f"the keyring {path} is not valid JSON: {e}"
            raise ConfigError(msg) from e
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            msg = f"the keyring {path} is not a Squall keyring of format {FORMAT}"
            raise ConfigError(msg)
        return cls(data, path)

    @classmethod
    def for_conf(cls, conf: dict[str, Any]) -> Keyring:
        return cls.load(keyring_path(conf))

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write whole, 0600 from the first byte, then move into place."""
        target = Path(path or self.path or DEFAULT_PATH).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(target, json.dumps(self.data, indent=1, sort_keys=True), tmp_per_process=True)
        self.path = target
        return target

    # -- making one ------------------------------------------------------------

    @classmethod
    def create(cls, hosts: list[str] | None = None, cluster: str | None = None) -> tuple[Keyring, str]:
        """A new cluster keyring and the admin's token (also in its client section)."""
        cluster = cluster or f"squall-{secrets.token_hex(4)}"
        ca, ca_key = tls.new_ca(cluster)
        names = [*LOOPBACK_NAMES, socket.gethostname(), *(hosts or [])]
        cert, key = tls.new_server_cert(ca, ca_key, names)
        token = new_token()
        data = {
            "format": FORMAT, "cluster": cluster,
            "users": {ADMIN: {"tokens": [token_hash(token)]}},
            "client": {"user": ADMIN, "token": token},
            "zookeeper": {"user": ZK_USER, "passwords": [secrets.token_urlsafe(24)]},
            "tls": {"ca": ca, "ca_key": ca_key, "cert": cert, "key": key, "hosts": names},
        }
        return cls(data), token

    def client_keyring(self, user: str, token: str) -> Keyring:
        """What a user of the API needs: their token and the CA, nothing of the cluster's."""
        out: dict[str, Any] = {"format": FORMAT, "cluster": self.data.get("cluster"),
                               "client": {"user": user, "token": token}}
        if self.ca_pem:
            out["tls"] = {"ca": self.ca_pem}
        return Keyring(out)

    def supervisor_keyring(self, hosts: list[str] | None = None) -> Keyring:
        """What a supervisor needs: ZooKeeper's credentials, the CA's certificate (its
        logviewer trusts the token keys the CA endorsed: squall.security.logtokens) and a
        certificate of its own for the logviewer, signed by the cluster's CA for ``hosts``
        only (none given: this machine's loopback names).  No user's token nor their hashes
        (its logviewer takes only the tokens nimbus mints, so a user added later reads their
        logs at once), no nimbus or CA key, and no certificate for nimbus's names: the
        workers it starts run users' code, and a key that passed for nimbus would let
        whoever took it read the tokens users send nimbus."""
        return self._daemon_keyring(hosts, users=False)

    def drpc_keyring(self, hosts: list[str] | None = None) -> Keyring:
        """What a DRPC server needs, the same as a supervisor: ZooKeeper's credentials (it
        reads the hashes of the topologies' DRPC credentials there), the hashes of the
        users' tokens (the clients it serves) and a certificate of its own, signed by the
        cluster's CA for ``hosts`` only (none given: this machine's loopback names)."""
        return self._daemon_keyring(hosts)

    def _daemon_keyring(self, hosts: list[str] | None, users: bool = True) -> Keyring:
        out: dict[str, Any] = {"format": FORMAT, "cluster": self.data.get("cluster"),
                               "zookeeper": self.data.get("zookeeper")}
        if users:
            out["users"] = {name: {"tokens": list(entry.get("tokens", ()))}
                            for name, entry in self.users.items()}
        section = self.data.get("tls") or {}
        if self.ca_pem:
            out["tls"] = {"ca": self.ca_pem}
            if section.get("ca_key"):
                names = list(dict.fromkeys(hosts or LOOPBACK_NAMES))
                cert, key = tls.new_server_cert(self.ca_pem, section["ca_key"], names)
                out["tls"].update(cert=cert, key=key, hosts=names)
        return Keyring(out)

    # -- API users ---------------------------------------------------------------

    @property
    def users(self) -> dict[str, dict[str, Any]]:
        return self.data.setdefault("users", {})

    def add_user(self, name: str) -> str:
        if not is_user_name(name):  # it names the user's folders on every node
            msg = f"a user name is {USER_RULE}, got {name!r}"
            raise ConfigError(msg)
        if name in self.users:
            msg = f"user {name!r} exists already (rotate its token with `squall secrets user rotate`)"
            raise ConfigError(msg)
        token = new_token()
        self.users[name] = {"tokens": [token_hash(token)]}
        return token

    def rotate_user(self, name: str) -> str:
        """A new token for ``name``; the old ones stay valid until :meth:`retire_user`."""
        entry = self._user(name)
        token = new_token()
        entry["tokens"].append(token_hash(token))
        if (self.data.get("client") or {}).get("user") == name:
            self.data["client"]["token"] = token
        return token

    def retire_user(self, name: str) -> int:
        """Keep only ``name``'s newest token; how many were dropped."""
        entry = self._user(name)
        dropped = len(entry["tokens"]) - 1
        entry["tokens"] = entry["tokens"][-1:]
        return dropped

    def remove_user(self, name: str) -> None:
        self._user(name)
        del self.users[name]

    def _user(self, name: str) -> dict[str, Any]:
        entry = self.users.get(name)
        if entry is None:
            msg = f"no user {name!r} in the keyring (users: {sorted(self.users)})"
            raise ConfigError(msg)
        return entry

    def authenticate(self, token: str) -> str | None:
        """The user whose token this is, or None.  Compared in constant time."""
        digest = token_hash(token)
        found = None
        for name, entry in self.users.items():
            for known in entry.get("tokens", ()):
                if hmac.compare_digest(known, digest):
                    found = name
        return found

    # -- what the holder uses ------------------------------------------------------

    @property
    def client_user(self) -> str | None:
        return (self.data.get("client") or {}).get("user")

    @property
    def client_token(self) -> str | None:
        return (self.data.get("client") or {}).get("token")

    @property
    def ca_pem(self) -> str | None:
        return (self.data.get("tls") or {}).get("ca")

    @property
    def ca_key_pem(self) -> str | None:
        """The CA's private key: in the cluster keyring (nimbus's) only."""
        return (self.data.get("tls") or {}).get("ca_key")

    def server_cert(self) -> tuple[str, str]:
        section = self.data.get("tls") or {}
        if not section.get("cert") or not section.get("key"):
            msg = (f"the keyring {self.path} has no nimbus certificate: run `squall secrets init` "
                   "or set nimbus.tls.cert.path and nimbus.tls.key.path")
            raise ConfigError(msg)
        return section["cert"], section["key"]

    # -- ZooKeeper ----------------------------------------------------------------

    def zookeeper_credentials(self) -> list[tuple[str, str]]:
        """(user, password) pairs, the current first; empty if the keyring has none."""
        section = self.data.get("zookeeper") or {}
        user = section.get("user", ZK_USER)
        return [(user, p) for p in section.get("passwords", ())]

    def rotate_zookeeper(self) -> None:
        section = self.data.setdefault("zookeeper", {"user": ZK_USER, "passwords": []})
        section["passwords"] = [secrets.token_urlsafe(24), *section["passwords"]][:ZK_PASSWORDS_KEPT]


def client_credentials(conf: dict[str, Any]) -> tuple[str | None, ssl.SSLContext | None]:
    """(token, TLS context) for a client of the cluster's HTTP services (nimbus, the
    logviewers, DRPC servers) under ``conf``: the keyring's client token, and its CA (or
    ``nimbus.tls.ca.path``) as what to trust; (None, None) when insecure."""
    if not conf["squall.secure"]:
        return None, None
    keyring = Keyring.for_conf(conf)
    ca_path = conf.get("nimbus.tls.ca.path")
    context = tls.client_context(ca_path=ca_path) if ca_path else tls.client_context(ca_pem=keyring.ca_pem)
    if keyring.client_token is None:
        msg = f"the keyring {keyring.path} holds no client token (it needs a 'client' section)"
        raise SquallError(msg)
    return keyring.client_token, context


class KeyringWatch:
    """The keyring as of its last change on disk: nimbus sees rotated tokens
    without a restart.  A rewrite that does not load keeps the last good one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._keyring = Keyring.load(path)
        self._stamp = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def current(self) -> Keyring:
        stamp = self._stat()
        if stamp is not None and stamp != self._stamp:
            try:
                self._keyring = Keyring.load(self.path)
                self._stamp = stamp
            except ConfigError:
                pass
        return self._keyring
