"""Short-lived tokens that nimbus mints for one user and one logviewer, as a pure core.

A logviewer runs on a supervisor, beside workers that run users' code, so it must never
see a user's own token (whoever took it there would speak for that user to nimbus), and
what it holds must not let it make tokens.  So nimbus signs, and logviewers only verify:

* nimbus's **signing key** is an Ed25519 key derived (HKDF-SHA256) from the keyring's CA
  private key, which only nimbus's keyring holds (a supervisor's has the CA certificate,
  never its key).  Every nimbus of the cluster derives the same key with no change to the
  keyring and none to copy: a token one nimbus minted verifies after another took over.
* its **public record** ({kid, public, endorsement}) is published in ZooKeeper, where
  supervisors read it.  ZooKeeper's password is in every supervisor's keyring too, so the
  record carries an *endorsement*, the CA key's signature over the public key: a logviewer
  trusts a key only when the CA certificate in its own keyring verifies that, so no one
  who can write to ZooKeeper (a supervisor, a DRPC server) can plant a key of their own.
* a **token** is ``sqlv1.<payload>.<signature>`` (base64url), the payload
  ``{"kid", "sub": user, "aud": the logviewer's base URL as it registered, "iat", "exp",
  "jti"}`` and the signature Ed25519 over ``sqlv1.<payload>``.  A logviewer takes it only
  for its own URL, before ``exp``, signed by a key it trusts.

Time is wall time (``now()`` passed in): nimbus and supervisors are on other machines,
so only their clocks' agreement (NTP) makes ``exp`` mean the same on both; a token
claiming to come from more than :data:`SKEW_SECS` in the future is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "sqlv1."
MAX_TOKEN_CHARS = 2048  # far above a real one (~300): a bigger one is not parsed at all
SKEW_SECS = 30.0  # how far ahead of the logviewer's clock nimbus's may be
DERIVATION = b"squall logviewer token signing key v1"  # HKDF's info: this key and no other
ENDORSED = b"squall logviewer key v1\n"  # what the CA signs, before the public key


DEFAULT_PORTS = {"http": 80, "https": 443}


class BadToken(Exception):
    """Not a token this logviewer takes; the message says why (it names no secret)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as e:
        msg = "malformed token"
        raise BadToken(msg) from e


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public: Ed25519PublicKey) -> str:
    return hashlib.sha256(_raw(public)).hexdigest()[:16]


def _ca_key(ca_key_pem: str) -> ec.EllipticCurvePrivateKey:
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        msg = "the keyring's CA key is not an EC key"
        raise ValueError(msg)
    return ca_key


def signing_key(ca_key_pem: str) -> Ed25519PrivateKey:
    """The cluster's token signing key, the same for every holder of ``ca_key_pem``."""
    ca_key = _ca_key(ca_key_pem)
    secret = ca_key.private_numbers().private_value.to_bytes((ca_key.curve.key_size + 7) // 8, "big")
    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=DERIVATION).derive(secret)
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_record(key: Ed25519PrivateKey, ca_key_pem: str) -> dict[str, str]:
    """What nimbus publishes for logviewers: the public key, endorsed by the CA key."""
    ca_key = _ca_key(ca_key_pem)
    public = _raw(key.public_key())
    endorsement = ca_key.sign(ENDORSED + public, ec.ECDSA(hashes.SHA256()))
    return {"kid": key_id(key.public_key()), "public": _b64(public), "endorsement": _b64(endorsement)}


def _endorsed(record: Any, ca_public: Any) -> Ed25519PublicKey:
    """The public key of ``record`` if the CA endorsed it; BadToken else."""
    if not isinstance(record, Mapping) or not isinstance(ca_public, ec.EllipticCurvePublicKey):
        msg = "not a key record of an EC CA"
        raise BadToken(msg)
    raw = _unb64(str(record.get("public", "")))
    try:
        endorsement = _unb64(str(record.get("endorsement", "")))
        ca_public.verify(endorsement, ENDORSED + raw, ec.ECDSA(hashes.SHA256()))
        return Ed25519PublicKey.from_public_bytes(raw)
    except (InvalidSignature, ValueError) as e:
        msg = "not endorsed by the cluster's CA"
        raise BadToken(msg) from e


def trusted_keys(records: Iterable[Any], ca_pem: str) -> tuple[dict[str, Ed25519PublicKey], list[str]]:
    """({kid: key} of the records the CA certificate ``ca_pem`` endorsed, [why each other
    record was dropped])."""
    ca_public = x509.load_pem_x509_certificate(ca_pem.encode()).public_key()
    keys: dict[str, Ed25519PublicKey] = {}
    dropped: list[str] = []
    for record in records:
        try:
            public = _endorsed(record, ca_public)
        except BadToken as e:
            kid = record.get("kid") if isinstance(record, Mapping) else None
            dropped.append(f"key {str(kid)[:20]}: {e}")
            continue
        keys[key_id(public)] = public
    return keys, dropped


@dataclass(frozen=True)
class Minted:
    token: str
    user: str
    audience: str
    expires: float


class Minter:
    """Nimbus's side: tokens for a user and a logviewer, valid ``validity`` seconds."""

    def __init__(self, key: Ed25519PrivateKey, validity: float, now: Callable[[], float]) -> None:
        self.key = key
        self.kid = key_id(key.public_key())
        self.validity = validity
        self.now = now

    def mint(self, user: str, audience: str) -> Minted:
        issued = self.now()
        payload = {"kid": self.kid, "sub": user, "aud": audience, "iat": round(issued, 3),
                   "exp": round(issued + self.validity, 3), "jti": secrets.token_urlsafe(12)}
        body = PREFIX + _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return Minted(f"{body}.{_b64(self.key.sign(body.encode()))}", user, audience, payload["exp"])


def is_minted(token: str) -> bool:
    """Whether ``token`` has a minted token's shape (a user's own token has not)."""
    return token.startswith(PREFIX)


def verify(token: str, keys: Mapping[str, Ed25519PublicKey], audience: str, now: float) -> str:
    """The user a token minted for ``audience`` speaks for; BadToken else."""
    if len(token) > MAX_TOKEN_CHARS or not is_minted(token) or token.count(".") != 2:
        msg = "malformed token"
        raise BadToken(msg)
    body, _, signature = token.rpartition(".")
    try:
        payload = json.loads(_unb64(body[len(PREFIX):]))
    except (ValueError, RecursionError) as e:  # read before the signature is: anything may be here
        msg = "malformed token"
        raise BadToken(msg) from e
    if not isinstance(payload, dict):
        msg = "malformed token"
        raise BadToken(msg)
    key = keys.get(str(payload.get("kid")))
    if key is None:
        msg = "signed by a key this logviewer does not trust (not nimbus's, or not published yet)"
        raise BadToken(msg)
    try:
        key.verify(_unb64(signature), body.encode())
    except InvalidSignature as e:
        msg = "bad signature"
        raise BadToken(msg) from e
    # Signed by nimbus from here on: the fields are what nimbus wrote.
    user, aud, issued, expires = (payload.get(k) for k in ("sub", "aud", "iat", "exp"))
    if not isinstance(user, str) or not user or not isinstance(aud, str):
        msg = "malformed token"
        raise BadToken(msg)
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (issued, expires)):
        msg = "malformed token"
        raise BadToken(msg)
    if aud != audience:
        msg = f"minted for another logviewer ({aud[:200]}), not this one"
        raise BadToken(msg)
    if now >= expires:
        msg = "expired: ask nimbus for a new one (open the log again)"
        raise BadToken(msg)
    if issued > now + SKEW_SECS:
        msg = "issued in the future: this node's clock is behind nimbus's"
        raise BadToken(msg)
    return user


def origin(url: Any) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a logviewer's base URL (a browser's ``location.origin``
    drops a default port, the address a supervisor registers keeps it); None when ``url``
    is not a bare http(s) base URL."""
    if not isinstance(url, str) or len(url) > 500:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def registered(url: Any, logviewers: Iterable[str]) -> str | None:
    """The registered base URL (of ``logviewers``) that ``url`` names, as it registered."""
    wanted = origin(url)
    if wanted is None:
        return None
    return next((known for known in logviewers if origin(known) == wanted), None)
